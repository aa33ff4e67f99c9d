"""A burst of replies under Slack's per-channel limit: a batch's replies of one thread are one
message; one that finds the channel's post budget spent is folded into the thread's latest
reply (chat.update, its metadata naming every transition it shows). The ledger records each
transition once across a crash mid-post or mid-fold, and a 429 from Slack is waited out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.fleet_alerts import FLEET, in_time, run_name, storm
from harness.slack_server import FakeSlack, Message, VirtualClock
from runwatch.exceptions import SlackError
from runwatch.notify.slack import SlackPoster
from runwatch.stream.alerts import Alert

from .test_slack_notifier import TOKEN, Rig, shown


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",), clock=VirtualClock())
    fake.add_channel("#rl-alerts", "C-ALERTS")
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def rig(slack: FakeSlack, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(slack, tmp_path / "notify.sqlite")
    try:
        yield r
    finally:
        r.notifier.close()


def firings(n: int) -> tuple[Alert, list[Alert]]:
    """The fleet alert, and the first firing of `n` member runs."""
    s = storm(n, initial=0)
    return s["@fleet"][0], [s[run_name(i)][0] for i in range(n)]


def thread(slack: FakeSlack) -> tuple[Message, list[Message]]:
    (root,) = slack.roots()
    return root, slack.replies(root)


def ids(m: Message) -> list[str]:
    return list(((m.metadata or {}).get("event_payload") or {}).get("alert_ids") or [])


def spend_the_post_budget(rig: Rig) -> None:
    """Another burst just went out in the channel: its post budget is spent for now."""
    pace = rig.notifier.poster.paces.of("chat.postMessage", "C-ALERTS")
    assert pace is not None
    while pace.ready() <= 0:
        pace.reserve()


def test_a_batch_s_replies_in_one_thread_are_one_message(rig: Rig, slack: FakeSlack) -> None:
    fired, members = firings(5)
    assert rig.notifier.notify_many([fired, *members]) == ["sent"] * 6
    _root, replies = thread(slack)
    (reply,) = replies
    assert ids(reply) == [m.id for m in members]  # each shown once, in order
    for m in members:
        assert m.run in reply.text
    assert slack.count("chat.postMessage") == 2


def test_a_reply_that_finds_the_channel_busy_is_folded_into_the_latest(
    rig: Rig, slack: FakeSlack
) -> None:
    fired, members = firings(3)
    rig.notifier.notify_many([fired, members[0]])
    spend_the_post_budget(rig)
    assert rig.notifier.notify(members[1]) == "sent"
    assert rig.notifier.notify(members[2]) == "sent"
    _root, (reply,) = thread(slack)  # no second reply: folded into the first
    assert ids(reply) == [m.id for m in members]
    assert len(reply.updates) == 2
    assert all(m.run in reply.text for m in members)


def test_a_full_latest_reply_is_not_folded_into(rig: Rig, slack: FakeSlack) -> None:
    from runwatch.notify.batch import MAX_SECTIONS

    fired, members = firings(MAX_SECTIONS + 1)
    rig.notifier.notify_many([fired, *members[:MAX_SECTIONS]])
    spend_the_post_budget(rig)
    rig.notifier.notify(members[-1])  # waits for its slot and posts
    _root, replies = thread(slack)
    assert [len(ids(r)) for r in replies] == [MAX_SECTIONS, 1]
    assert sorted(shown(slack)) == sorted([fired.id, *(m.id for m in members)])


def test_a_fold_slack_refuses_is_posted(rig: Rig, slack: FakeSlack) -> None:
    fired, members = firings(2)
    rig.notifier.notify_many([fired, members[0]])
    spend_the_post_budget(rig)
    slack.fail("chat.update", 200, error="message_not_found")  # the reply was deleted
    assert rig.notifier.notify(members[1]) == "sent"
    _root, replies = thread(slack)
    assert [ids(r) for r in replies] == [[members[0].id], [members[1].id]]


def crash_on(rig: Rig, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """The notifier killed after Slack took a message (or an edit) showing several
    transitions, before its ledger recorded them."""
    store = rig.notifier.store
    real = store.sent_and_thread

    def crash(ident: Any, kind: str, *args: Any, **kwargs: Any) -> None:
        if kind == what and not isinstance(ident, str) and len(ident) > 1:
            raise KeyboardInterrupt(f"killed between the {what} and the record")
        real(ident, kind, *args, **kwargs)

    monkeypatch.setattr(store, "sent_and_thread", crash)


def test_a_crash_after_slack_took_a_burst_s_message_neither_repeats_nor_loses(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired, members = firings(4)
    rig.notifier.notify(fired)
    crash_on(rig, monkeypatch, "reply")
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify_many(members)
    monkeypatch.undo()
    n = rig.restart()
    assert n.recover() == 4  # one look at the thread finds all four
    assert n.notify_many(members) == ["duplicate"] * 4
    _root, (reply,) = thread(slack)
    assert ids(reply) == [m.id for m in members]
    # the thread knows them: their resolves are shown, not skipped as never shown
    s = storm(4, initial=0)
    healed = [s[run_name(i)][-1] for i in range(4)]
    assert set(n.notify_many(healed)) == {"sent"}
    assert sorted(shown(slack)) == sorted([fired.id, *(a.id for a in members + healed)])


def test_a_crash_mid_fold_into_the_latest_reply_neither_repeats_nor_loses(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired, members = firings(4)
    rig.notifier.notify_many([fired, members[0]])
    spend_the_post_budget(rig)
    crash_on(rig, monkeypatch, "fold")
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify_many(members[1:])
    monkeypatch.undo()
    _root, (reply,) = thread(slack)
    assert ids(reply) == [m.id for m in members]  # Slack has the edit; the ledger does not
    n = rig.restart()
    assert n.recover() == 3  # found on the edited reply, looked for from its own time on
    assert n.notify_many(members) == ["duplicate"] * 4
    _root, (reply,) = thread(slack)
    assert len(reply.updates) == 1
    assert n.store.last_message(FLEET) is not None  # and it can be folded into again


def test_a_crash_before_slack_took_a_burst_sends_it_once_after_the_restart(
    rig: Rig, slack: FakeSlack
) -> None:
    fired, members = firings(3)
    rig.notifier.notify(fired)
    slack.fail("chat.postMessage", 500, times=4)  # every try: Slack is down
    with pytest.raises(SlackError, match="gave up"):
        rig.notifier.notify_many(members)
    n = rig.restart()
    assert n.recover() == 0
    assert n.notify_many(members) == ["sent"] * 3
    _root, (reply,) = thread(slack)
    assert ids(reply) == [m.id for m in members]


def test_a_429_from_slack_is_waited_out_and_nothing_is_dropped(rig: Rig, slack: FakeSlack) -> None:
    """Another app of the workspace's (or another notifier) spent the channel's budget: Slack
    answers 429 with Retry-After; the post waits it out and goes out, once."""
    other = SlackPoster(TOKEN, base_url=slack.url, clock=slack.clock, sleep=lambda s: None)
    for i in range(4):
        other.post("C-ALERTS", f"someone else's message {i}")
    assert rig.notifier.notify(in_time(storm(1, initial=0))[0]) == "sent"
    assert [(m, c) for m, c, _ in slack.limited] == [("chat.postMessage", "C-ALERTS")]
    ((_, _, retry_after),) = slack.limited
    assert retry_after in rig.slept  # the Retry-After, slept
    assert rig.notifier.poster.limited == 1
    assert len(slack.roots()) == 5


def test_a_storm_in_two_channels_is_paced_per_channel(slack: FakeSlack, tmp_path: Path) -> None:
    """Slack's limit is per channel: a storm's roots in one channel do not hold back the
    other's."""
    from runwatch.notify.config import Route

    slack.add_channel("#math-rl", "C-MATH")
    rig = Rig(slack, tmp_path / "n.sqlite",
              routes=[Route(match={"team": "math"}, channel="#math-rl")])  # fmt: skip
    try:
        plain = storm(6, initial=6)  # no fleet incident: a root per run
        alerts = [plain[run_name(i)][0] for i in range(6)]
        for i, a in enumerate(alerts):
            labels = {"team": "math" if i % 2 else "rl"}
            assert rig.notifier.notify(a, labels=labels) == "sent"
        assert slack.limited == []
        # three posts each: each channel's burst, no wait at all
        assert rig.slept == []
    finally:
        rig.notifier.close()

"""One Slack thread per shared cause (issue 45, item 4): a fleet incident's root names the
cause and counts its runs, edited as they join and heal; its member runs' transitions are
replies there (or, by config, in threads of their own that link to it); a storm of forty
member runs is one thread, every transition in it once, under Slack's rate limits -- in
whatever order the partitions are read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import fleet_alerts as fleet
from harness.fleet_alerts import CAUSE, FLEET, batches, in_time, interleavings, storm
from harness.slack_server import FakeSlack, Message, VirtualClock
from runwatch.notify.background import BackgroundNotifier
from runwatch.stream.alerts import Alert

from .test_slack_notifier import TOKEN, Rig, shown

PLACEHOLDER = f"fleet:{FLEET}"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",), clock=VirtualClock())
    fake.add_channel("#rl-alerts", "C-ALERTS")
    try:
        yield fake
    finally:
        fake.close()


def make_rig(slack: FakeSlack, tmp_path: Path, **config: Any) -> Rig:
    return Rig(slack, tmp_path / "notify.sqlite", **config)


@pytest.fixture
def rig(slack: FakeSlack, tmp_path: Path) -> Iterator[Rig]:
    r = make_rig(slack, tmp_path)
    try:
        yield r
    finally:
        r.notifier.close()


def fleet_root(slack: FakeSlack) -> Message:
    (root,) = [m for m in slack.roots() if "Shared cause" in m.text]
    return root


def ids_of(alerts: list[Alert]) -> list[str]:
    return sorted(a.id for a in alerts)


def shown_once(slack: FakeSlack, alerts: list[Alert]) -> None:
    """Every transition in exactly one message (by the ids its metadata lists)."""
    got = [i for i in shown(slack) if not i.startswith("fleet:")]
    assert sorted(got) == ids_of(alerts)


def check_storm(slack: FakeSlack, rig: Rig, alerts: list[Alert], runs: int, initial: int) -> None:
    rig.notifier.tidy(wait=True)  # the roots' last edits (an idle turn does it)
    root = fleet_root(slack)
    roots = slack.roots()
    assert len(roots) == 1 + initial  # the fleet thread, and the threads opened before it
    shown_once(slack, alerts)
    assert all(rig.notifier.store.outcome(a.id) == "sent" for a in alerts)
    # the root names the cause and counts the runs; all healed, it says so
    assert f"Shared cause {CAUSE} — {runs} runs, all healed" in root.text
    assert "[RESOLVED]" in root.text
    in_fleet = {i for m in [root, *slack.replies(root)] for i in _ids(m)}
    members = [a for a in alerts if a.run != "@fleet"]
    # every member transition after its run was known to be a member is in the fleet thread
    assert {a.id for a in members if a.incident and a.incident.fleet} <= in_fleet
    for own in roots:
        if own is not root:  # opened before the fleet incident: now says where it went
            assert "Continued in" in str(own.blocks)
            assert "[RESOLVED]" not in own.text
    assert slack.limited == []  # paced: Slack never had to refuse a call


def _ids(m: Message) -> list[str]:
    payload = (m.metadata or {}).get("event_payload") or {}
    return list(payload.get("alert_ids") or [payload.get("alert_id")])


@pytest.mark.parametrize("size", [1, 7, 500])
def test_a_storm_of_forty_member_runs_is_one_thread(rig: Rig, slack: FakeSlack, size: int) -> None:
    """Forty runs join one fleet incident and heal, read one transition at a time, in
    batches of 7, or in one poll: one thread, every transition in it once, fewer messages
    than transitions, no 429."""
    alerts = in_time(storm(40, initial=0))
    for batch in batches(alerts, size):
        assert set(rig.notifier.notify_many(batch)) == {"sent"}
    check_storm(slack, rig, alerts, runs=40, initial=0)
    root = fleet_root(slack)
    # a burst folded into fewer messages: read one at a time, as many as Slack's budgets
    # for posts and edits allow; read in batches, each batch's replies one message
    print(
        f"{len(alerts)} transitions, {len(slack.messages)} messages, "
        f"{slack.count('chat.update')} edits"
    )
    assert len(slack.messages) < len(alerts) * (0.6 if size == 1 else 0.25)
    # edited as runs joined and healed (a poll that holds it all: once, at its end), once
    # per batch or less, not once per transition
    counts = [int(c) for u in root.updates for c in re.findall(r"— (\d+) runs: ", u)]
    assert len(counts) >= (2 if size < len(alerts) else 0)
    assert counts == sorted(counts)
    assert len(root.updates) < len(alerts) / 2
    # the replies name the run, also when it heals (forty runs share the thread)
    assert any(re.search(r"Resolved — grpo-\d\d:", m.text) for m in slack.replies(root))


def test_runs_whose_threads_opened_before_the_fleet_incident_continue_in_it(
    rig: Rig, slack: FakeSlack
) -> None:
    alerts = in_time(storm(10, initial=3))
    for a in alerts:
        rig.notifier.notify(a)
    check_storm(slack, rig, alerts, runs=10, initial=3)
    # the fleet root lists the early runs with what their threads said, as it does the rest
    for i in range(3):
        assert f"`{fleet.run_name(i)}`: *inference_idle_with_pending*" in str(
            fleet_root(slack).blocks)  # fmt: skip
    early = [m for m in slack.roots() if "Shared cause" not in m.text]
    for m in early:
        assert slack.replies(m) == []  # their resolves went to the fleet thread
        link = re.search(r"<(https://fake\.slack\.com/[^|>]+)\|", str(m.blocks))
        assert link is not None  # to the fleet thread's root
        assert link.group(1).endswith(fleet_root(slack).ts.replace(".", ""))


@pytest.mark.parametrize("seed", range(12))
def test_any_order_the_partitions_are_read_in_ends_up_the_same(
    slack: FakeSlack, tmp_path: Path, seed: int
) -> None:
    """Kafka orders each run's transitions, not one run's against another's or against the
    fleet alert: members before the fleet alert open its thread with a stand-in root that
    the fleet alert then names; a member healed after the fleet incident closed is still a
    reply there. Whatever the order, the end is the same."""
    rig = make_rig(slack, tmp_path)
    try:
        alerts = interleavings(storm(8, initial=3), seed)
        for batch in batches(alerts, 1 + seed % 4):
            rig.notifier.notify_many(batch)
        check_storm(slack, rig, alerts, runs=8, initial=3)
        assert "being named" not in fleet_root(slack).text
    finally:
        rig.notifier.close()


def test_members_before_the_fleet_alert_open_its_thread_which_it_names(
    rig: Rig, slack: FakeSlack
) -> None:
    s = storm(4, initial=0)
    first = [seq[0] for run, seq in s.items() if run != "@fleet"]
    for a in first:
        rig.notifier.notify(a)
    root = fleet_root(slack)
    assert "Shared cause — 4 runs" in root.text  # the cause not known yet
    assert "being named" in str(root.blocks)
    assert root.metadata is not None
    assert root.metadata["event_payload"]["alert_id"] == PLACEHOLDER
    fired = s["@fleet"][0]
    assert rig.notifier.notify(fired) == "sent"
    assert f"Shared cause {CAUSE} — 4 runs" in root.text  # named now, by an edit
    assert root.metadata["event_payload"]["alert_ids"] == [PLACEHOLDER, fired.id]
    assert len(slack.roots()) == 1
    assert len(slack.replies(root)) >= 1  # the members' firings, folded as a burst


def test_the_fleet_alert_named_in_its_stand_in_root_across_a_crash(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = storm(3, initial=0)
    rig.notifier.notify(s[fleet.run_name(0)][0])
    fired = s["@fleet"][0]
    real = rig.notifier.store.sent_and_thread

    def crash(ident: Any, what: str, *args: Any, **kwargs: Any) -> None:
        if what == "fold":
            raise KeyboardInterrupt("killed between the edit and the record")
        real(ident, what, *args, **kwargs)

    monkeypatch.setattr(rig.notifier.store, "sent_and_thread", crash)
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify(fired)
    monkeypatch.undo()
    n = rig.restart()
    assert n.recover() == 1
    assert n.notify(fired) == "duplicate"
    root = fleet_root(slack)
    assert [u for u in root.updates if CAUSE in u] == [root.text]  # named once
    assert root.metadata is not None
    assert root.metadata["event_payload"]["alert_ids"] == [PLACEHOLDER, fired.id]
    # and the thread goes on knowing the cause
    assert n.notify(s[fleet.run_name(1)][0]) == "sent"
    assert CAUSE in root.text


def test_own_member_threads_link_to_the_fleet_thread(slack: FakeSlack, tmp_path: Path) -> None:
    """member_threads = "own": each run keeps its incident's thread, whose root links to the
    fleet thread; the fleet thread's root still counts the runs as they join and heal."""
    rig = make_rig(slack, tmp_path, member_threads="own")
    try:
        alerts = in_time(storm(6, initial=2))
        for a in alerts:  # one at a time, the roots edited at each idle turn
            assert rig.notifier.notify(a) == "sent"
            rig.notifier.tidy(wait=True)
        root = fleet_root(slack)
        others = [m for m in slack.roots() if m is not root]
        assert len(others) == 6
        shown_once(slack, alerts)
        link = root.ts.replace(".", "")
        for m in others:
            assert f"p{link}|the shared-cause thread>" in str(m.blocks)
        # the fleet thread holds the fleet alert's own transitions only
        fleet_own = [a.id for a in alerts if a.run == "@fleet"]
        assert [i for m in slack.replies(root) for i in _ids(m)] == fleet_own[1:]
        assert "6 runs, all healed" in root.text
        assert any("6 runs: 6 still affected" in u for u in root.updates)
        assert slack.count("chat.getPermalink") == 1  # asked once, kept
    finally:
        rig.notifier.close()


def test_the_service_s_background_thread_folds_a_storm_too(rig: Rig, slack: FakeSlack) -> None:
    """serve's path: transitions submitted faster than Slack takes them are taken as a
    batch by the background thread."""
    alerts = in_time(storm(40, initial=0))
    background = BackgroundNotifier(rig.notifier, remind_every=3600)
    try:
        for a in alerts:
            background.submit(a)
    finally:
        background.close(timeout=60)
    rig.notifier = rig.open()  # close() closed the one it had
    check_storm(slack, rig, alerts, runs=40, initial=0)


def test_an_early_run_s_quick_resolve_is_a_reply_in_the_fleet_thread(
    rig: Rig, slack: FakeSlack
) -> None:
    """A run's firing shown in its own thread, then the run found to be part of a fleet
    incident, then its resolve within fold_within: the run goes on in the fleet thread, so
    the resolve is a reply there -- its own root stays a pointer, not edited into a reply."""
    s = storm(3, initial=1)
    first = s[fleet.run_name(0)][0]
    quick = fleet.transition(first.run, first.rule, "resolved", first.ts + 20,
                             incident=first.incident.id if first.incident else "",
                             role="root", root=first.key, open_=False, fleet=FLEET,
                             since=first.ts)  # fmt: skip
    for a in (first, s["@fleet"][0], quick):
        assert rig.notifier.notify(a) == "sent"
    rig.notifier.tidy(wait=True)
    root = fleet_root(slack)
    (own,) = [m for m in slack.roots() if m is not root]
    assert quick.id in [i for m in slack.replies(root) for i in _ids(m)]
    assert "continued in the shared-cause thread" in own.text
    assert _ids(own) == [first.id]

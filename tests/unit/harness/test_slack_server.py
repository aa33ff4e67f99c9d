"""The local Slack is as strict as Slack documents chat.update (and message metadata) and its
rate limits: a notifier that passes against it would not be refused by Slack for these
reasons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.slack_server import LIMITS, FakeSlack, Limit, VirtualClock

TOKEN = "xoxb-strict"
AUTH = f"Bearer {TOKEN}"
META = {"event_type": "runwatch_alert", "event_payload": {"alert_id": "a1"}}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
    fake.add_channel("#rl-alerts", "C-ALERTS")
    try:
        yield fake
    finally:
        fake.close()


def call(slack: FakeSlack, method: str, **args: Any) -> Any:
    return slack.answer(method, args, AUTH)[1]


def posted(slack: FakeSlack, **args: Any) -> str:
    answer = call(slack, "chat.postMessage", channel="C-ALERTS", text="fired", **args)
    assert answer["ok"], answer
    return str(answer["ts"])


def test_an_update_replaces_text_and_blocks_and_keeps_metadata_not_sent(slack: FakeSlack) -> None:
    ts = posted(slack, blocks=[{"type": "divider"}], metadata=META)
    assert call(slack, "chat.update", channel="C-ALERTS", ts=ts, text="resolved")["ok"]
    (m,) = slack.messages
    assert (m.text, m.blocks, m.metadata) == ("resolved", None, META)  # text alone: no blocks
    new = {"event_type": "runwatch_alert", "event_payload": {"alert_id": "a2"}}
    assert call(slack, "chat.update", channel="C-ALERTS", ts=ts, text="x", metadata=new)["ok"]
    assert m.metadata == new
    assert m.updates == ["resolved", "x"]


def test_a_reply_is_edited_by_its_own_ts(slack: FakeSlack) -> None:
    root = posted(slack)
    reply = posted(slack, thread_ts=root)
    assert call(slack, "chat.update", channel="C-ALERTS", ts=reply, text="edited")["ok"]
    assert [m.text for m in slack.messages] == ["fired", "edited"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"channel": "#rl-alerts"}, "channel_not_found"),  # a name: chat.update wants the ID
        ({"channel": "C-ALERTS", "ts": "1.000001"}, "message_not_found"),
        ({"channel": "C-ALERTS", "ts": None}, "message_not_found"),
        ({"channel": "C-ALERTS", "text": ""}, "no_text"),
        ({"channel": "C-ALERTS", "text": "x" * 40_001}, "msg_too_long"),
        ({"channel": "C-ALERTS", "blocks": [{"type": "divider"}] * 51}, "invalid_blocks"),
        ({"channel": "C-ALERTS", "metadata": {"event_type": "x"}}, "invalid_metadata_format"),
        ({"channel": "C-ALERTS", "metadata": "{not json"}, "invalid_metadata_format"),
    ],
)
def test_what_slack_refuses_an_update_is_refused(
    slack: FakeSlack, args: dict[str, Any], error: str
) -> None:
    ts = posted(slack)
    asked = {"ts": ts, "text": "edited", **args}
    asked = {k: v for k, v in asked.items() if v is not None}
    assert call(slack, "chat.update", **asked) == {"ok": False, "error": error}
    assert slack.messages[0].text == "fired"  # nothing was changed


def test_a_persons_message_cannot_be_edited_by_the_bot(slack: FakeSlack) -> None:
    theirs = slack.post_as_user("C-ALERTS", "hello")
    answer = call(slack, "chat.update", channel="C-ALERTS", ts=theirs.ts, text="x")
    assert answer == {"ok": False, "error": "cant_update_message"}


def test_a_post_with_bad_metadata_is_refused(slack: FakeSlack) -> None:
    answer = call(slack, "chat.postMessage", channel="C-ALERTS", text="x",
                  metadata={"event_payload": {}})  # fmt: skip
    assert answer == {"ok": False, "error": "invalid_metadata_format"}
    assert slack.messages == []


def test_a_missing_scope_and_a_channel_not_joined_are_refused_as_slack_does() -> None:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS", "C-OTHER"),
                     scopes=frozenset({"chat:write"}), joined={"C-ALERTS"})  # fmt: skip
    try:
        history = call(fake, "conversations.history", channel="C-ALERTS")
        assert history == {"ok": False, "error": "missing_scope", "needed": "channels:history",
                           "provided": "chat:write"}  # fmt: skip
        post = call(fake, "chat.postMessage", channel="C-OTHER", text="x")
        assert post == {"ok": False, "error": "not_in_channel"}
        assert call(fake, "chat.postMessage", channel="C-ALERTS", text="x")["ok"]
    finally:
        fake.close()


def test_posts_past_the_per_channel_limit_are_refused_with_retry_after() -> None:
    """Slack's chat.postMessage limit, one message per second per channel with a short burst
    allowed: past it, HTTP 429, `ratelimited`, and a Retry-After of whole seconds; another
    channel is not held back; time moving on lets the next one through."""
    clock = VirtualClock()
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS", "C-OTHER"), clock=clock)
    try:
        burst = LIMITS["chat.postMessage"].burst
        for i in range(burst):
            assert call(fake, "chat.postMessage", channel="C-ALERTS", text=str(i))["ok"]
        status, body, headers = fake.answer("chat.postMessage",
                                            {"channel": "C-ALERTS", "text": "x"}, AUTH)  # fmt: skip
        assert (status, body) == (429, {"ok": False, "error": "ratelimited"})
        assert headers == {"Retry-After": "1"}
        assert fake.limited == [("chat.postMessage", "C-ALERTS", 1)]
        assert len(fake.messages) == burst  # refused: not posted
        assert call(fake, "chat.postMessage", channel="C-OTHER", text="x")["ok"]
        clock.sleep(1)
        assert call(fake, "chat.postMessage", channel="C-ALERTS", text="x")["ok"]
        assert fake.answer("chat.postMessage", {"channel": "C-ALERTS", "text": "y"},
                           AUTH)[0] == 429  # fmt: skip
    finally:
        fake.close()


def test_edits_past_tier_3_are_refused_across_channels() -> None:
    """chat.update is Tier 3: 50+ a minute per workspace, whatever the channel."""
    clock = VirtualClock()
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",), clock=clock,
                     limits={"chat.update": Limit(60 / 50, 2)})  # fmt: skip
    try:
        ts = posted(fake)
        for text in ("a", "b"):
            assert call(fake, "chat.update", channel="C-ALERTS", ts=ts, text=text)["ok"]
        edit = {"channel": "C-ALERTS", "ts": ts, "text": "c"}
        status, _, headers = fake.answer("chat.update", edit, AUTH)
        assert status == 429
        assert headers == {"Retry-After": "2"}  # 1.2 s, in whole seconds
        clock.sleep(1.2)
        assert call(fake, "chat.update", channel="C-ALERTS", ts=ts, text="c")["ok"]
    finally:
        fake.close()


def test_a_permalink_is_given_for_a_message_of_the_channel(slack: FakeSlack) -> None:
    ts = posted(slack)
    answer = call(slack, "chat.getPermalink", channel="C-ALERTS", message_ts=ts)
    assert answer["ok"]
    assert answer["permalink"].endswith(f"/archives/C-ALERTS/p{ts.replace('.', '')}")
    missing = call(slack, "chat.getPermalink", channel="C-ALERTS", message_ts="1.000009")
    assert missing == {"ok": False, "error": "message_not_found"}
    assert call(slack, "chat.getPermalink", channel="#rl-alerts", message_ts=ts) == {
        "ok": False, "error": "channel_not_found"}  # fmt: skip


def test_a_message_notes_every_transition_its_metadata_lists_once(slack: FakeSlack) -> None:
    """A burst folded into one message lists every transition it shows (`alert_ids`); an
    edit lists them again with the new one: each is noted once, in order."""

    def meta(*ids: str) -> dict[str, Any]:
        return {"event_type": "runwatch_alert",
                "event_payload": {"alert_id": ids[-1], "alert_ids": list(ids)}}  # fmt: skip

    ts = posted(slack, metadata=meta("a1", "a2"))
    assert call(slack, "chat.update", channel="C-ALERTS", ts=ts, text="x",
                metadata=meta("a1", "a2", "a3"))["ok"]  # fmt: skip
    (m,) = slack.messages
    assert m.shown == ["a1", "a2", "a3"]

"""Slack messages escape everything an emitter could have put in an alert: no mention, no link,
no broken code span reaches the channel."""

from __future__ import annotations

import json
from typing import Any

from runwatch.notify import messages as msg
from runwatch.stream.alerts import Alert

HOSTILE = "<!channel> <https://evil.example|Open Grafana> & <@U0123> `rm -rf` \u202e"


def alert(**over: Any) -> Alert:
    base = {"v": 1, "id": "a", "ts": 1_800_000_060.0, "rule": "heartbeat_lost", "run": "r1",
            "state": "firing", "severity": "critical", "key": "heartbeat_lost|r1|x",
            "since": 1_800_000_000.0, "summary": f"no heartbeat from {HOSTILE} for 60s",
            "subject": HOSTILE, "details": {HOSTILE: HOSTILE, "host": HOSTILE}}  # fmt: skip
    return Alert.from_dict({**base, **over})


def rendered() -> list[str]:
    a = alert()
    text, blocks = msg.root(a, "https://grafana.example.com/d/run")
    resolved, rblocks = msg.resolved_root(alert(state="resolved"), a, None)
    return [text, json.dumps(blocks), resolved, json.dumps(rblocks), msg.reply(a),
            msg.reply(alert(state="resolved")), msg.reminder(a, "2h")]  # fmt: skip


def test_no_mention_or_link_from_an_alert_reaches_slack() -> None:
    for out in rendered():
        assert "<!channel>" not in out
        assert "<https://evil" not in out
        assert "<@U0123>" not in out
        assert "&lt;!channel&gt;" in out


def test_the_only_markup_is_runwatchs_own() -> None:
    _, blocks = msg.root(alert(), None)
    text = json.dumps(blocks)
    # every "<" left opens one of runwatch's own date tokens
    assert text.count("<") == text.count("<!date^")


def test_a_backtick_cannot_end_a_code_span() -> None:
    assert msg.code("a`b") == "`a'b`"
    assert msg.esc("a & b <c>") == "a &amp; b &lt;c&gt;"


def test_a_circuit_breaker_policy_is_said_with_how_to_lift_it() -> None:
    def breaker(a: Alert) -> list[str]:
        _, blocks = msg.root(a, None)
        return [b["text"]["text"] for b in blocks if "Circuit breaker" in str(b)]

    assert breaker(alert()) == []  # no policy: nothing said
    assert breaker(alert(action="notify")) == []
    (paused,) = breaker(alert(action="pause", run="grpo-7"))
    assert "pauses" in paused
    assert "`runwatch resume grpo-7`" in paused
    (stopped,) = breaker(alert(action="stop"))
    assert "stops" in stopped
    assert "resume" not in stopped

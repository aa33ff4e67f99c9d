"""The alert transition as one type: what the engine makes survives JSON unchanged, labels
included; what is not a contract alert is refused with a reason; the console line escapes."""

from __future__ import annotations

from typing import Any

import pytest

from runwatch.console import alert_line, printable
from runwatch.dev import scenarios
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.replay import replay


def _engine_alerts() -> list[Alert]:
    lines = [("sandbox", i, scenarios.orjson.dumps(e))
             for i, e in enumerate(scenarios.sandbox_hang())]  # fmt: skip
    return list(replay(lines, Engine()))


def test_every_engine_transition_round_trips_through_json_with_the_run_labels() -> None:
    alerts = _engine_alerts()
    assert alerts
    for a in alerts:
        assert Alert.from_json(a.to_json()) == a
    started = next(e for e in scenarios.sandbox_hang() if e["kind"] == "run.started")
    assert alerts[0].labels == started["labels"]
    assert alerts[0].to_dict()["labels"] == started["labels"]


def good() -> dict[str, Any]:
    return {"v": 1, "id": "a1", "ts": 100.0, "rule": "zero_reward", "run": "r",
            "state": "firing", "severity": "critical", "key": "zero_reward|r",
            "since": 90, "summary": "reward 0", "details": {"count": 5}}  # fmt: skip


def test_a_minimal_alert_decodes_and_absent_options_default() -> None:
    a = Alert.from_dict(good())
    assert a.since == 90.0
    assert a.subject is None
    assert a.labels == {}
    assert "labels" not in a.to_dict()


def test_a_fleet_member_s_incident_round_trips_with_its_fleet_incident() -> None:
    """Contract section 8: `incident.fleet` names the fleet incident a run's incident is part
    of; absent when it is part of none."""
    incident = {"id": "incident|r|1", "role": "root", "root": "zero_reward|r",
                "root_rule": "zero_reward", "opened": 95.0, "open": True}  # fmt: skip
    alone = Alert.from_dict({**good(), "incident": incident})
    assert alone.incident is not None
    assert alone.incident.fleet is None
    assert "fleet" not in alone.to_dict()["incident"]
    member = Alert.from_dict({**good(), "incident": {**incident, "fleet": "fleet|dep:rm-1|1"}})
    assert member.incident is not None
    assert member.incident.fleet == "fleet|dep:rm-1|1"
    assert Alert.from_json(member.to_json()) == member
    with pytest.raises(InvalidAlert, match="'fleet' must be a string"):
        Alert.from_dict({**good(), "incident": {**incident, "fleet": 3}})


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"id": 7}, "'id' missing or not a string"),
        ({"ts": "soon"}, "'ts' missing or not a number"),
        ({"ts": True}, "'ts' missing or not a number"),
        ({"since": float("nan")}, "'since' must be finite"),
        ({"state": "maybe"}, "state must be firing or resolved"),
        ({"severity": "loud"}, "severity must be one of"),
        ({"details": []}, "'details' must be an object"),
        ({"labels": {"team": 1}}, "'labels' must be an object of strings"),
        ({"subject": 3}, "'subject' must be a string"),
        ({"v": 2}, "v must be 1"),
        ({"summary": None}, "'summary' missing or not a string"),
    ],
)
def test_what_is_not_a_contract_alert_is_refused_with_the_reason(
    change: dict[str, Any], reason: str
) -> None:
    with pytest.raises(InvalidAlert) as err:
        Alert.from_dict({**good(), **change})
    assert reason in err.value.reason


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b"null", b'"text"'])
def test_bytes_that_are_not_an_object_are_refused(raw: bytes) -> None:
    with pytest.raises(InvalidAlert):
        Alert.from_json(raw)


def test_the_console_line_escapes_control_characters() -> None:
    a = Alert.from_dict({**good(), "run": "r\nFAKE LINE", "subject": "vllm-\x1b[2J0",
                         "summary": "sat\u2028there"})  # fmt: skip
    line = alert_line(a)
    assert "\n" not in line
    assert "\x1b" not in line
    assert "\u2028" not in line
    assert "run=r\\nFAKE LINE [vllm-\\x1b[2J0]: sat\\u2028there" in line
    assert line.startswith("1970-01-01 00:01:40Z  FIRING   critical zero_reward  run=")


def test_printable_leaves_ordinary_text_alone() -> None:
    assert printable("grpo-7b/run:1 ünï 中文 ✓") == "grpo-7b/run:1 ünï 中文 ✓"

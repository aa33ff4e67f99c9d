"""Custom rules from `[[rules.custom]]` (contract §6): `metric` thresholds and `absent` kinds."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import ROLLOUT, TRAINER, beats, brief, by_ts, feed, make_engine, make_event

from runwatch.stream.exceptions import InvalidEvent

GRAD = {
    "id": "grad_norm_high",
    "type": "metric",
    "metric": "actor/grad_norm",
    "op": ">",
    "value": 100.0,
    "for_steps": 3,
    "severity": "warning",
}
NO_STEP = {
    "id": "no_step_in_3h",
    "type": "absent",
    "kind": "step.done",
    "component": "trainer",
    "for": 10800,
    "severity": "warning",
}
H = 3600.0


def grad(step: int, value: float | None, ts: float | None = None, **more: float) -> dict[str, Any]:
    ts = 10.0 * step if ts is None else ts
    return make_event("step.metrics", ts, step=step, metrics={"actor/grad_norm": value, **more})


# --- metric ------------------------------------------------------------------------------------


def test_metric_fires_at_the_third_step_over_the_threshold() -> None:
    engine = make_engine(custom=[GRAD])
    alerts = feed(engine, [grad(1, 5.0), grad(2, 150.0), grad(3, 101.0), grad(4, 300.0)])
    assert brief(alerts) == [("grad_norm_high", "firing", 40.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.key) == (20.0, "warning", "grad_norm_high|r1")
    assert alert.details == {
        "metric": "actor/grad_norm",
        "value": 300.0,
        "steps": [2, 3, 4],
        "threshold": 100.0,
    }
    assert alert.summary == "actor/grad_norm > 100 for 3 steps (latest: 300.0)"


def test_metric_one_step_short_stays_quiet() -> None:
    engine = make_engine(custom=[GRAD])
    events = [grad(1, 150.0), grad(2, 150.0), grad(3, 100.0), grad(4, 150.0), grad(5, 150.0)]
    assert feed(engine, events) == []


def test_metric_resolves_at_a_step_that_no_longer_meets_it() -> None:
    engine = make_engine(custom=[GRAD])
    feed(engine, [grad(s, 200.0) for s in range(1, 6)])
    alerts = feed(engine, [grad(6, 99.0)])
    assert brief(alerts) == [("grad_norm_high", "resolved", 60.0)]
    assert alerts[0].since == 10.0


def test_metric_steps_that_did_not_log_it_are_passed_over() -> None:
    engine = make_engine(custom=[GRAD])
    events = [grad(1, 200.0), make_event("step.metrics", 15, step=2, metrics={"loss": 1.0})]
    events += [grad(3, 200.0), grad(4, None), grad(5, 200.0)]
    assert brief(feed(engine, events)) == [("grad_norm_high", "firing", 50.0)]


@pytest.mark.parametrize(
    ("op", "fires", "quiet"),
    [
        ("<", 0.5, 1.0),
        ("<=", 1.0, 1.5),
        (">", 1.5, 1.0),
        (">=", 1.0, 0.5),
        ("==", 1.0, 1.5),
        ("!=", 1.5, 1.0),
    ],
)
def test_metric_operators(op: str, fires: float, quiet: float) -> None:
    rule = {"id": "r", "type": "metric", "metric": "m", "op": op, "value": 1.0}
    engine = make_engine(custom=[rule])
    at = [make_event("step.metrics", 10, step=1, metrics={"m": fires})]
    assert brief(feed(engine, at)) == [("r", "firing", 10.0)]  # for_steps defaults to 1
    quiet_engine = make_engine(custom=[rule])
    assert feed(quiet_engine, [make_event("step.metrics", 10, step=1, metrics={"m": quiet})]) == []


def test_metric_severity_and_summary_come_from_the_config() -> None:
    rule = {**GRAD, "severity": "critical", "summary": "gradients exploding", "for_steps": 1}
    (alert,) = feed(make_engine(custom=[rule]), [grad(1, 1e4)])
    assert (alert.severity, alert.summary) == ("critical", "gradients exploding")


def test_metric_value_and_for_steps_can_be_set_per_run() -> None:
    engine = make_engine(custom=[GRAD])
    start = make_event("run.started", 0, config={"grad_norm_high": {"value": 10, "for_steps": 2}})
    alerts = feed(engine, [start, grad(1, 20.0), grad(2, 20.0)])
    assert brief(alerts) == [("grad_norm_high", "firing", 20.0)]


def test_metric_name_cannot_be_changed_per_run() -> None:
    engine = make_engine(custom=[GRAD])
    start = make_event("run.started", 0, config={"grad_norm_high": {"metric": "loss"}})
    with pytest.raises(InvalidEvent, match=r"config\.grad_norm_high\.metric"):
        feed(engine, [start])


# --- absent ------------------------------------------------------------------------------------


def step_done(ts: float, step: int, src: dict[str, Any] = TRAINER) -> dict[str, Any]:
    return make_event("step.done", ts, src=src, step=step)


def test_absent_fires_for_seconds_after_the_last_event_of_the_kind() -> None:
    engine = make_engine(custom=[NO_STEP])
    events = by_ts(
        [make_event("run.started", 0, src=TRAINER), step_done(H, 1), step_done(2 * H, 2)],
        beats(TRAINER, 0, 6 * H, every=30),
    )
    alerts = feed(engine, events)
    assert brief(alerts) == [("no_step_in_3h", "firing", 5 * H)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.subject) == (2 * H, "warning", None)
    assert alert.details == {"kind": "step.done", "component": "trainer", "silent_s": 3 * H}
    assert alert.summary == "no step.done from trainer for 3h00m"


def test_absent_resolves_when_the_kind_arrives() -> None:
    engine = make_engine(custom=[NO_STEP])
    feed(engine, [make_event("run.started", 0), step_done(100, 1)])
    engine.advance(4 * H)
    alerts = feed(engine, [step_done(4 * H + 1, 2)])
    assert brief(alerts) == [("no_step_in_3h", "resolved", 4 * H + 1)]
    assert brief(engine.advance(10 * H)) == [("no_step_in_3h", "firing", 7 * H + 1)]


def test_absent_near_miss_steps_just_in_time() -> None:
    engine = make_engine(custom=[NO_STEP])
    events = [make_event("run.started", 0), *(step_done(k * (3 * H - 1), k) for k in range(1, 8))]
    assert feed(engine, events) == []


def test_absent_ignores_the_kind_from_other_components_and_other_kinds() -> None:
    engine = make_engine(custom=[NO_STEP])
    events = by_ts(
        [make_event("run.started", 0), step_done(100, 1)],
        [step_done(H * k, k, src=ROLLOUT) for k in range(1, 5)],
        [make_event("step.started", H * k, src=TRAINER, step=k) for k in range(2, 5)],
    )
    assert brief(feed(engine, events)) == [("no_step_in_3h", "firing", 100 + 3 * H)]


def test_absent_counts_from_the_first_event_of_a_run_that_never_sent_the_kind() -> None:
    engine = make_engine(custom=[NO_STEP])
    alerts = feed(engine, [make_event("heartbeat", 50, src=TRAINER)])
    alerts += engine.advance(10 * H)
    assert [(a.rule, a.state, a.ts) for a in alerts if a.rule == "no_step_in_3h"] == [
        ("no_step_in_3h", "firing", 50 + 3 * H)
    ]
    fired = next(a for a in alerts if a.rule == "no_step_in_3h")
    assert fired.since == 50
    assert "none seen in this run" in fired.summary


def test_absent_run_finished_resolves_and_silences() -> None:
    engine = make_engine(custom=[NO_STEP])
    feed(engine, [make_event("run.started", 0), step_done(10, 1)])
    engine.advance(4 * H)
    alerts = feed(engine, [make_event("run.finished", 5 * H, status="ok")])
    assert brief(alerts) == [("no_step_in_3h", "resolved", 5 * H)]
    assert engine.advance(100 * H) == []


def test_absent_for_can_be_set_per_run() -> None:
    engine = make_engine(custom=[NO_STEP])
    start = make_event("run.started", 0, config={"no_step_in_3h": {"for": 600}})
    feed(engine, [start, step_done(100, 1)])
    assert brief(engine.advance(10 * H)) == [("no_step_in_3h", "firing", 700.0)]


def test_absent_kind_and_component_cannot_be_changed_per_run() -> None:
    engine = make_engine(custom=[NO_STEP])
    for field, value in (("kind", "reward"), ("component", "rollout")):
        start = make_event("run.started", 0, config={"no_step_in_3h": {field: value}})
        with pytest.raises(InvalidEvent, match=f"no_step_in_3h.{field}: cannot be changed"):
            feed(engine, [start])

"""`zero_reward` (critical): the step reward is zero for `steps` consecutive steps."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import brief, feed, make_engine, make_event, of_rule

RULE = "zero_reward"


def reward(step: int, mean: float, ts: float | None = None) -> dict[str, Any]:
    return make_event("reward", 10.0 * step if ts is None else ts, step=step, mean=mean)


def metrics(step: int, ts: float | None = None, **values: float | None) -> dict[str, Any]:
    ts = 10.0 * step if ts is None else ts
    return make_event("step.metrics", ts, step=step, metrics=dict(values))


def test_fires_at_the_reward_of_the_fifth_zero_step() -> None:
    engine = make_engine()
    alerts = feed(engine, [reward(0, 0.4), *(reward(s, 0.0) for s in range(1, 6))])
    assert brief(alerts) == [(RULE, "firing", 50.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity) == (10.0, "critical")
    assert alert.details == {"first_zero_step": 1, "last_zero_step": 5, "count": 5}
    assert "5 consecutive steps (1–5)" in alert.summary


def test_one_zero_step_less_than_the_threshold_stays_quiet() -> None:
    engine = make_engine()
    events = [*(reward(s, 0.0) for s in range(1, 5)), reward(5, 0.1)]
    events += [*(reward(s, 0.0) for s in range(6, 10)), reward(10, 0.2)]
    assert feed(engine, events) == []


def test_keeps_firing_once_and_resolves_at_the_first_non_zero_step() -> None:
    engine = make_engine()
    alerts = feed(engine, [reward(s, 0.0) for s in range(1, 40)])
    assert brief(alerts) == [(RULE, "firing", 50.0)]
    alerts = feed(engine, [reward(40, 0.3)])
    assert brief(alerts) == [(RULE, "resolved", 400.0)]
    assert alerts[0].since == 10.0


def test_epsilon_decides_what_counts_as_zero() -> None:
    engine = make_engine()
    assert brief(feed(engine, [reward(s, 1e-10) for s in range(1, 6)])) == [(RULE, "firing", 50.0)]
    other = make_engine()
    assert feed(other, [reward(s, 1e-6 * (-1) ** s) for s in range(1, 6)]) == []
    loose = make_engine({RULE: {"epsilon": 1e-3}})
    assert brief(feed(loose, [reward(s, 1e-6) for s in range(1, 6)])) == [(RULE, "firing", 50.0)]


def test_reward_from_the_first_reward_key_in_the_step_metrics() -> None:
    engine = make_engine()
    events = [
        metrics(s, **{"critic/score/mean": 0.0, "reward": 1.0, "actor/loss": 0.2})
        for s in range(1, 6)
    ]
    alerts = feed(engine, events)
    assert brief(alerts) == [(RULE, "firing", 50.0)]
    # the later keys do not count when an earlier one is present
    other = make_engine()
    events = [metrics(s, **{"critic/score/mean": 0.5, "reward": 0.0}) for s in range(1, 6)]
    assert feed(other, events) == []


def test_the_reward_event_wins_over_the_metrics() -> None:
    engine = make_engine()
    events = []
    for s in range(1, 6):
        events += [metrics(s, ts=10.0 * s, reward=0.0), reward(s, 0.7, ts=10.0 * s + 1)]
    assert feed(engine, events) == []


def test_steps_without_a_reward_are_passed_over() -> None:
    engine = make_engine()
    events = []
    for s in range(1, 6):
        events += [reward(s, 0.0), metrics(100 + s, ts=10.0 * s + 1, **{"actor/loss": 0.1})]
    assert brief(feed(engine, events)) == [(RULE, "firing", 50.0)]


def test_a_non_finite_reward_breaks_the_streak() -> None:
    engine = make_engine()
    events = [reward(1, 0.0), reward(2, 0.0), reward(3, float("nan"))]
    events += [reward(s, 0.0) for s in range(4, 8)]
    assert of_rule(feed(engine, events), RULE) == []


def test_a_gap_filled_late_completes_the_streak() -> None:
    engine = make_engine()
    events = [reward(s, 0.0) for s in (1, 2, 3, 5)]
    assert feed(engine, events) == []
    assert brief(feed(engine, [reward(4, 0.0, ts=55.0)])) == [(RULE, "firing", 55.0)]


@pytest.mark.parametrize("where", ["run.started", "config file"])
def test_steps_can_be_set_per_run_or_globally(where: str) -> None:
    if where == "run.started":
        engine = make_engine()
        start = [make_event("run.started", 0, config={RULE: {"steps": 10}})]
    else:
        engine = make_engine({RULE: {"steps": 10}})
        start = [make_event("run.started", 0)]
    assert feed(engine, [*start, *(reward(s, 0.0) for s in range(1, 10))]) == []
    assert brief(feed(engine, [reward(10, 0.0)])) == [(RULE, "firing", 100.0)]


def test_per_run_override_leaves_other_runs_on_the_default() -> None:
    engine = make_engine()
    events = [make_event("run.started", 0, run="long", config={RULE: {"steps": 10}})]
    for s in range(1, 6):
        events += [reward(s, 0.0) | {"run": "long"}, reward(s, 0.0) | {"run": "short"}]
    alerts = feed(engine, events)
    assert [(a.run, a.state, a.ts) for a in alerts] == [("short", "firing", 50.0)]


def test_custom_reward_keys() -> None:
    engine = make_engine({RULE: {"reward_keys": ["env/success"], "steps": 2}})
    events = [metrics(s, **{"env/success": 0.0, "reward": 1.0}) for s in range(1, 3)]
    assert brief(feed(engine, events)) == [(RULE, "firing", 20.0)]

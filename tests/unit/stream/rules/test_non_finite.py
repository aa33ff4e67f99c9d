"""`non_finite_metric` (critical): a step metric or the step reward is NaN or infinite."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import brief, feed, make_engine, make_event

RULE = "non_finite_metric"


def metrics(ts: float, step: int, **values: float | None) -> dict[str, Any]:
    return make_event("step.metrics", ts, step=step, metrics=dict(values))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_fires_at_the_metrics_event_naming_the_keys(value: float) -> None:
    engine = make_engine()
    events = [metrics(10, 1, loss=0.5), metrics(20, 2, loss=value, **{"actor/grad_norm": value})]
    alerts = feed(engine, events)
    assert brief(alerts) == [(RULE, "firing", 20.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.subject) == (20.0, "critical", None)
    assert alert.details == {"step": 2, "keys": ["actor/grad_norm", "loss"]}
    assert "step 2" in alert.summary


def test_a_non_finite_reward_mean_fires_from_when_it_was_reported() -> None:
    engine = make_engine()
    alerts = feed(
        engine, [metrics(10, 1, loss=0.5), make_event("reward", 20, step=1, mean=math.nan)]
    )
    assert brief(alerts) == [(RULE, "firing", 20.0)]
    assert alerts[0].since == 20.0
    assert alerts[0].details["keys"] == ["reward.mean"]


def test_null_values_are_not_non_finite() -> None:
    engine = make_engine()
    assert feed(engine, [metrics(10, 1, loss=None, acc=1.0)]) == []


def test_resolves_at_a_later_step_whose_metrics_are_all_finite() -> None:
    engine = make_engine()
    feed(engine, [metrics(10, 1, loss=math.nan)])
    alerts = feed(engine, [metrics(20, 1, loss=0.5)])  # the same step again: still bad
    assert alerts == []
    alerts = feed(engine, [metrics(30, 2, loss=0.4, acc=None)])
    assert brief(alerts) == [(RULE, "resolved", 30.0)]
    assert alerts[0].since == 10.0


def test_stays_firing_while_later_steps_are_also_non_finite() -> None:
    engine = make_engine()
    alerts = feed(engine, [metrics(10 * s, s, loss=math.inf) for s in range(1, 5)])
    assert [a.state for a in alerts] == ["firing"]
    alerts = feed(engine, [metrics(50, 5, loss=1.0)])
    assert brief(alerts) == [(RULE, "resolved", 50.0)]
    alerts = feed(engine, [metrics(60, 6, loss=math.nan)])
    assert brief(alerts) == [(RULE, "firing", 60.0)]


def test_a_later_finite_reward_event_also_resolves() -> None:
    engine = make_engine()
    feed(engine, [make_event("reward", 10, step=1, mean=-math.inf)])
    alerts = feed(engine, [make_event("reward", 20, step=2, mean=0.1)])
    assert brief(alerts) == [(RULE, "resolved", 20.0)]


def test_a_late_non_finite_step_behind_a_finite_one_does_not_fire() -> None:
    engine = make_engine()
    feed(engine, [metrics(10, 1, loss=1.0), metrics(30, 3, loss=1.0)])
    assert feed(engine, [metrics(20, 2, loss=math.nan)]) == []

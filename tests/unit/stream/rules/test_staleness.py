"""`staleness_growing` (warning): the off-policy lag of consumed rollouts (PRIME-RL's
`off_policy/mean`) at or above `max_lag` for `steps` steps in a row. Quiet below the bound,
for a short excursion, and once it comes back down."""

from __future__ import annotations

from typing import Any

from helpers import brief, feed, make_engine, make_event

RULE = "staleness_growing"


def lags(values: list[float], start: int = 1, key: str = "off_policy/mean") -> list[Any]:
    return [make_event("step.metrics", 60.0 * s, step=s, metrics={key: v, "loss": 1.0})
            for s, v in enumerate(values, start)]  # fmt: skip


def mine(alerts: list[Any]) -> list[tuple[str, str, float]]:
    return [b for b in brief(alerts) if b[0] == RULE]


def test_a_lag_that_grows_past_the_bound_and_stays_fires_then_resolves() -> None:
    engine = make_engine()
    rising = [1.0, 1.2, 1.5, 2.0, 2.6, 3.3, 4.0, 4.6, 5.1, 5.9, 6.4]  # >= 4 from step 7
    out = feed(engine, lags(rising))
    assert mine(out) == [(RULE, "firing", 60.0 * 11)]  # steps 7-11: five in a row
    (alert,) = [a for a in out if a.rule == RULE]
    assert alert.subject == "off_policy/mean"
    assert alert.details["first_step"] == 7
    assert alert.details["series"]["11"] == 6.4
    assert "6.4 policy versions old" in alert.summary
    assert mine(feed(engine, lags([3.0], start=12))) == [(RULE, "resolved", 720.0)]


def test_a_short_excursion_or_a_lag_under_the_bound_stays_quiet() -> None:
    engine = make_engine()
    values = [1.0, 2.0, 4.5, 5.0, 4.2, 4.1, 3.9, 2.0] + [3.9] * 30  # four steps above, then not
    assert mine(feed(engine, lags(values))) == []


def test_the_bound_and_the_key_are_configurable() -> None:
    engine = make_engine({RULE: {"max_lag": 1.5, "steps": 2, "lag_keys": ["my/lag"]}})
    out = feed(engine, lags([1.0, 1.6, 1.7], key="my/lag"))
    assert mine(out) == [(RULE, "firing", 180.0)]

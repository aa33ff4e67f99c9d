"""`entropy_collapse` (warning): the policy's entropy below a fraction of its own early
level for many steps fires; a dip, a healthy decline, a run that starts low do not."""

from __future__ import annotations

import math
import random

from helpers import brief, feed, make_engine, make_event, of_rule

RULE = "entropy_collapse"


def steps(values: list[float], key: str = "actor/entropy") -> list[dict]:
    return [make_event("step.metrics", 60.0 * (i + 1), step=i + 1, metrics={key: v})
            for i, v in enumerate(values)]  # fmt: skip


def noisy(n: int, level: float = 1.0, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0, 0.1)) for _ in range(n)]


def run(values: list[float], key: str = "actor/entropy") -> list:
    return brief(of_rule(feed(make_engine(), steps(values, key)), RULE))


def test_ten_steps_below_a_tenth_of_the_early_level_fire_at_the_tenth() -> None:
    engine = make_engine()
    alerts = of_rule(feed(engine, steps([*noisy(30), *[0.05] * 12])), RULE)
    assert brief(alerts) == [(RULE, "firing", 60.0 * 40)]
    (alert,) = alerts
    assert (alert.severity, alert.subject, alert.since) == ("warning", "actor/entropy", 60.0 * 31)
    assert alert.details["metric"] == "actor/entropy"
    assert 0.9 < alert.details["early_level"] < 1.1
    assert (alert.details["first_step"], alert.details["count"]) == (31, 10)
    assert "below 15% of its early-training level" in alert.summary


def test_a_fall_to_twelve_percent_that_stays_is_a_collapse() -> None:
    """Between 10% and 15%: what 0.1 let pass (issue 32); healthy runs stay above 50%."""
    assert run([*noisy(30), *noisy(12, level=0.12, seed=3)]) == [(RULE, "firing", 60.0 * 40)]
    assert run([*noisy(30), *noisy(40, level=0.5, seed=4)]) == []


def test_it_resolves_when_entropy_comes_back() -> None:
    out = run([*noisy(30), *[0.05] * 10, 0.5])
    assert out == [(RULE, "firing", 60.0 * 40), (RULE, "resolved", 60.0 * 41)]


def test_a_dip_of_a_few_steps_does_not_fire() -> None:
    assert run([*noisy(30), *[0.01] * 9, *noisy(30, seed=2)]) == []


def test_a_healthy_decline_does_not_fire() -> None:
    declining = [math.exp(-t / 200) + 0.2 for t in range(1000)]  # to 20% of where it began
    assert run(declining) == []


def test_a_run_that_starts_low_is_its_own_level_and_too_few_values_say_nothing() -> None:
    assert run(noisy(200, level=0.02)) == []
    assert run([*noisy(5), *[0.0] * 14]) == []  # no early level yet: 19 < 20 values


def test_openrlhf_s_key_is_read() -> None:
    out = run([*noisy(30), *[0.05] * 10], key="train/entropy_loss")
    assert out == [(RULE, "firing", 60.0 * 40)]


def test_the_early_level_is_kept_in_bounded_memory() -> None:
    engine = make_engine()
    feed(engine, steps(noisy(500)))
    state = engine.runs["r1"].state
    assert len(state.steps.early["actor/entropy"]) == 20  # the first 20 values, for good
    assert len(state.steps.by_number) <= state.steps.depth

"""`kl_spike` and `grad_norm_spike` (warning): a metric far above its own robust band for
several steps in a row fires; one-off spikes, a slow warm-up, a healthy drift and a noisy
but stable series do not (healthy 2,000-step runs: test_dynamics_healthy.py)."""

from __future__ import annotations

import math
import random

from helpers import brief, feed, make_engine, make_event, of_rule

GRAD, KL = "grad_norm_spike", "kl_spike"


def steps(values: list[float], key: str = "actor/grad_norm", start: int = 1) -> list[dict]:
    """One `step.metrics` per value, 60 s apart."""
    return [make_event("step.metrics", 60.0 * (start + i), step=start + i, metrics={key: v})
            for i, v in enumerate(values)]  # fmt: skip


def noisy(n: int, seed: int = 1, level: float = 1.0, sigma: float = 0.3) -> list[float]:
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def run(values: list[float], key: str = "actor/grad_norm", rule: str = GRAD) -> list:
    return brief(of_rule(feed(make_engine(), steps(values, key)), rule))


def test_three_steps_far_above_the_band_fire_at_the_third_and_say_where() -> None:
    engine = make_engine()
    alerts = of_rule(feed(engine, steps([*noisy(40), 25.0, 30.0, 28.0])), GRAD)
    assert brief(alerts) == [(GRAD, "firing", 60.0 * 43)]
    (alert,) = alerts
    assert (alert.severity, alert.subject, alert.since) == ("warning", "actor/grad_norm", 60.0 * 41)
    assert alert.details["metric"] == "actor/grad_norm"
    assert alert.details["first_step"] == 41
    assert 0.8 < alert.details["median"] < 1.2
    assert alert.details["series"]["43"] == 28.0
    assert "gradient norm (actor/grad_norm)" in alert.summary
    assert "41–43" in alert.summary


def test_it_resolves_when_the_metric_is_back_in_its_band() -> None:
    out = run([*noisy(40), 25.0, 30.0, 28.0, 1.1, 0.9])
    assert out == [(GRAD, "firing", 60.0 * 43), (GRAD, "resolved", 60.0 * 44)]


def test_one_off_and_two_step_spikes_do_not_fire() -> None:
    values = noisy(200, seed=2)
    for at in (40, 80, 81, 120, 160, 161):
        values[at] = 40.0
    assert run(values) == []


def test_nothing_fires_during_the_warm_up() -> None:
    assert run([*noisy(10), 50.0, 60.0, 70.0, 80.0]) == []


def test_a_slow_warm_up_and_a_healthy_drift_do_not_fire() -> None:
    rng = random.Random(3)
    decaying = [10.0 * math.exp(-t / 100) + 0.5 * math.exp(rng.gauss(0, 0.2)) for t in range(400)]
    assert run(decaying) == []
    growing = [0.001 + 0.03 * (1 - math.exp(-t / 200)) * math.exp(rng.gauss(0, 0.3))
               for t in range(400)]  # fmt: skip
    assert run(growing, "actor/ppo_kl", KL) == []


def test_a_noisy_but_stable_series_does_not_fire() -> None:
    assert run(noisy(1000, seed=4, sigma=0.6)) == []


def test_each_framework_s_key_is_read() -> None:
    for key, rule in [("train/kl", KL), ("actor/kl_loss", KL), ("train/actor_grad_norm", GRAD)]:
        values = noisy(40, level=0.01 if rule == KL else 1.0)
        spike = 1.0 if rule == KL else 50.0
        assert run([*values, spike, spike, spike], key, rule) == [(rule, "firing", 60.0 * 43)]


def test_the_baseline_reaches_past_the_steps_kept_whole() -> None:
    """The band is the median of the `window` (50) steps before the latest three, though the
    state keeps only the latest 23 steps whole (`PastStep`): the older 30 count too."""
    engine = make_engine()
    # 30 steps at ~10, then 20 at ~1: the median of the 50 is ~10, of the latest 20 ~1
    alerts = of_rule(feed(engine, steps([*noisy(30, level=10.0), *noisy(20, seed=3), 600.0,
                                         700.0, 650.0])), GRAD)  # fmt: skip
    assert brief(alerts) == [(GRAD, "firing", 60.0 * 53)]
    assert 7.0 < alerts[0].details["median"] < 13.0
    assert type(engine.runs["r1"].state.steps.by_number[1]).__name__ == "PastStep"

"""`step_slowdown` (warning): steps that take far longer than the run's own for several in a
row fire, naming the phase that grew; validation and checkpoint steps, a slow drift and
noise stay quiet."""

from __future__ import annotations

import random

from helpers import brief, feed, make_engine, make_event, of_rule

RULE = "step_slowdown"


def steps(durations: list[float], timing: bool = True) -> list[dict]:
    """step.started / step.done pairs, back to back from t = 0."""
    events, t = [], 0.0
    for i, d in enumerate(durations, 1):
        events.append(make_event("step.started", t, step=i))
        t += d
        fields = {"timing": {"gen": d * 0.7, "update": d * 0.3}} if timing else {}
        if timing and d > 1000:  # the slow steps: generation took the extra time
            fields = {"timing": {"gen": d - 180.0, "update": 180.0}}
        events.append(make_event("step.done", t, step=i, duration_s=d, **fields))
    return events


def noisy(n: int, level: float = 600.0, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.uniform(0.9, 1.1) for _ in range(n)]


def test_three_slow_steps_fire_and_say_which_phase_grew() -> None:
    events = steps([*noisy(20), 2400.0, 2500.0, 2600.0])
    alerts = of_rule(feed(make_engine(), events), RULE)
    assert [(a.rule, a.state) for a in alerts] == [(RULE, "firing")]
    (alert,) = alerts
    assert alert.ts == events[-1]["ts"]
    assert alert.details["first_step"] == 21
    assert alert.details["phase"] == "gen"
    assert 550 < alert.details["median_s"] < 650
    assert "gen grew most" in alert.summary


def test_it_resolves_at_a_step_of_usual_length() -> None:
    events = steps([*noisy(20), 2400.0, 2500.0, 2600.0, 610.0])
    assert [a.state for a in of_rule(feed(make_engine(), events), RULE)] == ["firing", "resolved"]


def test_validation_and_checkpoint_steps_do_not_fire() -> None:
    durations = noisy(100, seed=2)
    for i in range(0, 100, 5):
        durations[i] *= 4  # validation every 5 steps
    for i in range(0, 100, 10):
        durations[i + 1] *= 3  # a checkpoint right after, every 10
    assert of_rule(feed(make_engine(), steps(durations)), RULE) == []


def test_a_slow_drift_and_noise_do_not_fire() -> None:
    rng = random.Random(3)
    drifting = [600.0 * (1 + i / 200) * rng.uniform(0.7, 1.4) for i in range(300)]
    assert of_rule(feed(make_engine(), steps(drifting, timing=False)), RULE) == []


def test_without_timings_it_still_fires_and_says_no_phase() -> None:
    events = steps([*noisy(20), 2400.0, 2500.0, 2600.0], timing=False)
    (alert,) = of_rule(feed(make_engine(), events), RULE)
    assert "phase" not in alert.details
    assert brief([alert])[0][1] == "firing"


def test_a_checkpoint_between_two_stragglers_is_not_a_third_slow_step() -> None:
    """Two one-off slow steps with a checkpoint step between them: the checkpoint's own time
    (timing.save_checkpoint) is left out, so only two steps are slow."""
    events, t = [], 0.0
    durations = [*noisy(30), 1500.0, 600.0, 1500.0, 600.0]
    for i, d in enumerate(durations, 1):
        events.append(make_event("step.started", t, step=i))
        timing = {"gen": d * 0.7, "update": d * 0.3}
        if i == 32:  # the checkpoint step: its usual work plus 400 s of saving
            timing["save_checkpoint"] = 400.0
            d += 400.0
        t += d
        events.append(make_event("step.done", t, step=i, duration_s=d, timing=timing))
    assert of_rule(feed(make_engine(), events), RULE) == []
    # counted whole (exclude_phases = []), the same steps are three slow ones in a row
    engine = make_engine({RULE: {"exclude_phases": []}})
    assert [a.state for a in of_rule(feed(engine, events), RULE)] == ["firing", "resolved"]


def test_sub_second_steps_that_double_under_load_are_no_slowdown() -> None:
    """A small model's 0.05 s steps (the real TRL runs of bench/dynamics.py) stretch to
    0.15 s when the machine is busy: far above their median, but no stall."""
    events = steps([*noisy(20, level=0.05), 0.15, 0.16, 0.15], timing=False)
    assert of_rule(feed(make_engine(), events), RULE) == []
    slower = steps([*noisy(20, level=4.0), 12.0, 13.0, 12.5], timing=False)  # 8 s longer
    assert [a.state for a in of_rule(feed(make_engine(), slower), RULE)] == ["firing"]

"""`idle_gap_growing` (warning): the GPU-idle gap per step grows over the last `steps` steps."""

from __future__ import annotations

from typing import Any

from helpers import ROLLOUT, TRAINER, VLLM, brief, feed, make_engine, make_event, of_rule

RULE = "idle_gap_growing"


def steps_with_gaps(gaps: list[float], first: int = 1, start: float = 0.0) -> list[dict[str, Any]]:
    """Steps whose inference idles `gap` seconds while their last trajectory waits.

    Step k: starts at S, generation runs S+1..S+10, then vLLM idles while trajectory `tk`
    sits in the sandbox for `gap` seconds; the step is done 5 s after the trajectory.
    """
    events, t = [], start
    for k, gap in enumerate(gaps, start=first):
        events += [
            make_event("step.started", t, src=TRAINER, step=k),
            make_event("inference.stats", t + 1, src=VLLM, server="vllm-0", running=4, waiting=0),
            make_event("trajectory.started", t + 1, src=ROLLOUT, traj=f"t{k}", step=k),
            make_event("trajectory.phase", t + 9, src=ROLLOUT, traj=f"t{k}", phase="sandbox"),
            make_event("inference.stats", t + 10, src=VLLM, server="vllm-0", running=0, waiting=0),
            make_event("trajectory.done", t + 10 + gap, src=ROLLOUT, traj=f"t{k}", status="ok"),
            make_event("step.done", t + 15 + gap, src=TRAINER, step=k),
        ]
        t += 20 + gap
    return events


def done_ts(gaps: list[float], k: int) -> float:
    """When step k (1-based) of `steps_with_gaps(gaps)` is done."""
    return sum(20 + g for g in gaps[: k - 1]) + 15 + gaps[k - 1]


def gap_alerts(engine: Any, events: list[dict[str, Any]]) -> list[Any]:
    return of_rule(feed(engine, events), RULE)


def test_fires_at_the_step_done_of_the_third_growing_gap() -> None:
    gaps = [300.0, 400.0, 500.0]
    engine = make_engine()
    alerts = gap_alerts(engine, steps_with_gaps(gaps))
    assert brief(alerts) == [(RULE, "firing", done_ts(gaps, 3))]
    (alert,) = alerts
    assert alert.since == done_ts(gaps, 3)
    assert (alert.severity, alert.subject) == ("warning", None)
    assert alert.details == {"gaps": {"1": 300.0, "2": 400.0, "3": 500.0}}
    assert "5m -> 6m -> 8m" in alert.summary


def test_the_gap_counts_from_the_first_moment_of_idleness_not_from_idle_for() -> None:
    engine = make_engine({RULE: {"min_gap": 60}})
    gaps = [50.0, 60.0, 70.0]  # shorter than idle_for (120): no idle alert at all
    alerts = feed(engine, steps_with_gaps(gaps))
    assert brief(alerts) == [(RULE, "firing", done_ts(gaps, 3))]
    assert alerts[0].details["gaps"] == {"1": 50.0, "2": 60.0, "3": 70.0}


def test_the_published_incident_20_21_26_minutes() -> None:
    gaps = [20 * 60.0, 21 * 60.0, 26 * 60.0]
    alerts = gap_alerts(make_engine(), steps_with_gaps(gaps))
    assert brief(alerts) == [(RULE, "firing", done_ts(gaps, 3))]
    assert "20m -> 21m -> 26m" in alerts[0].summary


def test_growing_gaps_below_min_gap_stay_quiet() -> None:
    assert gap_alerts(make_engine(), steps_with_gaps([100.0, 200.0, 299.0])) == []


def test_gaps_that_do_not_strictly_grow_stay_quiet() -> None:
    assert gap_alerts(make_engine(), steps_with_gaps([300.0, 400.0, 400.0])) == []
    assert gap_alerts(make_engine(), steps_with_gaps([500.0, 400.0, 600.0])) == []


def test_steps_without_idle_time_have_no_gap() -> None:
    engine = make_engine()
    events = []
    for k in range(1, 6):
        events += [
            make_event("step.started", 100.0 * k, src=TRAINER, step=k),
            make_event("step.done", 100.0 * k + 90, src=TRAINER, step=k),
        ]
    assert feed(engine, events) == []
    assert [engine.runs["r1"].state.steps.by_number[k].gap for k in range(1, 6)] == [0.0] * 5


def test_resolves_at_a_step_whose_gap_is_smaller_than_the_one_before() -> None:
    gaps = [300.0, 400.0, 500.0, 500.0, 450.0]
    alerts = gap_alerts(make_engine(), steps_with_gaps(gaps))
    assert brief(alerts) == [
        (RULE, "firing", done_ts(gaps, 3)),
        (RULE, "resolved", done_ts(gaps, 5)),  # an equal gap (step 4) is not smaller
    ]
    assert alerts[1].since == done_ts(gaps, 3)


def test_fires_again_when_the_gaps_grow_again() -> None:
    gaps = [300.0, 400.0, 500.0, 100.0, 350.0, 600.0]
    alerts = gap_alerts(make_engine(), steps_with_gaps(gaps))
    assert [a.state for a in alerts] == ["firing", "resolved", "firing"]
    assert alerts[2].ts == done_ts(gaps, 6)
    assert alerts[2].details["gaps"] == {"4": 100.0, "5": 350.0, "6": 600.0}


def test_a_longer_window_per_run() -> None:
    gaps = [300.0, 400.0, 500.0, 600.0]
    start = make_event("run.started", -1, config={RULE: {"steps": 4}})
    alerts = gap_alerts(make_engine(), [start, *steps_with_gaps(gaps)])
    assert brief(alerts) == [(RULE, "firing", done_ts(gaps, 4))]
    assert list(alerts[0].details["gaps"]) == ["1", "2", "3", "4"]

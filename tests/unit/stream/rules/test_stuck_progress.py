"""`stuck_progress` (warning): a progress bar stopped advancing, judged against its own pace."""

from __future__ import annotations

from typing import Any

from helpers import ROLLOUT, brief, feed, make_engine, make_event

RULE = "stuck_progress"


def bar(
    ts: float,
    n: int,
    total: int | None = 100,
    name: str = "rollout",
    src: dict[str, Any] = ROLLOUT,
) -> dict[str, Any]:
    return make_event("progress", ts, src=src, name=name, n=n, total=total)


def paced(every: float, upto: int, start: float = 0.0, **kw: Any) -> list[dict[str, Any]]:
    """A bar created at `start` (n=0) that advances by one every `every` seconds."""
    return [bar(start + i * every, i, **kw) for i in range(upto + 1)]


def test_fires_min_stall_after_the_last_advance_with_the_evidence() -> None:
    engine = make_engine()
    assert feed(engine, paced(10, 2)) == []  # pace 10 s: limit max(300, 10 x 10) = 300
    alerts = engine.advance(1000)
    assert brief(alerts) == [(RULE, "firing", 320.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.subject) == (20.0, "warning", "rollout")
    assert alert.key == f"{RULE}|r1|rollout:rollout"
    assert alert.details == {
        "name": "rollout",
        "component": "rollout",
        "n": 2,
        "total": 100,
        "stalled_s": 300.0,
        "pace_s": 10.0,
        "limit_s": 300.0,
    }
    assert "stuck at 2/100" in alert.summary


def test_the_limit_follows_the_median_pace_times_factor() -> None:
    engine = make_engine()
    feed(engine, [bar(0, 0), bar(100, 1), bar(150, 2), bar(300, 3)])  # intervals 100, 50, 150
    assert brief(engine.advance(10_000)) == [(RULE, "firing", 1300.0)]


def test_needs_two_advances_before_it_can_fire() -> None:
    engine = make_engine()
    assert feed(engine, paced(10, 1)) == []
    assert engine.advance(1e7) == []


def test_a_slow_but_advancing_bar_stays_quiet() -> None:
    engine = make_engine()
    # every 2 hours: the limit is 20 hours, and it keeps moving
    assert feed(engine, paced(7200, 12)) == []
    # slowing down gradually, each interval still well under factor x median
    t, events = 12 * 7200.0, []
    for i, gap in enumerate([9000, 12000, 15000, 20000, 30000], start=13):
        t += gap
        events.append(bar(t, i))
    assert feed(engine, events) == []


def test_resolves_when_it_advances() -> None:
    engine = make_engine()
    feed(engine, paced(10, 2))
    engine.advance(400)
    alerts = feed(engine, [bar(500, 3)])
    assert brief(alerts) == [(RULE, "resolved", 500.0)]
    assert alerts[0].since == 20.0
    # the pace now includes the long interval, and it can fire again
    assert brief(engine.advance(100_000)) == [(RULE, "firing", 500.0 + 300)]


def test_resolves_when_it_completes() -> None:
    engine = make_engine()
    feed(engine, paced(10, 2, total=3))
    engine.advance(400)
    assert brief(feed(engine, [bar(450, 3, total=3)])) == [(RULE, "resolved", 450.0)]
    assert engine.advance(1e7) == []


def test_resolves_when_the_run_finishes() -> None:
    engine = make_engine()
    feed(engine, paced(10, 2))
    engine.advance(400)
    alerts = feed(engine, [make_event("run.finished", 450, status="ok")])
    assert brief(alerts) == [(RULE, "resolved", 450.0)]


def test_a_complete_bar_never_fires() -> None:
    engine = make_engine()
    feed(engine, [bar(0, 0, total=2), bar(10, 1, total=2), bar(20, 2, total=2)])
    assert engine.advance(1e7) == []


def test_a_bar_without_total_is_never_complete() -> None:
    engine = make_engine()
    feed(engine, paced(10, 2, total=None))
    assert brief(engine.advance(1000)) == [(RULE, "firing", 320.0)]


def test_stall_after_sets_a_fixed_limit_that_needs_no_pace() -> None:
    engine = make_engine({RULE: {"stall_after": {"Training Progress": 100}}})
    events = [bar(0, 0, name="Training Progress"), bar(0, 0, name="other")]
    assert feed(engine, events) == []
    alerts = engine.advance(1e6)
    assert brief(alerts) == [(RULE, "firing", 100.0)]
    assert alerts[0].subject == "Training Progress"
    assert alerts[0].details["pace_s"] is None


def test_stall_after_overrides_the_pace() -> None:
    engine = make_engine({RULE: {"stall_after": {"rollout": 5000}}})
    feed(engine, paced(10, 2))
    assert brief(engine.advance(1e6)) == [(RULE, "firing", 5020.0)]


def test_a_restart_resolves_and_the_pace_is_learned_afresh() -> None:
    engine = make_engine()
    feed(engine, paced(10, 5))
    assert brief(engine.advance(400)) == [(RULE, "firing", 350.0)]
    # a smaller n with a later ts: a new bar under the same name
    assert brief(feed(engine, [bar(500, 0)])) == [(RULE, "resolved", 500.0)]
    feed(engine, [bar(600, 1)])
    assert engine.advance(1e6) == []  # one advance since the restart: pace unknown
    engine = make_engine()
    feed(engine, [*paced(10, 5), bar(60, 0), bar(1060, 1), bar(2060, 2)])
    assert brief(engine.advance(1e6)) == [(RULE, "firing", 2060.0 + 10_000)]


def test_a_late_arrival_changes_nothing() -> None:
    engine = make_engine()
    feed(engine, paced(10, 5))
    engine.advance(400)
    late = bar(25, 2)  # smaller n and an earlier ts than the counter's last update
    assert feed(engine, [late]) == []
    assert engine.advance(1e6) == []


def test_counters_are_per_component_and_name() -> None:
    trainer = {"component": "trainer", "host": "node-0", "pid": 100}
    engine = make_engine()
    events = [*paced(10, 2), *paced(100, 2, start=0.5, src=trainer)]
    events.sort(key=lambda e: e["ts"])
    feed(engine, events)
    alerts = engine.advance(1e6)
    assert [(a.key, a.ts) for a in alerts] == [
        (f"{RULE}|r1|rollout:rollout", 320.0),
        (f"{RULE}|r1|trainer:rollout", 1200.5),
    ]


def test_per_run_overrides() -> None:
    engine = make_engine()
    start = make_event("run.started", 0, config={RULE: {"min_stall": 50, "factor": 2}})
    feed(engine, [start, *paced(10, 2, start=1)])
    assert brief(engine.advance(1e6)) == [(RULE, "firing", 71.0)]

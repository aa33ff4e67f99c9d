"""`ranks_stalled` (critical): no rank of a distributed trainer changed phase for `timeout`."""

from __future__ import annotations

from typing import Any

from helpers import brief, feed, make_engine, make_event

RULE = "ranks_stalled"


def rank(ts: float, r: int, phase: str, world: int = 4, **kw: Any) -> dict[str, Any]:
    src = {"component": "trainer", "host": f"node-{r}", "pid": 1000 + r, "rank": r}
    return make_event("rank.status", ts, src=src, rank=r, world_size=world, phase=phase, **kw)


def test_uniform_all_ranks_in_one_collective() -> None:
    engine = make_engine()
    events = [rank(100 + r, r, "all_reduce") for r in range(4)]
    events += [rank(200 + r, r, "all_reduce") for r in range(4)]  # same phase: no change
    assert feed(engine, events) == []
    alerts = engine.advance(10_000)
    assert brief(alerts) == [(RULE, "firing", 403.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.subject) == (103.0, "critical", None)
    assert alert.details == {
        "pattern": "uniform",
        "phases": {"all_reduce": [0, 1, 2, 3]},
        "missing": [],
        "world_size": 4,
        "stalled_s": 300.0,
    }
    assert "uniform" in alert.summary
    assert "0-3" in alert.summary


def test_divergent_some_in_destroy_process_group_others_in_recv() -> None:
    engine = make_engine()
    events = [rank(10, 0, "recv"), rank(11, 1, "recv"), rank(12, 2, "destroy_process_group")]
    events += [rank(13, 3, "destroy_process_group")]
    feed(engine, events)
    (alert,) = engine.advance(10_000)
    assert alert.ts == 313.0
    assert alert.details["pattern"] == "divergent"
    assert alert.details["phases"] == {"recv": [0, 1], "destroy_process_group": [2, 3]}


def test_divergent_when_some_exited_while_others_wait() -> None:
    engine = make_engine()
    feed(engine, [rank(10, 0, "exited"), rank(10, 1, "exited"), rank(11, 2, "recv")])
    feed(engine, [rank(11, 3, "recv")])
    (alert,) = engine.advance(10_000)
    assert alert.details["pattern"] == "divergent"
    assert alert.details["phases"] == {"exited": [0, 1], "recv": [2, 3]}


def test_missing_ranks_are_named() -> None:
    engine = make_engine()
    feed(engine, [rank(10, r, "barrier", world=8) for r in (0, 1, 2, 5)])
    (alert,) = engine.advance(10_000)
    assert alert.details["missing"] == [3, 4, 6, 7]
    assert alert.details["world_size"] == 8
    assert "never heard from: 3,4,6,7" in alert.summary


def test_resolves_when_any_rank_changes_phase() -> None:
    engine = make_engine()
    feed(engine, [rank(100 + r, r, "all_reduce") for r in range(4)])
    engine.advance(500)
    alerts = feed(engine, [rank(600, 2, "forward")])
    assert brief(alerts) == [(RULE, "resolved", 600.0)]
    assert alerts[0].since == 103.0
    assert brief(engine.advance(10_000)) == [(RULE, "firing", 900.0)]


def test_a_change_with_since_counts_from_since() -> None:
    engine = make_engine()
    feed(engine, [rank(100 + r, r, "all_reduce", since=90.0 + r) for r in range(4)])
    (alert,) = engine.advance(500)
    assert (alert.ts, alert.since) == (393.0, 93.0)
    # a status seen at 600 says the rank changed phase at 450: resolved now, due again at 750
    assert brief(feed(engine, [rank(600, 1, "backward", since=450.0)])) == [
        (RULE, "resolved", 600.0)
    ]
    alerts = engine.advance(10_000)
    assert brief(alerts) == [(RULE, "firing", 750.0)]
    assert alerts[0].since == 450.0


def test_ranks_that_keep_changing_phase_stay_quiet() -> None:
    engine = make_engine()
    phases = ["forward", "backward", "all_reduce", "optimizer"]
    events = [rank(t * 200.0 + r, r, phases[t % 4]) for t in range(20) for r in range(4)]
    assert feed(engine, events) == []


def test_resolves_when_the_run_finishes_and_stays_quiet() -> None:
    engine = make_engine()
    feed(engine, [rank(100 + r, r, "all_reduce") for r in range(4)])
    engine.advance(500)
    alerts = feed(engine, [make_event("run.finished", 700, status="failed")])
    assert brief(alerts) == [(RULE, "resolved", 700.0)]
    assert engine.advance(1e7) == []


def test_every_rank_exited_is_not_a_stall() -> None:
    engine = make_engine()
    feed(engine, [rank(100 + r, r, "exited") for r in range(4)])
    assert engine.advance(1e7) == []


def test_a_run_without_ranks_never_fires() -> None:
    engine = make_engine()
    feed(engine, [make_event("step.done", 0, step=1)])
    assert engine.advance(1e7) == []


def test_per_run_timeout() -> None:
    engine = make_engine()
    start = make_event("run.started", 0, config={RULE: {"timeout": 1800}})
    feed(engine, [start, *(rank(100, r, "all_reduce") for r in range(4))])
    assert brief(engine.advance(1e7)) == [(RULE, "firing", 1900.0)]

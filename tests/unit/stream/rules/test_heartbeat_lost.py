"""`heartbeat_lost` (critical): a process that sent heartbeats went silent without a goodbye."""

from __future__ import annotations

from helpers import ROLLOUT, TRAINER, beats, brief, by_ts, feed, make_engine, make_event

RULE = "heartbeat_lost"
ORCH = {"component": "orchestrator", "host": "node-5", "pid": 500}


def test_fires_at_exactly_last_beat_plus_timeout() -> None:
    engine = make_engine()
    alerts = feed(engine, by_ts(beats(TRAINER, 0, 300), beats(ORCH, 0, 100)))
    assert brief(alerts) == [(RULE, "firing", 160.0)]
    (alert,) = alerts
    assert alert.subject == "orchestrator@node-5/500"
    assert alert.key == f"{RULE}|r1|orchestrator@node-5/500"
    assert (alert.since, alert.severity) == (100.0, "critical")
    assert alert.details == {
        "process": "orchestrator@node-5/500",
        "component": "orchestrator",
        "host": "node-5",
        "last_beat": 100.0,
        "silent_s": 60.0,
        "alive": ["trainer@node-0/100"],
    }
    assert "orchestrator" in alert.summary


def test_fires_on_advance_when_no_event_follows() -> None:
    engine = make_engine()
    assert feed(engine, beats(ORCH, 0, 100)) == []
    assert engine.advance(159.9) == []
    assert brief(engine.advance(1000)) == [(RULE, "firing", 160.0)]


def test_resolves_when_it_beats_again_and_fires_again_when_it_stops_again() -> None:
    engine = make_engine()
    first = feed(engine, by_ts(beats(ORCH, 0, 100), beats(TRAINER, 0, 200)))
    again = feed(engine, by_ts(beats(ORCH, 205, 300), beats(TRAINER, 210, 500)))
    assert brief(first + again) == [
        (RULE, "firing", 160.0),
        (RULE, "resolved", 205.0),
        (RULE, "firing", 355.0),
    ]
    assert [a.state for a in first + again] == ["firing", "resolved", "firing"]
    assert len({a.key for a in first + again}) == 1
    assert len({a.id for a in first + again}) == 3
    assert again[0].since == 100.0
    assert again[1].since == 295.0


def test_a_final_heartbeat_never_fires() -> None:
    engine = make_engine()
    events = [*beats(ORCH, 0, 100), make_event("heartbeat", 105, src=ORCH, final=True)]
    assert feed(engine, events) == []
    assert engine.advance(1e7) == []


def test_a_final_heartbeat_resolves_a_firing_alert() -> None:
    engine = make_engine()
    feed(engine, beats(ORCH, 0, 100))
    engine.advance(200)
    alerts = feed(engine, [make_event("heartbeat", 210, src=ORCH, final=True)])
    assert brief(alerts) == [(RULE, "resolved", 210.0)]


def test_run_finished_resolves_and_silences() -> None:
    engine = make_engine()
    feed(engine, by_ts(beats(ORCH, 0, 100), beats(TRAINER, 0, 200)))
    alerts = feed(engine, [make_event("run.finished", 250, status="failed")])
    assert brief(alerts) == [(RULE, "resolved", 250.0)]
    assert engine.advance(1e7) == []  # the trainer stopped beating too: the run is over


def test_a_run_that_finished_before_the_silence_never_fires() -> None:
    engine = make_engine()
    feed(engine, [*beats(ROLLOUT, 0, 50), make_event("run.finished", 55, status="ok")])
    assert engine.advance(1e7) == []


def test_a_process_that_never_sent_heartbeats_is_not_watched() -> None:
    engine = make_engine()
    events = [make_event("step.done", t, step=int(t)) for t in (0, 10, 20)]
    assert feed(engine, events) == []
    assert engine.advance(1e7) == []


def test_each_process_is_its_own_alert() -> None:
    engine = make_engine()
    second = {**ORCH, "pid": 501}
    feed(engine, by_ts(beats(ORCH, 0, 100), beats(second, 0, 130)))
    alerts = engine.advance(1000)
    assert [(a.subject, a.ts) for a in alerts] == [
        ("orchestrator@node-5/500", 160.0),
        ("orchestrator@node-5/501", 190.0),
    ]


def test_per_run_timeout() -> None:
    engine = make_engine()
    start = make_event("run.started", 0, config={RULE: {"timeout": 600}})
    feed(engine, [start, *beats(ORCH, 0, 100)])
    assert brief(engine.advance(1e6)) == [(RULE, "firing", 700.0)]


def test_runs_are_independent() -> None:
    engine = make_engine()
    alerts = feed(engine, by_ts(beats(ORCH, 0, 100, run="a"), beats(ORCH, 0, 300, run="b")))
    alerts += engine.advance(1000)
    assert [(a.run, a.ts, a.key) for a in alerts] == [
        ("a", 160.0, f"{RULE}|a|orchestrator@node-5/500"),
        ("b", 360.0, f"{RULE}|b|orchestrator@node-5/500"),
    ]

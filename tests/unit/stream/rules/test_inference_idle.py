"""`inference_idle_with_pending` (critical): every live server idle while trajectories wait."""

from __future__ import annotations

from typing import Any

from helpers import (
    ROLLOUT,
    TRAINER,
    VLLM,
    beats,
    brief,
    by_ts,
    feed,
    make_engine,
    make_event,
    of_rule,
)

RULE = "inference_idle_with_pending"
SGLANG = {"component": "inference", "host": "node-3", "pid": 301, "instance": "sglang-0"}


def stats(ts: float, running: int, waiting: int = 0, src: dict[str, Any] = VLLM) -> dict[str, Any]:
    return make_event(
        "inference.stats", ts, src=src, server=src["instance"], running=running, waiting=waiting
    )


def traj(kind: str, ts: float, name: str, **fields: Any) -> dict[str, Any]:
    return make_event(f"trajectory.{kind}", ts, src=ROLLOUT, traj=name, **fields)


def busy_then_idle_at_60() -> list[dict[str, Any]]:
    """Two trajectories; one finishes, the other goes to the sandbox; vLLM idle from 60."""
    return by_ts(
        beats(VLLM, 0, 290),
        [
            stats(0, running=3),
            traj("started", 5, "a", step=7),
            traj("started", 6, "b", step=7),
            traj("done", 50, "a", status="ok"),
            traj("phase", 55, "b", phase="sandbox"),
            stats(60, running=0, waiting=0),
        ],
    )


def test_fires_idle_for_after_the_servers_went_idle_with_the_evidence() -> None:
    engine = make_engine()
    alerts = feed(engine, busy_then_idle_at_60())
    assert brief(alerts) == [(RULE, "firing", 180.0)]
    (alert,) = alerts
    assert (alert.since, alert.severity, alert.subject) == (60.0, "critical", None)
    assert alert.details["pending"] == 1
    assert alert.details["pending_by_phase"] == {"sandbox": 1}
    assert alert.details["oldest"] == {
        "traj": "b",
        "step": 7,
        "age_s": 174.0,
        "phase": "sandbox",
        "in_phase_s": 125.0,
    }
    assert alert.details["idle_servers"] == ["vllm-0"]
    assert alert.details["idle_s"] == 120.0
    assert "1 of 2 trajectories done" in alert.summary
    assert "sandbox" in alert.summary


def test_resolves_when_the_last_trajectory_finishes() -> None:
    engine = make_engine()
    feed(engine, busy_then_idle_at_60())
    alerts = feed(engine, [traj("done", 295, "b", status="timeout")])
    assert brief(alerts) == [(RULE, "resolved", 295.0)]
    assert alerts[0].since == 60.0
    assert alerts[0].details["duration_s"] == 235.0


def test_resolves_when_a_server_is_busy_again() -> None:
    engine = make_engine()
    feed(engine, busy_then_idle_at_60())
    assert brief(feed(engine, [stats(295, running=0, waiting=1)])) == [(RULE, "resolved", 295.0)]


def test_resolves_when_the_run_finishes() -> None:
    engine = make_engine()
    feed(engine, busy_then_idle_at_60())
    alerts = feed(engine, [make_event("run.finished", 295, status="killed")])
    assert brief(of_rule(alerts, RULE)) == [(RULE, "resolved", 295.0)]


def test_fires_again_after_resolving_with_a_new_since() -> None:
    engine = make_engine()
    feed(engine, busy_then_idle_at_60())
    assert brief(feed(engine, [stats(295, running=2)])) == [(RULE, "resolved", 295.0)]
    alerts = feed(engine, [stats(300, running=0), *beats(VLLM, 300, 500)])
    assert brief(alerts) == [(RULE, "firing", 420.0)]
    assert alerts[0].since == 300.0
    assert alerts[0].key == f"{RULE}|r1"


def test_quiet_when_idle_for_less_than_idle_for() -> None:
    engine = make_engine()
    events = by_ts(
        beats(VLLM, 0, 600),
        [stats(0, 0), traj("started", 10, "a"), stats(129, running=1), stats(200, running=0)],
        [traj("done", 300, "a", status="ok")],
    )
    assert feed(engine, events) == []
    assert of_rule(engine.advance(10_000), RULE) == []


def test_quiet_when_idle_with_nothing_pending() -> None:
    engine = make_engine()
    events = by_ts(
        beats(VLLM, 0, 3600),
        [stats(0, 1), traj("started", 1, "a"), traj("done", 2, "a", status="ok"), stats(3, 0)],
    )
    assert feed(engine, events) == []
    assert engine.advance(3600) == []


def test_quiet_during_a_checkpoint_pause() -> None:
    """The trainer is busy saving, every trajectory is done, inference idles: all fine."""
    engine = make_engine()
    events = by_ts(
        beats(VLLM, 0, 3600),
        beats(TRAINER, 0, 3600),
        beats(ROLLOUT, 0, 3600),
        [
            make_event("step.started", 0, src=TRAINER, step=1),
            stats(0, running=8),
            *(traj("started", 1, f"t{i}", step=1) for i in range(4)),
            *(traj("done", 100 + i, f"t{i}", status="ok") for i in range(4)),
            stats(110, running=0),
            make_event("step.done", 3590, src=TRAINER, step=1, timing={"save_checkpoint": 3400}),
        ],
    )
    assert feed(engine, events) == []


def test_quiet_while_one_of_several_servers_is_busy() -> None:
    engine = make_engine()
    events = by_ts(
        beats(VLLM, 0, 1000),
        beats(SGLANG, 0, 1000),
        [stats(0, 0), stats(0, 0, waiting=4, src=SGLANG), traj("started", 5, "a")],
    )
    assert feed(engine, events) == []
    # the other one drains too: now every server is idle
    events = by_ts([stats(1000, 0, src=SGLANG)], beats(VLLM, 1010, 1200), beats(SGLANG, 1010, 1200))
    alerts = feed(engine, events)
    assert brief(alerts) == [(RULE, "firing", 1120.0)]
    assert alerts[0].details["idle_servers"] == ["sglang-0", "vllm-0"]


def test_a_run_that_never_showed_an_inference_server_never_fires() -> None:
    engine = make_engine()
    events = by_ts(
        beats(ROLLOUT, 0, 7200, every=30),
        [traj("started", 5, "a"), traj("phase", 10, "a", phase="sandbox")],
    )
    assert feed(engine, events) == []
    assert of_rule(engine.advance(100_000), RULE) == []


def test_a_server_whose_heartbeat_was_lost_counts_as_unknown_not_idle() -> None:
    engine = make_engine()
    events = [
        make_event("heartbeat", 0, src=VLLM),
        stats(0, running=0),
        traj("started", 5, "a"),
        *beats(ROLLOUT, 0, 1000),
    ]
    alerts = feed(engine, events)
    assert [a.rule for a in alerts] == ["heartbeat_lost"]  # at 60; never inference idle
    assert alerts[0].ts == 60.0
    assert of_rule(engine.advance(10_000), RULE) == []


def test_a_server_going_silent_while_firing_resolves_it() -> None:
    engine = make_engine()
    feed(engine, busy_then_idle_at_60())  # firing since 180; last beat at 290
    alerts = engine.advance(1000)
    assert brief(of_rule(alerts, RULE)) == [(RULE, "resolved", 350.0)]
    assert brief(of_rule(alerts, "heartbeat_lost")) == [("heartbeat_lost", "firing", 350.0)]


def test_a_server_that_exited_cleanly_is_not_counted() -> None:
    engine = make_engine()
    events = [
        *beats(VLLM, 0, 20),
        stats(0, running=0),
        traj("started", 5, "a"),
        make_event("heartbeat", 30, src=VLLM, final=True),
    ]
    assert feed(engine, events) == []
    assert engine.advance(10_000) == []


def test_without_stats_a_server_is_idle_when_none_of_its_requests_is_in_flight() -> None:
    engine = make_engine()

    def req(kind: str, ts: float, name: str) -> dict[str, Any]:
        return make_event(f"request.{kind}", ts, src=ROLLOUT, req=name, server="sg")

    events = [
        traj("started", 0, "a"),
        req("queued", 1, "q1"),
        req("queued", 2, "q2"),
        req("done", 10, "q1"),
        req("done", 20, "q2"),  # nothing in flight from 20
    ]
    assert feed(engine, events) == []
    alerts = engine.advance(1000)
    assert brief(alerts) == [(RULE, "firing", 140.0)]
    assert alerts[0].since == 20.0


def test_per_run_idle_for_override() -> None:
    engine = make_engine()
    events = busy_then_idle_at_60()
    events.insert(0, make_event("run.started", 0, config={RULE: {"idle_for": 30}}))
    assert brief(feed(engine, events)) == [(RULE, "firing", 90.0)]


def test_global_idle_for_from_the_config() -> None:
    engine = make_engine({RULE: {"idle_for": 200}})
    assert brief(feed(engine, busy_then_idle_at_60())) == [(RULE, "firing", 260.0)]


# -- from logs alone: a bar that counts trajectories stands for the pending ones -------------


def bar(ts: float, n: int, total: int = 512, name: str = "Generating trajectories") -> dict:
    return make_event("progress", ts, src=ROLLOUT, name=name, n=n, total=total)


def test_a_stuck_rollout_bar_with_vllm_idle_fires_with_the_511_of_512_evidence() -> None:
    """The sandbox hang from logs only: the driver's "Generating trajectories" bar stops at
    511/512 while vLLM's stats line says 0 running, 0 waiting. No trajectory events."""
    events = by_ts(
        [stats(0, running=64), bar(1, 0)],
        [bar(10 + t, 100 * t) for t in range(1, 6)],
        [bar(20, 511), stats(25, running=0)],
    )
    alerts = of_rule(feed(make_engine(), events), RULE)
    engine = make_engine()
    out = feed(engine, events) + engine.advance(25 + 14 * 60)
    (alert,) = of_rule(out, RULE)
    assert (alert.state, alert.since, alert.ts) == ("firing", 25.0, 145.0)
    assert alerts == []  # not before idle_for
    assert alert.details["pending"] == 1
    assert alert.details["bars"]["Generating trajectories"]["n"] == 511
    assert alert.summary.startswith(
        "511 of 512 trajectories done (Generating trajectories), the last one has not "
        "finished in 2m while inference is idle (vllm-0)"
    )
    # the bar completes: nothing waits any more
    assert [a.state for a in of_rule(feed(engine, [bar(900, 512)]), RULE)] == ["resolved"]


def test_a_bar_not_named_as_pending_work_or_a_complete_one_stays_quiet() -> None:
    events = by_ts(
        [stats(0, running=64), stats(25, running=0)],
        [bar(20, 9, total=10, name="Training Progress")],  # steps, not trajectories
        [bar(21, 512, name="Rollout generation")],  # slime's, complete
    )
    engine = make_engine()
    assert of_rule(feed(engine, events) + engine.advance(10_000), RULE) == []
    configured = make_engine({RULE: {"pending_bars": ["Training Progress"]}})
    assert of_rule(feed(configured, events) + configured.advance(10_000), RULE) != []

"""`dep_held` (info) and the fleet pause on the engine's side: a run that opted in
(`shared_cause.hold`) is told which services to hold (the run view), its processes say
what they hold (`dep.held`, `dep.released`), and held work keeps the run's incident open --
so a fleet incident cannot resolve, and its pause lift, just because nothing fails while
work is held.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import (
    ROLLOUT,
    VLLM,
    brief,
    by_ts,
    decoded,
    feed,
    lawful,
    make_engine,
    make_event,
    one_root,
)

from runwatch.emitters.runview import RunView
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import ConfigError, InvalidEvent
from runwatch.stream.fleet.stage import FleetStage

RULE = "dep_held"
SANDBOX = "sandbox@pool-a:443"
T0 = 1_773_496_800.0
OPT_IN = {"shared_cause": {"hold": True, "canary_every": 30.0}}


def held(ts: float, run: str = "r1", src: dict[str, Any] = ROLLOUT, **more: Any) -> dict[str, Any]:
    return make_event("dep.held", ts, run=run, src=src, dep=SANDBOX, **more)


def released(ts: float, run: str = "r1", src: dict[str, Any] = ROLLOUT) -> dict[str, Any]:
    return make_event("dep.released", ts, run=run, src=src, dep=SANDBOX, reason="healthy")


def test_fires_while_a_process_holds_and_resolves_when_the_last_lets_go() -> None:
    engine = make_engine()
    other = {**ROLLOUT, "pid": 201}
    alerts = feed(engine, [held(10.0, fleet="fleet|dep:sandbox@pool-a:443|1", waiting=3),
                           held(12.0, src=other), released(20.0)])  # fmt: skip
    assert brief(alerts) == [(RULE, "firing", 10.0)]
    (fired,) = alerts
    assert (fired.subject, fired.severity, fired.since) == (SANDBOX, "info", 10.0)
    assert fired.details["dep"] == SANDBOX  # what the fleet stage reads as its cause
    assert fired.details["fleet"] == "fleet|dep:sandbox@pool-a:443|1"
    assert fired.details["processes"] == ["rollout@node-1/200"]  # at its firing
    assert brief(feed(engine, [released(30.0, src=other)])) == [(RULE, "resolved", 30.0)]


def test_a_late_release_a_clean_exit_and_the_run_s_end_let_go() -> None:
    engine = make_engine()
    assert brief(feed(engine, [released(5.0), held(10.0)])) == [(RULE, "firing", 10.0)]
    final = make_event("heartbeat", 15.0, src=ROLLOUT, final=True)
    assert brief(feed(engine, [final])) == [(RULE, "resolved", 15.0)]
    feed(engine, [make_event("heartbeat", 16.0, src=ROLLOUT), held(17.0)])
    done = make_event("run.finished", 18.0, status="ok")
    (end,) = feed(engine, [done])
    assert (end.rule, end.state, end.details["reason"]) == (RULE, "resolved", "run_finished")


def stall_then_busy(run: str = "r1", at: float = 0.0) -> list[dict[str, Any]]:
    """A trajectory hangs in the sandbox while vLLM is idle (the stall names the sandbox);
    the run's worker holds its next calls to it; vLLM gets other work (the stall resolves)."""
    rollout, vllm = {**ROLLOUT, "host": f"{run}-n"}, {**VLLM, "host": f"{run}-v"}

    def ev(kind: str, ts: float, src: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return make_event(kind, T0 + at + ts, run=run, src=src, **fields)

    return by_ts([
        ev("run.started", 0, ROLLOUT, config=OPT_IN),
        ev("inference.stats", 1, vllm, server="vllm-0", running=2, waiting=0),
        ev("trajectory.started", 2, rollout, traj="a"),
        ev("trajectory.phase", 3, rollout, traj="a", phase="sandbox", dep=SANDBOX),
        ev("inference.stats", 4, vllm, server="vllm-0", running=0, waiting=0),
        ev("trajectory.started", 130, rollout, traj="b"),
        ev("dep.held", 131, rollout, dep=SANDBOX, waiting=1),
        ev("trajectory.phase", 131, rollout, traj="b", phase="held", dep=SANDBOX),
        ev("inference.stats", 140, vllm, server="vllm-0", running=5, waiting=0),
    ])  # fmt: skip


def test_held_work_keeps_the_stall_s_incident_open_after_the_stall_resolves() -> None:
    engine = make_engine()
    alerts = feed(engine, stall_then_busy())
    assert [(a.rule, a.state) for a in alerts] == [
        ("inference_idle_with_pending", "firing"), (RULE, "firing"),
        ("inference_idle_with_pending", "resolved")]  # fmt: skip
    stall, hold, busy = alerts
    assert stall.details["dep"] == SANDBOX
    assert hold.incident is not None
    assert busy.incident is not None
    assert (hold.incident.id, hold.incident.role) == (stall.incident.id, "symptom")  # type: ignore[union-attr]
    assert busy.incident.open  # the held work keeps it open
    (lets_go,) = feed(engine, [make_event("dep.released", T0 + 200, src={**ROLLOUT, "host": "r1-n"},
                                          dep=SANDBOX, reason="healthy")])  # fmt: skip
    assert lets_go.incident is not None
    assert (lets_go.rule, lets_go.state, lets_go.incident.open) == (RULE, "resolved", False)


def staged(events: list[dict[str, Any]]) -> tuple[list[Alert], Engine, FleetStage]:
    engine = Engine()
    stage = FleetStage(engine)
    out: list[Alert] = []
    for event in events:
        out += stage.transitions(engine.apply(decoded(event)))
    lawful(out, {})
    one_root(out, {}, engine.config.incidents.explains)
    return out, engine, stage


def test_the_fleet_incident_stays_open_while_its_runs_hold_and_resolves_when_they_let_go() -> None:
    runs = [f"run-{k}" for k in range(4)]
    events = by_ts(*(stall_then_busy(run, at=k) for k, run in enumerate(runs)))
    alerts, engine, stage = staged(events)
    fleet = [a for a in alerts if a.run == "@fleet"]
    assert [(a.state, a.subject) for a in fleet] == [("firing", f"dep:{SANDBOX}")]
    fleet_id = fleet[0].incident.id  # type: ignore[union-attr]
    # every stall resolved (the servers are busy again), and the fleet incident is open:
    # the runs' held work keeps their incidents open
    stalls = [a for a in alerts if a.rule == "inference_idle_with_pending"]
    assert sorted((a.run, a.state) for a in stalls) == sorted(
        [(r, s) for r in runs for s in ("firing", "resolved")])  # fmt: skip
    assert stage.state.fleets[("dep", SANDBOX)].id == fleet_id

    # the run view: a run that opted in is told to hold the sandbox
    view = engine.run_view("run-0")
    assert view is not None
    assert view.hold is not None
    assert view.hold.canary_every == 30.0
    told = view.holding(stage.view(engine.now))
    assert [(h.dep, h.fleet) for h in told.held] == [(SANDBOX, fleet_id)]
    assert RunView.parse(told.to_json()) == told

    # they let go (a canary succeeded): the incidents close, the fleet incident resolves
    out: list[Alert] = []
    for k, run in enumerate(runs):
        src = {**ROLLOUT, "host": f"{run}-n"}
        event = make_event("dep.released", T0 + 300 + k, run=run, src=src, dep=SANDBOX,
                           reason="healthy")  # fmt: skip
        out += stage.transitions(engine.apply(decoded(event)))
    assert [(a.run, a.rule, a.state) for a in out][-1] == ("@fleet", "shared_cause", "resolved")
    assert sorted(out[-1].details["runs"]) == runs
    assert stage.view(engine.now).held == []
    assert engine.run_view("run-0").holding(stage.view(engine.now)).held == []  # type: ignore[union-attr]


def test_the_service_s_own_heartbeats_say_when_it_is_back() -> None:
    """A sandbox pool that sends heartbeats itself (its `src.instance` the service's name):
    silent while it is down, its beat again tells the runs' holds that it is back."""
    pool = {"component": "sandbox", "host": "pool-a", "pid": 7, "instance": SANDBOX}
    runs = [f"run-{k}" for k in range(4)]
    beating = [make_event("heartbeat", T0 + t, run="pool-a", src=pool) for t in (0, 10, 20)]
    again = make_event("heartbeat", T0 + 250, run="pool-a", src=pool)
    events = by_ts(beating, *(stall_then_busy(run, at=k) for k, run in enumerate(runs)))
    alerts, engine, stage = staged([*events, again])
    lost = [(a.run, a.state) for a in alerts if a.rule == "heartbeat_lost"]
    assert lost == [("pool-a", "firing"), ("pool-a", "resolved")]
    (held,) = stage.view(engine.now).held
    assert (held.dep, held.back) == (SANDBOX, T0 + 250)


def test_a_run_that_did_not_opt_in_is_told_nothing_to_hold() -> None:
    runs = [f"run-{k}" for k in range(4)]
    events = by_ts(*(stall_then_busy(run, at=k) for k, run in enumerate(runs)))
    plain = [{**e, "config": {}} if e["kind"] == "run.started" else e for e in events
             if not (e["run"] == "run-3" and e["kind"] == "run.started")]  # fmt: skip
    _, engine, stage = staged(plain)
    assert stage.view(engine.now).held  # the sandbox's fleet incident is open
    view = engine.run_view("run-3")
    assert view is not None
    assert view.hold is None
    assert view.holding(stage.view(engine.now)).held == []
    assert "hold" not in view.to_dict()
    assert "held" not in view.to_dict()


def test_the_opt_in_is_validated_like_every_config() -> None:
    config = RulesConfig.default()
    params = config.run_params(OPT_IN)["shared_cause"]
    assert (params.hold, params.canary_every) == (True, 30.0)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"config\.shared_cause\.canary_evry.*canary_every"):
        config.run_params({"shared_cause": {"hold": True, "canary_evry": 30}})
    with pytest.raises(ConfigError, match=r"config\.shared_cause\.hold"):
        config.run_params({"shared_cause": {"hold": "yes"}})
    with pytest.raises(ConfigError, match=r"config\.shared_cause\.canary_every"):
        config.run_params({"shared_cause": {"canary_every": 0}})
    engine = make_engine()
    bad = make_event("run.started", 1.0, config={"shared_cause": {"hold": 1}})
    with pytest.raises(InvalidEvent, match=r"config\.shared_cause\.hold: Input should be a"):
        feed(engine, [bad])  # refused (a driver dead-letters it): nothing held
    assert engine.run_view("r1") is None

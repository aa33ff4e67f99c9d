"""The views give the right numbers: on the scenarios, and -- for the GPU-idle gaps, computed
in SQL -- the engine's own numbers on random histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runwatch.dev import scenarios
from runwatch.store import Store
from runwatch.stream.decode import decode
from runwatch.stream.state.run import RunState, StateConfig

SANDBOX = "grpo-qwen2.5-7b-sandbox"


def engine_gaps(events: list[dict[str, Any]], run: str = "rnd") -> dict[int, float]:
    """Per done step, the GPU-idle gap as the engine's run state counts it."""
    state = RunState(events[0]["run"] if events else run, StateConfig(keep_steps=10**6))
    for e in sorted(events, key=lambda e: e["ts"]):
        state.apply(decode(json.dumps(e)))
    return {n: s.gap for n, s in state.steps.by_number.items() if s.done is not None}


def sql_gaps(store: Store, run: str) -> dict[int, float]:
    rows = store.con.execute(
        "SELECT step, gap_s FROM idle_gaps WHERE run = ? AND end_ts IS NOT NULL", [run]
    ).fetchall()
    return {int(s): float(g) for s, g in rows}


def test_sandbox_hang_idle_gaps_are_20_21_26_minutes(incident_store: Store) -> None:
    rows = incident_store.con.execute(
        "SELECT step, gap_s, gap_min FROM idle_gaps WHERE run = ? ORDER BY step", [SANDBOX]
    ).fetchall()
    assert [(s, g) for s, g, _ in rows[:3]] == [(1, 1200.0), (2, 1260.0), (3, 1560.0)]
    assert [m for _, _, m in rows[:3]] == [20.0, 21.0, 26.0]
    assert rows[3][0] == 4
    assert rows[3][1] == pytest.approx(99 * 60)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_idle_gaps_match_the_engine_on_every_incident(incident_store: Store, name: str) -> None:
    events = scenarios.SCENARIOS[name]()
    want = engine_gaps(events)
    got = sql_gaps(incident_store, events[0]["run"])
    assert got.keys() == want.keys()
    for step, gap in want.items():
        assert got[step] == pytest.approx(gap, abs=1e-6), step


def test_idle_spans_of_the_sandbox_hang(incident_store: Store) -> None:
    rows = incident_store.con.execute(
        "SELECT seconds FROM idle_spans WHERE run = ? ORDER BY start_ts", [SANDBOX]
    ).fetchall()
    assert [r[0] for r in rows] == [1200.0, 1260.0, 1560.0, 99 * 60.0]


def test_runs_view(incident_store: Store) -> None:
    rows = {
        r[0]: r[1:]
        for r in incident_store.con.execute(
            "SELECT run, status, last_step, total_steps, labels, open_alerts, open_rules FROM runs"
        ).fetchall()
    }
    assert set(rows) == {b()[0]["run"] for b in scenarios.SCENARIOS.values()}
    # killed: its end closed the alerts still firing (contract section 8)
    assert rows[SANDBOX] == ("killed", 3, 400, {"team": "reasoning"}, 0, [])
    assert rows["ppo-llama3-8b-math"][:3] == ("killed", 680, 1000)
    assert rows["grpo-qwen2.5-72b-healthy"][0] == "ok"
    assert rows["grpo-qwen2.5-72b-healthy"][4] == 0  # the healthy run raises nothing
    assert rows["prime-rl-qwen3-4b"][0] == "running"


def test_steps_view(incident_store: Store) -> None:
    rows = incident_store.con.execute(
        "SELECT step, duration_s, reward, timing['update_actor'] FROM steps WHERE run = ? "
        "ORDER BY step",
        [SANDBOX],
    ).fetchall()
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    assert [r[2] for r in rows[:3]] == pytest.approx([0.43, 0.44, 0.45])
    assert rows[0][3] == 600.0
    assert rows[3][1] is None
    zero = incident_store.con.execute(
        "SELECT min(step) FROM steps WHERE run = 'ppo-llama3-8b-math' AND reward = 0"
    ).fetchall()
    assert zero == [(188,)]  # the reward from step.metrics' critic/score/mean


def test_trajectories_view_says_where_the_time_went(incident_store: Store) -> None:
    rows = incident_store.con.execute(
        "SELECT traj, status, phase, time_per_phase['sandbox'], duration_s FROM trajectories "
        "WHERE run = ? ORDER BY duration_s DESC LIMIT 2",
        [SANDBOX],
    ).fetchall()
    stuck, slow = rows
    assert stuck[:3] == ("s4-t511", "unfinished", "sandbox")
    assert stuck[3] == pytest.approx(99 * 60, abs=1)
    assert slow[0] == "s3-t511"
    assert slow[1] == "ok"
    assert slow[3] == pytest.approx(26 * 60, abs=1)
    count = incident_store.con.execute(
        "SELECT count(*) FROM trajectories WHERE run = ?", [SANDBOX]
    ).fetchall()
    assert count == [(4 * 512,)]


def test_inference_view(incident_store: Store) -> None:
    rows = incident_store.con.execute(
        "SELECT server, count(*), max(running) FROM inference "
        "WHERE run = 'ppo-llama3-8b-math' GROUP BY server"
    ).fetchall()
    assert rows == [("sglang-0", 38, 64)]


# -- random histories: SQL against the engine ---------------------------------------------

TRAINER = {"component": "trainer", "host": "n0", "pid": 1}
ROLLOUT = {"component": "rollout", "host": "n1", "pid": 2}
SRV_A = {"component": "inference", "host": "n2", "pid": 3, "instance": "a"}
SRV_B = {"component": "inference", "host": "n3", "pid": 4}


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    t = 1000.0
    step, step_open = 0, False
    pending: list[str] = []
    in_flight: list[str] = []
    n_traj = n_req = 0

    def emit(kind: str, src: dict[str, Any], **fields: Any) -> None:
        out.append({"v": 1, "id": f"e{len(out)}", "ts": t, "run": "rnd", "kind": kind,
                    "src": src, **fields})  # fmt: skip

    for _ in range(draw(st.integers(5, 60))):
        t += draw(st.sampled_from([0.0, 1.0, 5.0, 30.0, 120.0]))
        action = draw(st.sampled_from(
            ["step", "step", "traj+", "traj+", "traj-", "traj-", "stats_a", "stats_a",
             "stats_b", "req+", "req-", "beat_a", "phase"]))  # fmt: skip
        if action == "step":
            # steps without step.started: test_a_step_without_start_gets_the_running_span
            if step_open:
                emit("step.done", TRAINER, step=step)
            else:
                step += 1
                emit("step.started", TRAINER, step=step)
            step_open = not step_open
        elif action == "traj+":
            n_traj += 1
            pending.append(f"t{n_traj}")
            emit("trajectory.started", ROLLOUT, traj=f"t{n_traj}", step=step)
        elif action == "traj-" and pending:
            traj = pending.pop(draw(st.integers(0, len(pending) - 1)))
            emit("trajectory.done", ROLLOUT, traj=traj, status="ok")
        elif action == "phase" and pending:
            emit("trajectory.phase", ROLLOUT, traj=pending[0], phase="sandbox")
        elif action == "stats_a":
            busy = draw(st.integers(0, 2))
            emit("inference.stats", SRV_A, server="a", running=busy, waiting=0)
        elif action == "stats_b":
            emit("inference.stats", SRV_B, server="b", running=0, waiting=draw(st.integers(0, 1)))
        elif action == "req+":
            n_req += 1
            in_flight.append(f"q{n_req}")
            emit("request.queued", ROLLOUT, req=f"q{n_req}", server="c")
        elif action == "req-" and in_flight:
            emit("request.done", ROLLOUT, req=in_flight.pop(0), server="c")
        elif action == "beat_a":
            emit("heartbeat", SRV_A, final=draw(st.booleans()))
    if step_open:
        t += 10
        emit("step.done", TRAINER, step=step)
    if draw(st.booleans()):
        t += 10
        emit("run.finished", TRAINER, status="ok")
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=histories(), batches=st.integers(1, 4))
@pytest.mark.slow
def test_idle_gaps_match_the_engine_on_random_histories(
    store: Store, events: list[dict[str, Any]], batches: int
) -> None:
    store.con.execute("DELETE FROM events")
    store.con.execute("DELETE FROM trajectory_marks")  # derived from events by the writer
    # in several batches: a trajectory's start and done may be folded in different ones
    size = max(1, -(-len(events) // batches))
    for i in range(0, len(events), size):
        store.write_events([json.dumps(e) for e in events[i : i + size]])
    want = engine_gaps(events)
    got = sql_gaps(store, "rnd")
    assert got.keys() == want.keys()
    for step, gap in want.items():
        assert got[step] == pytest.approx(gap, abs=1e-6), (step, got, want)


def test_identical_pending_intervals_in_two_idle_stretches_stay_two_spans(store: Store) -> None:
    """Found by the random histories: eight trajectories pending through two idle stretches
    gave eight identical intervals per stretch, and the spans' windows numbered and summed
    those ties in different orders, merging the stretches into one (1000..1003)."""
    n = iter(range(1000))

    def e(ts: float, kind: str, src: dict[str, Any], **f: Any) -> dict[str, Any]:
        return {"v": 1, "id": f"e{next(n)}", "ts": ts, "run": "rnd", "kind": kind,
                "src": src, **f}  # fmt: skip

    events = [e(1000, "trajectory.started", ROLLOUT, traj=f"t{i}", step=0) for i in range(8)]
    events += [
        e(1000, "request.queued", ROLLOUT, req="q1", server="c"),
        e(1000, "request.done", ROLLOUT, req="q1", server="c"),
        e(1001, "inference.stats", SRV_A, server="a", running=1, waiting=0),
        e(1001, "step.started", TRAINER, step=1),
        e(1002, "inference.stats", SRV_A, server="a", running=0, waiting=0),
        e(1002, "step.done", TRAINER, step=1),
        e(1002, "step.started", TRAINER, step=2),
        e(1003, "request.queued", ROLLOUT, req="q2", server="c"),
        e(1004, "request.done", ROLLOUT, req="q2", server="c"),
        e(1014, "step.done", TRAINER, step=2),
    ]
    store.con.execute("DELETE FROM events")
    store.con.execute("DELETE FROM trajectory_marks")
    store.write_events([json.dumps(x) for x in events])
    assert engine_gaps(events) == {1: 0.0, 2: 11.0}
    assert sql_gaps(store, "rnd") == engine_gaps(events)


def test_a_step_without_start_gets_the_running_span(store: Store) -> None:
    """Without step.started the engine counts the idle time running at step.done."""

    def e(n: int, kind: str, ts: float, src: dict[str, Any], **f: Any) -> dict[str, Any]:
        return {"v": 1, "id": f"n{n}", "ts": ts, "run": "nostart", "kind": kind, "src": src, **f}

    events = [
        e(1, "trajectory.started", 1000.0, ROLLOUT, traj="t1"),
        e(2, "inference.stats", 1010.0, SRV_A, server="a", running=0, waiting=0),  # idle from here
        e(3, "step.done", 1030.0, TRAINER, step=1),  # 20 s
        e(4, "inference.stats", 1040.0, SRV_A, server="a", running=1, waiting=0),
        e(5, "step.done", 1050.0, TRAINER, step=2),  # busy at done: 0 s
        e(6, "inference.stats", 1060.0, SRV_A, server="a", running=0, waiting=0),
        e(7, "step.done", 1065.0, TRAINER, step=3),  # 5 s
    ]
    store.write_events([json.dumps(x) for x in events])
    assert sql_gaps(store, "nostart") == engine_gaps(events) == {1: 20.0, 2: 0.0, 3: 5.0}


def test_the_incidents_view_names_each_incident_s_root(incident_store: Store) -> None:
    """One row per incident, with its one root (contract sections 7 and 8); closed ones with
    their duration."""
    rows = incident_store.con.execute(
        "SELECT run, root_rule, root_subject, symptoms, open, duration_s FROM incidents "
        "ORDER BY run, opened_ts"
    ).fetchall()
    roots = {(run, rule, subject) for run, rule, subject, *_ in rows}
    assert ("prime-rl-qwen3-4b", "heartbeat_lost", "orchestrator@node-3/5100") in roots
    assert ("ppo-llama3-8b-math", "heartbeat_lost", "inference@node-5/sglang-0") in roots
    sandbox = [r for r in rows if r[0] == "grpo-qwen2.5-7b-sandbox"]
    # the idle gap grows while nothing that explains it fires: an incident of its own
    idle = "inference_idle_with_pending"
    assert [r[1] for r in sandbox] == [idle] * 3 + ["idle_gap_growing", idle]
    assert [r[3] for r in sandbox] == [["stuck_progress"]] * 3 + [None, ["stuck_progress"]]
    assert [r[4] for r in sandbox] == [False] * 5  # the run's end closed the fourth
    assert [round(r[5] / 60) for r in sandbox[:3]] == [18, 19, 24]


def test_the_fleet_incidents_view(fleet_db: Path) -> None:
    """One row per fleet incident: its cause, every run it held, opened and closed."""
    from runwatch.dev.fleet import fleet_cluster

    from .conftest import FLEET

    _, expected = fleet_cluster(**FLEET)  # type: ignore[arg-type]
    with Store.reader(fleet_db) as store:
        rows = store.con.execute(
            "SELECT id, cause, kind, name, runs, open, opened < closed, duration_s > 0 "
            "FROM fleet_incidents ORDER BY cause"
        ).fetchall()
    assert rows == [
        ("fleet|dep:reward@rm-1:8000|1", "dep:reward@rm-1:8000", "dep", "reward@rm-1:8000",
         sorted(expected.dep_runs), False, True, True),
        ("fleet|host:rollout-node-7|1", "host:rollout-node-7", "host", "rollout-node-7",
         sorted(expected.host_runs), False, True, True),
    ]  # fmt: skip


def test_show_at_fleet_lists_the_fleet_incidents(fleet_db: Path) -> None:
    from runwatch.commands.query import render_fleet
    from runwatch.store.report import run_timeline

    with Store.reader(fleet_db) as store:
        tl = run_timeline(store, "@fleet")
    text = render_fleet(tl)
    lines = text.splitlines()
    assert lines[0] == "@fleet  2 fleet incident(s), 0 open"
    assert any(ln.startswith("  host:rollout-node-7 #1  ") and ln.endswith(
        "3 runs: fleet-000, fleet-002, fleet-003") for ln in lines), text  # fmt: skip
    assert sum("FIRING" in ln for ln in lines) == sum("RESOLVED" in ln for ln in lines) == 2


def test_a_fleet_incident_lasted_as_its_resolution_says(fleet_db: Path) -> None:
    """One duration: `show @fleet`'s "lasted" (the view's, opening to resolution) is the one
    its resolved transition says ("resolved after", `details.duration_s`)."""
    with Store.reader(fleet_db) as store:
        rows = store.con.execute(
            "SELECT f.duration_s, CAST(json_extract(a.details, '$.duration_s') AS DOUBLE) "
            "FROM fleet_incidents f JOIN alert_log a "
            "ON json_extract_string(a.raw, '$.incident.id') = f.id AND a.state = 'resolved'"
        ).fetchall()
    assert len(rows) == 2
    assert all(abs(view - said) < 1e-3 for view, said in rows), rows

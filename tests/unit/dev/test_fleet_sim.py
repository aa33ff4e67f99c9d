"""The simulator's shared things (`runwatch.dev.fleet`): jobs that share reward servers, a
sandbox pool and a rollout node, and the faults that break one -- a server that hangs (work
that reaches it waits until it is back), a node that dies (its processes go silent, their
jobs hang), trainers that crash the same minute; and the demo's shared fault, a fleet
incident through `runwatch simulate --shared-fault` and `runwatch replay`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from runwatch.dev.fleet import NODE, SANDBOX, fleet_cluster, reward_server

T0 = 1_773_496_800.0


def small() -> tuple[list[dict[str, Any]], Any]:
    cluster, expected = fleet_cluster(runs=12, node_runs=3, coincident=2, duration=1500.0,
                                      hang_at=600.0, hang_for=300.0, node_down_at=640.0,
                                      crash_at=620.0)  # fmt: skip
    return [dict(e) for e in cluster.events(T0)], expected


def test_every_job_names_the_services_it_waits_on() -> None:
    events, _ = small()
    deps: dict[str, set[str]] = {}
    for e in events:
        if e["kind"] == "trajectory.phase" and "dep" in e:
            deps.setdefault(e["run"], set()).add(e["dep"])
    assert len(deps) == 12
    for k in range(12):
        assert deps[f"fleet-{k:03d}"] == {SANDBOX, reward_server(k % 3)}


def test_work_that_reaches_a_hung_server_waits_until_it_is_back() -> None:
    events, expected = small()
    start, end = T0 + 600.0, T0 + 900.0
    reached: dict[tuple[str, str], float] = {}
    waited = 0
    for e in events:
        key = (e["run"], e.get("traj", ""))
        if e["kind"] == "trajectory.phase" and e.get("dep") == reward_server(1):
            reached[key] = e["ts"]
        elif e["kind"] == "trajectory.done" and key in reached:
            at, done = reached[key], e["ts"]
            if start <= at < end:  # reached it while it hung: back when it is back
                assert done >= end, (key, at, done)
                waited += 1
            elif at < start:  # before: done before it hung, or in flight and held
                assert done < start + 2.0 or done >= end, (key, at, done)
            else:
                assert done - at < 2.0  # a healthy reward call takes a second
    assert waited
    assert {run for run, _ in reached} == expected.dep_runs


def test_a_node_that_dies_takes_its_processes_and_their_jobs_hang() -> None:
    events, expected = small()
    down = T0 + 640.0
    on_node = [e for e in events if e["src"].get("host") == NODE]
    assert {e["run"] for e in on_node} == expected.host_runs
    assert max(e["ts"] for e in on_node) < down
    for run in expected.host_runs:  # the step it was in never ends: the batch never comes
        mine = [e for e in events if e["run"] == run]
        last = max(e["step"] for e in mine if e["kind"] == "step.started")
        assert not [e for e in mine if e["kind"] == "step.done" and e["step"] == last]
        assert [e["status"] for e in mine if e["kind"] == "run.finished"] == ["killed"]


def test_coincident_crashes_end_their_runs_failed_the_same_minute() -> None:
    events, expected = small()
    ends = {e["run"]: e for e in events if e["kind"] == "run.finished"}
    failed = {run for run, e in ends.items() if e["status"] == "failed"}
    assert failed == expected.coincident
    errors = {e["error"] for e in events if e["kind"] == "component.failed"}
    assert len(errors) == 2  # each for reasons of its own
    assert all(T0 + 620.0 <= ends[run]["ts"] < T0 + 680.0 for run in failed)


def test_the_demo_s_shared_fault_is_one_fleet_incident(tmp_path: Path) -> None:
    trace = tmp_path / "shared.jsonl"
    cmd = [sys.executable, "-m", "runwatch.cli"]
    subprocess.run([*cmd, "simulate", "--shared-fault", "--jobs", "8", "--duration", "1500",
                    "--seed", "1", "--start", str(T0), "--out", str(trace)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    out = subprocess.run([*cmd, "replay", str(trace)], check=True, capture_output=True,
                         text=True, timeout=120).stdout  # fmt: skip
    fleet = [json.loads(line) for line in out.splitlines() if '"@fleet"' in line]
    assert [(a["state"], a["subject"]) for a in fleet] == [
        ("firing", "dep:reward@rm-1:8000"), ("resolved", "dep:reward@rm-1:8000")]  # fmt: skip
    assert set(fleet[0]["details"]["runs"]) <= {f"sim-1-job{k:03d}" for k in (1, 3, 5, 7)}

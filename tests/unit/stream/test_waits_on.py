"""The alerts name what their subject waits on (contract section 8): the service the stalled
work waits on (`details.dep`, from `trajectory.phase`'s `dep`), the node a silent or failed
process ran on (`details.host`), the inference server a process vouched for
(`details.server`) -- what a fleet incident groups runs by."""

from __future__ import annotations

from typing import Any

from helpers import ROLLOUT, TRAINER, VLLM, beats, by_ts, feed, make_engine, make_event


def stats(ts: float, running: int) -> dict[str, Any]:
    return make_event("inference.stats", ts, src=VLLM, server="vllm-0", running=running,
                      waiting=0)  # fmt: skip


def phase(ts: float, traj: str, name: str, dep: str | None = None) -> dict[str, Any]:
    fields = {"dep": dep} if dep is not None else {}
    return make_event("trajectory.phase", ts, src=ROLLOUT, traj=traj, phase=name, **fields)


def stalled_on_the_reward_server() -> list[dict[str, Any]]:
    """Three trajectories: one in the sandbox briefly, two sit in reward on rm-2 from 20;
    vLLM idle from 30; the rollout bar stops at 10 of 12."""
    events = beats(VLLM, 0, 600) + beats(ROLLOUT, 0, 600) + [stats(0, 3), stats(30, 0)]
    for i, t in enumerate("abc"):
        events.append(make_event("trajectory.started", 1 + i, src=ROLLOUT, traj=t, step=1))
    events += [
        phase(10, "a", "sandbox", "sandbox@pool-a:443"),
        phase(20, "b", "reward", "reward@rm-2:8000"),
        phase(21, "c", "reward", "reward@rm-2:8000"),
        phase(25, "a", "generate"),  # no dep: its own inference
        make_event("trajectory.done", 28, src=ROLLOUT, traj="a", status="ok"),
    ]
    events += [make_event("progress", 2.0 * n, src=ROLLOUT, name="rollout", n=n, total=12)
               for n in range(1, 11)]  # fmt: skip
    return by_ts(events)


def test_the_idle_alert_and_the_frozen_bar_name_the_service_the_work_waits_on() -> None:
    alerts = feed(make_engine(), stalled_on_the_reward_server())
    fired = {a.rule: a for a in alerts if a.firing}
    idle, bar = fired["inference_idle_with_pending"], fired["stuck_progress"]
    assert idle.details["dep"] == "reward@rm-2:8000"
    assert idle.details["pending_by_dep"] == {"reward@rm-2:8000": 2}
    assert idle.details["oldest"]["dep"] == "reward@rm-2:8000"
    assert idle.summary.endswith("; the work waits on reward@rm-2:8000")
    assert bar.details["dep"] == "reward@rm-2:8000"


def test_without_a_dep_the_details_say_none() -> None:
    events = [{**e, "dep": None} if e["kind"] == "trajectory.phase" else e
              for e in stalled_on_the_reward_server()]  # fmt: skip
    events = [{k: v for k, v in e.items() if v is not None} for e in events]
    alerts = feed(make_engine(), events)
    assert all("dep" not in a.details for a in alerts)


def test_a_silent_or_failed_process_names_its_node_and_the_server_it_served() -> None:
    events = by_ts(
        beats(VLLM, 0, 100), beats(TRAINER, 0, 400), [stats(0, 1), stats(50, 1)],
        [make_event("component.failed", 300, src=TRAINER, how="exception", error="E: x")],
    )  # fmt: skip
    fired = {a.rule: a for a in feed(make_engine(), events) if a.firing}
    lost, failed = fired["heartbeat_lost"], fired["component_failed"]
    assert (lost.details["host"], lost.details["server"]) == ("node-2", "vllm-0")
    assert failed.details["host"] == "node-0"


def test_work_that_did_not_wait_through_the_stall_is_not_what_it_waits_on() -> None:
    """A bar frozen for 10 minutes (a collective hangs) while a trajectory entered its reward
    call a second ago: the run does not wait on the reward server."""
    events = beats(ROLLOUT, 0, 1200) + [
        make_event("progress", 10.0 * n, src=ROLLOUT, name="rollout", n=n, total=12)
        for n in (1, 2, 3)
    ]
    events += [make_event("trajectory.started", 880, src=ROLLOUT, traj="late", step=9),
               phase(898, "late", "reward", "reward@rm-2:8000")]  # fmt: skip
    engine = make_engine({"stuck_progress": {"stall_after": {"rollout": 880}}})  # at 910
    alerts = feed(engine, by_ts(events))
    (bar,) = [a for a in alerts if a.rule == "stuck_progress" and a.firing]
    assert bar.ts == 910.0
    assert "dep" not in bar.details
    assert engine.runs["r1"].state.inference.waits_on(910.0, 905.0) == "reward@rm-2:8000"

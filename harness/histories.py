"""Generated event histories, healthy and faulty, for the rules that read events rather than
metric curves -- weight_sync_stalled, restart_loop, degenerate_groups: what bench/dynamics.py
backtests their defaults on, beside the curves of runwatch.dev.dynamics.

Healthy: weights published every step and loaded by four engines within seconds to a few
minutes (a slow one now and then); a rollout worker that restarts once in a long while;
GRPO groups of 8 whose solve rate wanders between 5% and 95% (an easy or a hard batch has
many all-equal groups). Faults start at step `at` and stay: an engine that stops loading, a
worker in a crash loop, a policy that solves everything (or nothing).
"""

from __future__ import annotations

import random
from typing import Any

from runwatch.dev.envelope import event

#: fault name -> the rule that should catch it
FAULTS = {
    "sync_stuck": "weight_sync_stalled",
    "crash_loop": "restart_loop",
    "all_solved": "degenerate_groups",
}
T0 = 1_800_000_000.0
STEP_S = 300.0
ENGINES = 4
GROUPS, GROUP_SIZE = 32, 8


def history(
    run: str, seed: int, steps: int = 200, fault: str | None = None, at: int = 0,
    start: float = T0,
) -> list[dict[str, Any]]:  # fmt: skip
    """One run's events, in time order."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []

    def ev(ts: float, kind: str, src: dict[str, Any], **fields: Any) -> None:
        out.append(event(kind, ts, run, src, f"{run}-{len(out)}", **fields))

    trainer = {"component": "trainer", "host": "node-0", "pid": 100}
    engines = [{"component": "inference", "host": f"gpu-{k}", "pid": 200 + k,
                "instance": f"vllm-{k}"} for k in range(ENGINES)]  # fmt: skip
    pid, worker_up = 1000, start
    loaded_at = [start] * ENGINES  # an engine loads versions in order
    solve = 0.5
    for step in range(1, steps + 1):
        t = start + STEP_S * step
        faulty = fault is not None and step >= at
        # weights: published at the step's end, loaded by each engine soon after
        ev(t, "weights.published", trainer, version=step, step=step)
        for k, src in enumerate(engines):
            if faulty and fault == "sync_stuck" and k == 0:
                continue
            delay = rng.uniform(2, 60) if rng.random() > 0.05 else rng.uniform(60, 400)
            loaded_at[k] = max(loaded_at[k] + 1, t + delay)
            ev(loaded_at[k], "weights.loaded", src, version=step, server=src["instance"])
        # heartbeats of every process; the rollout worker restarts now and then
        for src in [trainer, *engines]:
            for b in range(0, int(STEP_S), 30):
                ev(t - STEP_S + b, "heartbeat", src)
        crash = faulty and fault == "crash_loop"
        if crash or rng.random() < 0.005:  # healthy: once every ~200 steps
            pid += 1
            worker_up = t - STEP_S / 2 + rng.uniform(20, 60)
        worker = {"component": "rollout", "host": "node-1", "pid": pid}
        for b in range(0, int(STEP_S), 30):
            if t - STEP_S + b >= worker_up:
                ev(t - STEP_S + b, "heartbeat", worker)
        # GRPO groups: each trajectory solves with the batch's rate
        solve = min(0.95, max(0.05, solve + rng.gauss(0, 0.08)))
        rate = 1.0 if faulty and fault == "all_solved" else solve
        for g in range(GROUPS):
            for i in range(GROUP_SIZE):
                reward = 1.0 if rng.random() < rate else 0.0
                traj = f"s{step}-g{g}-{i}"
                ev(t - 100, "trajectory.done", worker, traj=traj, status="ok", reward=reward,
                   group=f"p{g}", step=step)  # fmt: skip
        ev(t, "step.done", trainer, step=step)
    out.sort(key=lambda e: e["ts"])
    return out

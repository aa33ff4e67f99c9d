"""The events of N RL-shaped runs, in schedule order: what `bench/fleet.py` sends in real time
and `bench/memory.py` applies in simulated time.

Each run: eight trainer ranks, a rollout worker, an orchestrator and two inference servers,
every process beating every `BEAT` s, the servers sending queue stats every `BEAT` s, and a
training step every 30-120 s (its own period) with `TRAJS` trajectories that start, go to a
tool and finish, then step.done with timing, step.metrics and reward: ~2.7 events/s per run.
Faults at given moments: "nan" (a NaN in the step in progress) or "silent" (the rollout
worker stops beating).
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import orjson

from runwatch.dev import envelope

BEAT = 10.0
TRAJS = 32


class Planned(NamedTuple):
    """One event of the schedule (`kind` None: a fault that sends nothing, "silent")."""

    at: float  # seconds after the start
    run: str
    kind: str | None
    src: dict[str, Any]
    fields: dict[str, Any]
    fault: str | None = None  # "nan" or "silent": the fault this event is (or starts)
    last_beat: float | None = None  # "silent": when the worker beat last (schedule seconds)


def wire(p: Planned, ts: float, event_id: str) -> bytes:
    """`p` as a record's value: the contract's event, stamped `ts`. A step's metrics go
    through json, which writes NaN as the contract's token (orjson would write null)."""
    e = envelope.event(p.kind, ts, p.run, p.src, event_id, **p.fields)  # type: ignore[arg-type]
    return json.dumps(e).encode() if p.kind == "step.metrics" else orjson.dumps(e)


def src(run: str, k: int) -> dict[str, Any]:
    """Process k of a run: 0-7 trainer ranks, 8 rollout, 9 orchestrator, 10-11 inference."""
    if k < 8:
        return {"component": "trainer", "host": f"{run}-n{k // 4}", "pid": 100 + k, "rank": k}
    if k == 8:
        return {"component": "rollout", "host": f"{run}-n2", "pid": 200}
    if k == 9:
        return {"component": "orchestrator", "host": f"{run}-n2", "pid": 300}
    return {"component": "inference", "host": f"{run}-g{k - 10}", "pid": 400 + k,
            "instance": f"vllm-{k - 10}"}  # fmt: skip


def schedule(runs: list[str], seconds: float, seed: int,
             faults: Sequence[tuple[float, str, str]] = ()) -> Iterator[Planned]:  # fmt: skip
    """The runs' events up to `seconds`, in time order; then every process's final beat."""
    rng = random.Random(seed)
    step = dict.fromkeys(runs, 0)
    silent: set[tuple[str, int]] = set()
    last_beat: dict[tuple[str, int], float] = {}
    todo: list[tuple[float, int, str, str, int]] = []  # (at, seq, run, what, k)
    seq = 0

    def later(at: float, run: str, what: str, k: int = 0) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(todo, (at, seq, run, what, k))

    def event(at: float, run: str, kind: str, k: int, **fields: Any) -> Planned:
        return Planned(at, run, kind, src(run, k), fields)

    for run in runs:
        yield event(0.0, run, "run.started", 0, labels={"team": "fleet"})
        for k in range(12):
            later(rng.uniform(0, BEAT), run, "beat", k)
        for k in (10, 11):
            later(rng.uniform(0, BEAT), run, "stats", k)
        later(rng.uniform(0, 30), run, "step")
    for at, run, kind in faults:
        later(at, run, kind)
    periods = {run: rng.uniform(30, 120) for run in runs}
    while todo:
        at, _, run, what, k = heapq.heappop(todo)
        if at >= seconds:
            continue
        if what == "beat":
            if (run, k) not in silent:
                last_beat[(run, k)] = at
                yield event(at, run, "heartbeat", k)
                later(at + BEAT, run, "beat", k)
        elif what == "stats":
            yield event(at, run, "inference.stats", k, server=f"vllm-{k - 10}", running=8,
                        waiting=0, kv_cache_usage=0.4, gen_tokens_per_s=900.0)  # fmt: skip
            later(at + BEAT, run, "stats", k)
        elif what == "step":
            step[run] += 1
            p = periods[run]
            yield event(at, run, "step.started", 0, step=step[run])
            later(at + 0.1 * p, run, "start")
            later(at + 0.5 * p, run, "tool")
            later(at + 0.8 * p, run, "done")
            later(at + p, run, "step_done")
        elif what in ("start", "tool", "done"):
            for i in range(TRAJS):
                traj = f"s{step[run]}-t{i}"
                if what == "start":
                    yield event(at, run, "trajectory.started", 8, traj=traj, step=step[run])
                elif what == "tool":
                    yield event(at, run, "trajectory.phase", 8, traj=traj, phase="tool")
                else:
                    yield event(at, run, "trajectory.done", 8, traj=traj, status="ok",
                                reward=0.5)  # fmt: skip
        elif what == "step_done":
            s, p = step[run], periods[run]
            yield event(at, run, "step.done", 0, step=s, duration_s=p,
                        timing={"gen": 0.5 * p, "update_actor": 0.3 * p})  # fmt: skip
            yield event(at, run, "step.metrics", 0, step=s,
                        metrics={"actor/loss": 0.1, "reward": 0.5})  # fmt: skip
            yield event(at, run, "reward", 0, step=s, mean=0.5, count=TRAJS)
            later(at + 0.01, run, "step")
        elif what == "nan":
            yield event(at, run, "step.metrics", 0, step=step[run],
                        metrics={"actor/loss": float("nan")})._replace(fault="nan")  # fmt: skip
        elif what == "silent":
            silent.add((run, 8))
            yield Planned(at, run, None, src(run, 8), {}, "silent", last_beat.get((run, 8), at))
    for run in runs:  # a clean stop: every process says so
        for k in range(12):
            if (run, k) not in silent:
                yield event(seconds, run, "heartbeat", k, final=True)

"""A heartbeat-heavy trace: 60 small RL runs over four hours, as emitters write them.

The shape the outside measurement of issue 44 used: about half the events are heartbeats, a
sixth `inference.stats`, a quarter trajectory starts and ends, the rest step events. Each run
has a trainer and a vLLM server beating every 10 s, the server's queue scraped every 15 s,
and a training step every 90-150 s with six trajectories; runs start in the first half hour
and a few end early. Some runs carry one fault each, so the rules have something to say: a
server that stops beating, a reward stuck at zero, the server idle while a trajectory waits
in a sandbox, a NaN in the metrics.

Events are written as `Emitter` writes them (`{"v":1,"run":...,"src":...,"id":...,"ts":...`,
uuid4-hex ids, full-precision `time.time()` stamps), merged by ts as one partition carries
them. Deterministic for a seed.

    .venv/bin/python bench/heartbeat_trace.py [--out FILE]   # JSON Lines, for `runwatch replay`
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

import orjson

#: 2026-11-20 08:00:00 UTC
T0 = 1_795_680_000.0
HOURS = 4.0
RUNS = 60
BEAT = 10.0
SCRAPE = 15.0
TRAJS = 6
FAULTS = ("server_dies", "zero_reward", "sandbox_hang", "nan")


def _src(run: str, k: int, which: str) -> dict[str, Any]:
    if which == "trainer":
        return {"component": "trainer", "host": f"gpu-{k:03d}a", "pid": 31_000 + k, "rank": 0}
    return {"component": "inference", "host": f"gpu-{k:03d}b", "pid": 41_000 + k,
            "instance": f"vllm-{k}"}  # fmt: skip


class _Run:
    """One run's events, made in time order."""

    def __init__(self, k: int, rng: random.Random, end: float) -> None:
        self.k, self.rng = k, rng
        self.run = f"rl-{'grpo' if k % 3 else 'ppo'}-{k:03d}"
        self.start = T0 + rng.uniform(0, 1800)
        self.end = end if rng.random() > 0.1 else self.start + rng.uniform(1.5, 3.0) * 3600
        self.fault = FAULTS[k // 15 % len(FAULTS)] if k % 15 == 7 else None
        self.fault_at = self.start + rng.uniform(0.3, 0.7) * (self.end - self.start)
        self.heads = {
            who: f'{{"v":1,"run":{json.dumps(self.run)},"src":'
            f'{orjson.dumps(_src(self.run, k, who)).decode()},"id":"'
            for who in ("trainer", "inference")
        }

    def line(self, ts: float, who: str, kind: str, **fields: Any) -> tuple[float, bytes]:
        ident = "%032x" % ((self.rng.getrandbits(128) & ~(0xF << 76) & ~(0x3 << 62))
                           | (0x4 << 76) | (0x2 << 62))  # fmt: skip
        # step.metrics through json, which writes NaN as the contract's token (orjson: null)
        encoded = json.dumps(fields, separators=(",", ":")) if kind == "step.metrics" else (
            orjson.dumps(fields).decode())  # fmt: skip
        body = "" if not fields else "," + encoded[1:-1]
        return ts, f'{self.heads[who]}{ident}","ts":{ts!r},"kind":"{kind}"{body}}}'.encode()

    def events(self) -> Iterator[tuple[float, bytes]]:
        rng, start, end = self.rng, self.start, self.end
        out: list[tuple[float, bytes]] = []
        dead_at = self.fault_at if self.fault == "server_dies" else None
        out.append(self.line(start, "trainer", "run.started", labels={"team": "rl", "algo":
                   "grpo" if self.k % 3 else "ppo"}, total_steps=200))  # fmt: skip
        for who, every in (("trainer", BEAT), ("inference", BEAT)):
            t = start + rng.uniform(0, every)
            while t < end and (who == "trainer" or dead_at is None or t < dead_at):
                out.append(self.line(t + rng.uniform(0, 0.05), who, "heartbeat"))
                t += every
        t = start + rng.uniform(0, SCRAPE)
        while t < end and (dead_at is None or t < dead_at):
            idle = self.fault == "sandbox_hang" and t > self.fault_at
            running = 0 if idle else rng.randint(2, 48)
            out.append(self.line(t, "inference", "inference.stats", server=f"vllm-{self.k}",
                                 running=running, waiting=0 if idle else rng.randint(0, 8),
                                 kv_cache_usage=round(rng.uniform(0.05, 0.9), 4),
                                 gen_tokens_per_s=round(rng.uniform(400, 2400), 1)))  # fmt: skip
            t += SCRAPE
        t, step = start + rng.uniform(5, 60), 0
        period = rng.uniform(90, 150)
        while t + period < end:
            step += 1
            out.append(self.line(t, "trainer", "step.started", step=step))
            hang = self.fault == "sandbox_hang" and t > self.fault_at
            for i in range(TRAJS):
                traj = f"s{step}-{i}-{rng.getrandbits(32):08x}"
                began = t + 1 + i * 0.2
                out.append(self.line(began, "trainer", "trajectory.started", traj=traj,
                                     step=step))  # fmt: skip
                if hang and i == TRAJS - 1:
                    continue  # waits in a sandbox for good
                reward = round(rng.uniform(0.1, 0.9), 4)
                out.append(self.line(began + rng.uniform(0.4, 0.8) * period, "trainer",
                                     "trajectory.done", traj=traj, status="ok",
                                     reward=reward))  # fmt: skip
            if hang:
                break  # the step never ends
            done = t + period
            zero = self.fault == "zero_reward" and t > self.fault_at
            mean = 0.0 if zero else round(rng.uniform(0.2, 0.8), 4)
            loss = float("nan") if self.fault == "nan" and abs(t - self.fault_at) < period else 0.1
            out.append(self.line(done, "trainer", "step.done", step=step,
                                 duration_s=round(period, 3)))  # fmt: skip
            metrics = {"actor/loss": loss, "actor/grad_norm": round(rng.uniform(0.2, 2), 4),
                       "critic/score/mean": mean}  # fmt: skip
            out.append(self.line(done + 0.01, "trainer", "step.metrics", step=step,
                                 metrics=metrics))  # fmt: skip
            out.append(self.line(done + 0.02, "trainer", "reward", step=step, mean=mean,
                                 count=TRAJS))  # fmt: skip
            t = done + 0.05
        if self.end < T0 + HOURS * 3600:
            out.append(self.line(self.end, "trainer", "run.finished", status="ok"))
        out.sort(key=lambda e: e[0])
        return iter(out)


def heartbeat_heavy(runs: int = RUNS, hours: float = HOURS, seed: int = 44) -> list[bytes]:
    """The trace's lines (JSON bytes), in ts order."""
    rng = random.Random(seed)
    end = T0 + hours * 3600
    per_run = [_Run(k, random.Random(rng.getrandbits(64)), end).events() for k in range(runs)]
    return [raw for _, raw in heapq.merge(*per_run, key=lambda e: e[0])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="-", help="JSON Lines file (default: standard output)")
    args = ap.parse_args()
    lines = heartbeat_heavy()
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
    with out:
        for raw in lines:
            out.write(raw + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Backtest of the training-dynamics rules' defaults on generated curves
(`runwatch.dev.dynamics`): how often they fire on healthy runs, and how soon they catch each
fault, replayed through the same engine as live (`Engine.apply`).

Healthy: `--runs` runs of `--steps` steps (different seeds). Faulty: the same, each fault
injected at a random step between 25% and 75% of the run. Figures only: nothing asserts.

    .venv/bin/python bench/dynamics.py [--runs 50] [--steps 2000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import orjson
from benchinfo import machine

from runwatch.dev import histories
from runwatch.dev.dynamics import FAULTS, curves, events
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine

T0, EVERY = 1_800_000_000.0, 30.0  # runwatch.dev.dynamics.events' defaults: step i at T0 + 30 i


def replay_events(run_events: list[dict]) -> list:
    engine = Engine()
    out = []
    for e in run_events:
        out += engine.apply(decode(orjson.dumps(e)))
    return out


def replay(run: str, metrics: list[dict[str, float]]) -> list:
    return replay_events(events(run, metrics))


def event_rules(runs: int, steps: int) -> None:
    """weight_sync_stalled, restart_loop and degenerate_groups on generated histories."""
    rules = sorted(set(histories.FAULTS.values()))
    false = dict.fromkeys(rules, 0)
    for seed in range(runs):
        for alert in replay_events(histories.history(f"h-{seed}", seed, steps)):
            if alert.rule in false and alert.firing:
                false[alert.rule] += 1
    total = runs * steps
    print(f"healthy histories: {runs} runs x {steps} steps of 5 min ({total:,} steps)")
    for rule in rules:
        print(f"  {rule:24s} {false[rule]} firings = {false[rule] / total * 1000:.3f} per "
              "1,000 healthy steps")  # fmt: skip
    rng = random.Random(2)
    for fault, rule in histories.FAULTS.items():
        delays, missed = [], 0
        for seed in range(runs):
            at = rng.randint(steps // 4, 3 * steps // 4)
            h = histories.history(f"{fault}-{seed}", 500 + seed, steps, fault, at)
            start = histories.T0 + histories.STEP_S * at
            fired = [a for a in replay_events(h) if a.rule == rule and a.firing and a.ts >= start]
            if fired:
                delays.append((fired[0].ts - start) / histories.STEP_S)
            else:
                missed += 1
        delay = f"median delay {statistics.median(delays):.1f} steps" if delays else "never"
        print(f"  {fault:18s} -> {rule:22s} caught {runs - missed}/{runs}, {delay}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--histories", type=int, default=20,
                   help="event histories (200 steps each) for the event-based rules")  # fmt: skip
    args = p.parse_args()
    print(machine())
    rules = sorted(set(FAULTS.values()))
    started = time.perf_counter()
    false: dict[str, int] = dict.fromkeys(rules, 0)
    for seed in range(args.runs):
        for alert in replay(f"healthy-{seed}", curves(seed, args.steps)):
            if alert.rule in false and alert.firing:
                false[alert.rule] += 1
    steps = args.runs * args.steps
    print(f"healthy: {args.runs} runs x {args.steps} steps ({steps:,} steps)")
    for rule in rules:
        print(f"  {rule:24s} {false[rule]} firings = {false[rule] / steps * 1000:.3f} per "
              "1,000 healthy steps")  # fmt: skip
    rng = random.Random(1)
    print(f"faulty: {args.runs} runs per fault, injected at a random step in the middle half")
    for fault, rule in FAULTS.items():
        delays, missed = [], 0
        for seed in range(args.runs):
            at = rng.randint(args.steps // 4, 3 * args.steps // 4)
            alerts = replay(f"{fault}-{seed}", curves(1000 + seed, args.steps, fault, at))
            start = T0 + EVERY * at
            fired = [a for a in alerts if a.rule == rule and a.firing and a.ts >= start]
            if fired:
                delays.append((fired[0].ts - T0) / EVERY - at)
            else:
                missed += 1
        caught = args.runs - missed
        delay = f"median delay {statistics.median(delays):.0f} steps" if delays else "never"
        print(f"  {fault:18s} -> {rule:22s} caught {caught}/{args.runs}, {delay}")
    event_rules(args.histories, 200)
    print(f"({time.perf_counter() - started:.0f}s)")


if __name__ == "__main__":
    main()

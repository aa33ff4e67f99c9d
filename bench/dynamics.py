"""Backtest of the training-dynamics rules' defaults on generated curves
(`runwatch.dev.dynamics`): how often they fire on healthy runs, and how soon they catch each
fault, replayed through the same engine as live (`Engine.apply`).

Healthy: `--runs` runs of `--steps` steps (different seeds). Faulty: the same, each fault
injected at a random step between 25% and 75% of the run. Figures only: nothing asserts.

Real runs (`--trl N`): N healthy TRL GRPO runs of `examples/trl_grpo.py` on the CPU
(a tiny random-weight model; `scripts/trl_env.sh` builds the venv) and two with a broken
reward, recorded by the callback and replayed the same way.

    .venv/bin/python bench/dynamics.py [--runs 50] [--steps 2000] [--trl 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchinfo import SAID, machine, say, write_section

from harness import histories
from runwatch.dev.dynamics import FAULTS, curves, events
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine

T0, EVERY = 1_800_000_000.0, 30.0  # runwatch.dev.dynamics.events' defaults: step i at T0 + 30 i


def lead(delays: list[float]) -> str:
    """Steps from a fault's onset to its alert: the median and the worst."""
    if not delays:
        return "never"
    return f"lead time median {statistics.median(delays):.1f}, worst {max(delays):.1f} steps"


def replay_events(run_events: list[dict]) -> list:
    engine = Engine()
    out = []
    for e in run_events:  # json, not orjson: it writes NaN as null, and NaN is the point
        out += engine.apply(decode(json.dumps(e).encode()))
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
    say(f"healthy histories: {runs} runs x {steps} steps of 5 min ({total:,} steps)")
    for rule in rules:
        say(f"  {rule:24s} {false[rule]} firings = {false[rule] / total * 1000:.3f} per "
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
        say(f"  {fault:18s} -> {rule:22s} caught {runs - missed}/{runs}, {lead(delays)}")


ROOT = Path(__file__).resolve().parents[1]
TRL_FAULTS = {"zero": "zero_reward", "nan": "non_finite_metric"}


def trl_run(name: str, steps: int, *args: str) -> list[dict]:
    """One real GRPO run's events, as the callback wrote them to a spool directory."""
    with tempfile.TemporaryDirectory(prefix="runwatch-bench-trl-") as tmp:
        spool = Path(tmp)
        cmd = [str(ROOT / ".cache/trl-env/bin/python"), str(ROOT / "examples/trl_grpo.py"),
               "--model", str(ROOT / ".cache/tiny-llama"), "--steps", str(steps),
               "--out", str(spool / "out"), *args]  # fmt: skip
        env = {**os.environ, "RUNWATCH_RUN": name, "RUNWATCH_SPOOL": str(spool / "events")}
        subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=1800)
        out = [json.loads(line) for p in sorted((spool / "events").rglob("*.jsonl"))
               for line in p.read_bytes().splitlines()]  # fmt: skip
    return sorted(out, key=lambda e: e["ts"])


def trl_runs(runs: int, steps: int = 150) -> None:
    """Every rule on real TRL runs: firings per 1,000 healthy steps, and two faults."""
    if not (ROOT / ".cache/trl-env/.complete").exists():
        say("real TRL runs: no .cache/trl-env (scripts/trl_env.sh builds it)")
        return
    fired: dict[str, int] = {}
    for seed in range(runs):
        for alert in replay_events(trl_run(f"trl-{seed}", steps, "--seed", str(seed))):
            if alert.firing:
                fired[alert.rule] = fired.get(alert.rule, 0) + 1
    total = runs * steps
    say(f"real TRL GRPO runs (trl 1.16, CPU, random-weight model): {runs} x {steps} steps")
    for rule, count in sorted(fired.items()) or [("(none)", 0)]:
        say(f"  {rule:24s} {count} firings = {count / total * 1000:.3f} per 1,000 steps")
    at = steps // 2
    for fault, rule in TRL_FAULTS.items():
        run_events = trl_run(f"trl-{fault}", at + 30, "--fault", f"{fault}@{at}")
        first = next((a for a in replay_events(run_events) if a.rule == rule and a.firing), None)
        if first is None:
            say(f"  {fault}@{at:<14d} -> {rule:22s} never")
            continue
        done = sum(1 for e in run_events if e["kind"] == "step.done" and e["ts"] <= first.ts)
        say(f"  {fault}@{at:<14d} -> {rule:22s} caught, lead time {done - at + 1} steps")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--histories", type=int, default=20,
                   help="event histories (200 steps each) for the event-based rules")  # fmt: skip
    p.add_argument("--trl", type=int, default=0, metavar="N",
                   help="also N healthy real TRL GRPO runs, and two faulty ones")  # fmt: skip
    args = p.parse_args()
    say(machine())
    rules = sorted(set(FAULTS.values()))
    started = time.perf_counter()
    false: dict[str, int] = dict.fromkeys(rules, 0)
    for seed in range(args.runs):
        for alert in replay(f"healthy-{seed}", curves(seed, args.steps)):
            if alert.rule in false and alert.firing:
                false[alert.rule] += 1
    steps = args.runs * args.steps
    say(f"healthy: {args.runs} runs x {args.steps} steps ({steps:,} steps)")
    for rule in rules:
        say(f"  {rule:24s} {false[rule]} firings = {false[rule] / steps * 1000:.3f} per "
              "1,000 healthy steps")  # fmt: skip
    rng = random.Random(1)
    say(f"faulty: {args.runs} runs per fault, injected at a random step in the middle half")
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
        say(f"  {fault:18s} -> {rule:22s} caught {caught}/{args.runs}, {lead(delays)}")
    event_rules(args.histories, 200)
    if args.trl:
        trl_runs(args.trl)
    say(f"({time.perf_counter() - started:.0f}s)")

    write_section(
        "dynamics",
        [
            "## Training-dynamics and event rules backtested (`bench/dynamics.py`)",
            "",
            "```",
            *SAID,
            "```",
        ],
    )


if __name__ == "__main__":
    main()

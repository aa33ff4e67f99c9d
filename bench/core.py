"""The pure core alone: `Engine.apply` over the fleet's events decoded beforehand, at a
worker partition's size, and where an event's time goes by kind.

`--runs` runs of the fleet's shape (`bench/fleet_shape.py`) for `--seconds`, the final
beats left out (a clean stop, not the steady state); the first third of the events warms
the runs up, the rest is timed (CPU time), best of `--repeat` passes, the garbage collector
tuned as `runwatch worker` runs it. In the same run: every rule against the contract's seven,
and the 100,000-id duplicate ring a worker keeps against a 1,000-id one (what the ring's
misses cost). Then, with every rule, each kind's share of the events and of the time (a
clock read around each event: its own cost is subtracted, its cache effects are not).
Figures only: nothing asserts a timing.

    .venv/bin/python bench/core.py [--runs 1250] [--seconds 120] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import Counter
from typing import Any

from benchinfo import machine, say
from replay import ONLY_SEVEN, fleet_trace

from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine

RING = 100_000  # a worker's duplicate-id ring per partition (`stream/live.py`)


def timed(events: list[Any], config: RulesConfig, ring: int, repeat: int) -> float:
    """Best CPU seconds per timed event of `repeat` passes, each on a fresh engine."""
    third = len(events) // 3
    best = float("inf")
    for _ in range(repeat):
        engine = Engine(config, dedup_capacity=ring)
        for event in events[:third]:
            engine.apply(event)
        gc.collect()
        start = time.process_time()
        for event in events[third:]:
            engine.apply(event)
        best = min(best, time.process_time() - start)
    return best / (len(events) - third)


def by_kind(events: list[Any]) -> tuple[Counter[str], Counter[str]]:
    """(events, nanoseconds) per kind over the timed part, every rule."""
    third = len(events) // 3
    engine = Engine(dedup_capacity=RING)
    for event in events[:third]:
        engine.apply(event)
    clock = time.perf_counter_ns
    own = min(-(clock() - clock()) for _ in range(1000))  # a read's own cost
    count: Counter[str] = Counter()
    spent: Counter[str] = Counter()
    for event in events[third:]:
        start = clock()
        engine.apply(event)
        spent[event.kind] += clock() - start - own
        count[event.kind] += 1
    return count, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1250)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    say(machine())
    events = [decode(line) for line in fleet_trace(args.runs, args.seconds)]
    events = [e for e in events if not (e.kind == "heartbeat" and e.final)]
    say(f"{args.runs:,} runs of the fleet's shape for {args.seconds:.0f} s: {len(events):,} "
        f"events, the last two thirds timed; CPU time, best of {args.repeat}")  # fmt: skip
    with tuned_for_consuming():
        every = timed(events, RulesConfig.default(), RING, args.repeat)
        seven = timed(events, ONLY_SEVEN, RING, args.repeat)
        small = timed(events, RulesConfig.default(), 1_000, args.repeat)
        say(f"  every rule, {RING:,}-id ring      {every * 1e6:6.2f} µs an event")
        say(f"  the seven rules, the same ring     {seven * 1e6:6.2f} µs an event")
        say(f"  every rule, a 1,000-id ring        {small * 1e6:6.2f} µs an event "
            f"(the ring's misses: {(every - small) * 1e6:+.2f} µs)")  # fmt: skip
        count, spent = by_kind(events)
    n, total = sum(count.values()), sum(spent.values())
    say(f"  by kind (every rule, a clock read around each event): {total / n:,.0f} ns an event")
    for kind, ns in spent.most_common():
        say(f"    {kind:<20} {count[kind] / n:6.1%} of events {ns / count[kind]:7,.0f} ns each "
            f"{ns / total:6.1%} of the time")  # fmt: skip


if __name__ == "__main__":
    main()

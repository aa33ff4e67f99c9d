"""Worker memory per live run (issue 30): the fleet's run shape (`bench/fleet_shape.py`)
applied to one engine in simulated time until every run holds its steady state (the steps
the rules keep: 53 with the defaults), then each run's state measured part by part.

Beside the run state, the worker keeps each emitting host's clock samples (`ClockOffsets`;
five hosts per run here, each record arriving 2-50 ms after its stamp at the broker's
millisecond), measured the same way (until 2026-11-27 they were a list per second of arrival:
15.7 KiB per run, bench/RESULTS.md). What a worker holds beyond this: the
duplicate-id ring of each partition it owns (the last `DEFAULT_DEDUP` event ids, filled by
events, not runs), measured here per id, and the process itself (Python, faust, the Kafka
clients: `bench/fleet.py` reports RSS). Sizes are
`sys.getsizeof` summed over each part's objects, counting an object shared by several
parts once; they do not depend on the machine's speed. Beside them, what the allocator
holds (Linux, each in a process of its own, glibc as `runwatch worker` sets it): a full
ring's RSS per id, and a `LiveDriver`'s RSS grown per run fed `--live-runs` runs for 180 s
(as a fleet play holds them: few steps each), with a 1-id ring and with its own.

    .venv/bin/python bench/memory.py [--runs 100] [--seconds 7200] [--live-runs 625] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import random
import subprocess
import sys
import time
import types
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from benchinfo import SAID, machine, say, write_section
from fleet_shape import schedule, wire

from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine
from runwatch.stream.live import DEFAULT_DEDUP, _source
from runwatch.stream.timekeeping.skew import ClockOffsets

T0 = 1.78e9
_SHARED = (type, types.ModuleType, types.FunctionType)


def deep_size(obj: object, seen: set[int]) -> int:
    """Bytes of `obj` and everything it reaches that `seen` does not hold yet."""
    size, stack = 0, [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _SHARED):
            continue
        seen.add(id(o))
        size += sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return size


def fill(n: int, seconds: float, dedup: int) -> tuple[Engine, ClockOffsets, int]:
    """An engine holding `n` runs after `seconds` of the fleet's events, and the hosts'
    clock samples of the same events."""
    engine = Engine(dedup_capacity=dedup)
    clocks = ClockOffsets()
    runs = [f"fleet-{i:05d}" for i in range(n)]
    rng = random.Random(2)
    count = 0
    for p in schedule(runs, seconds, seed=1):
        if p.kind is None or p.at >= seconds:
            continue  # no final beats: the runs stay live
        event = decode(wire(p, T0 + p.at, uuid.uuid4().hex))
        engine.apply(event)
        arrival = round(event.ts + rng.uniform(0.002, 0.05), 3)
        clocks.observe(_source(event.src), event.ts, arrival)
        count += 1
    return engine, clocks, count


def attributes(obj: object) -> Iterator[tuple[str, object]]:
    """An object's attributes, slotted (every class of its MRO) or in its `__dict__`."""
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                yield name, getattr(obj, name)
    yield from getattr(obj, "__dict__", {}).items()


def per_run(engine: Engine) -> Counter[str]:
    """Bytes per part of the run state, summed over the engine's runs."""
    parts: Counter[str] = Counter()
    seen: set[int] = {id(engine.config)}
    for tracked in engine.runs.values():
        for name, part in attributes(tracked.state):
            parts[name] += deep_size(part, seen)
        for name, part in attributes(tracked):
            if name != "state":
                parts[f"engine: {name}"] += deep_size(part, seen)
    return parts


def ring_bytes_per_id(ids: int) -> float:
    """What one id costs in a full duplicate-id window (native: its digest in the table and
    the ring; in Python: its string, set slot and deque slot)."""
    gc.collect()
    engine = Engine(dedup_capacity=ids)
    for _ in range(ids):
        engine.seen.add(uuid.uuid4().hex)
    return deep_size(engine.seen, set()) / ids


_RING_RSS = """
import os, sys
from runwatch.stream.collector import large_blocks_returned
from runwatch.stream.tracked import id_window
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
large_blocks_returned()  # as `runwatch worker` runs
capacity = int(sys.argv[1])
before = rss()
ring = id_window(capacity)  # (the native window where built, as the engine takes it)
for _ in range(10 * capacity):
    ring.add(os.urandom(16).hex())
print((rss() - before) * 1024 / capacity)
"""


_LIVE_RSS = """
import gc, sys, uuid
sys.path.insert(0, sys.argv[1])
from fleet_shape import schedule, wire
from runwatch.stream.collector import large_blocks_returned
from runwatch.stream.live import LiveDriver
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
runs, seconds, ring = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
large_blocks_returned()  # as `runwatch worker` runs
names = [f"fleet-{i:05d}" for i in range(runs)]
records = [(wire(p, 1.78e9 + p.at, uuid.uuid4().hex), 1.78e9 + p.at + 0.02, i)
           for i, p in enumerate(schedule(names, seconds, seed=1))
           if p.kind is not None and p.at < seconds]
driver = LiveDriver(topic="events", partition=0, dedup_capacity=ring)
gc.collect()
before = rss()
for at in range(0, len(records), 50):
    batch = records[at : at + 50]
    driver.tick(batch[-1][1])
    driver.feed(batch)
gc.collect()
print((rss() - before) / runs)
"""


def live_rss_per_run(runs: int, seconds: float, ring: int) -> float | None:
    """KiB of RSS a `LiveDriver` grows per run fed `runs` runs of the fleet's shape for
    `seconds`, as a fleet play feeds a partition (records of 50 events, ticked), with a
    `ring`-id duplicate ring, in a process of its own (Linux: None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", _LIVE_RSS, here, str(runs), str(seconds),
                          str(ring)], capture_output=True, text=True, check=True)  # fmt: skip
    return float(out.stdout)


def ring_rss_per_id(ids: int) -> float | None:
    """What one id of a full ring costs resident, after ten times its ids went through it,
    in a process of its own (Linux: None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    out = subprocess.run([sys.executable, "-c", _RING_RSS, str(ids)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return float(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=7200.0,
                    help="simulated seconds (7200: every run has its 53 steps)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="30 runs, 1,200 s")
    ap.add_argument("--live-runs", type=int, default=625,
                    help="runs a LiveDriver is fed for 180 s, RSS measured (0: none)")  # fmt: skip
    args = ap.parse_args()
    if args.quick:
        args.runs, args.seconds = 30, 1200.0
    say(machine())
    began = time.perf_counter()
    engine, clocks, count = fill(args.runs, args.seconds, dedup=1000)
    parts = per_run(engine)
    parts["clock samples (5 hosts)"] = deep_size(clocks, set())
    total = sum(parts.values()) / args.runs / 1024
    say(f"memory per live run: {args.runs} runs of the fleet's shape, {args.seconds:.0f} s "
        f"simulated ({count:,} events, {time.perf_counter() - began:.0f} s to apply)")  # fmt: skip
    say(f"  run state: {total:.1f} KiB per live run (goal: 50 KiB with everything)")
    for name, size in parts.most_common(9):
        say(f"    {name:<24} {size / args.runs / 1024:6.1f} KiB")
    per_id = ring_bytes_per_id(20_000 if args.quick else 100_000)
    say(f"  duplicate-id ring: {per_id:.0f} bytes per id; {DEFAULT_DEDUP:,} ids per partition "
        f"= {per_id * DEFAULT_DEDUP / 2**20:.1f} MiB, whatever the number of runs")  # fmt: skip
    ids = 20_000 if args.quick else DEFAULT_DEDUP
    resident = ring_rss_per_id(ids)
    if resident is not None:
        say(f"    resident (RSS of a ring of {ids:,} through which ten times as many ids went, "
            f"glibc as the worker sets it): {resident:.0f} bytes per id")  # fmt: skip
    for runs_per_partition in (250, 1250, 2500):
        ring = per_id * DEFAULT_DEDUP / runs_per_partition / 1024
        held = None if resident is None else resident * DEFAULT_DEDUP / runs_per_partition / 1024
        rss = "" if held is None else f" (resident: +{held:.1f})"
        say(f"    with {runs_per_partition:,} live runs per partition: +{ring:.1f} KiB per run "
            f"= {total + ring:.1f} KiB{rss}")  # fmt: skip
    if args.live_runs and not args.quick:
        bare = live_rss_per_run(args.live_runs, 180.0, 1)
        whole = live_rss_per_run(args.live_runs, 180.0, DEFAULT_DEDUP)
        if bare is not None and whole is not None:
            say(f"  a LiveDriver fed {args.live_runs:,} runs of the fleet's shape for 180 s (as "
                f"a fleet play's runs are), RSS grown per run: {bare:.1f} KiB with a 1-id ring, "
                f"{whole:.1f} with its {DEFAULT_DEDUP:,}-id one")  # fmt: skip
    if not args.quick:
        write_section("memory", ["## Worker memory per live run (`bench/memory.py`)", "",
                                 "```", *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

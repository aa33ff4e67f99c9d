"""The worker's per-record path in process, on the fleet's run shape, and what the hosts'
clock offsets cost in it.

A live worker spends its CPU per record on: decoding, the host's clock-offset estimate
(`ClockOffsets`), the run's state and its rules (`LiveDriver.feed`). This bench feeds one
partition's records -- the fleet's run shape (`bench/fleet_shape.py`: five hosts and twelve
processes per run), each record arriving 2-50 ms after its time stamp at the broker's
millisecond -- through `LiveDriver.feed` in batches of 1,000 with a tick between, as the
worker does, and reports CPU µs per record over the schedule's second and third thirds
(the first warms the runs up). No broker: what is measured is the per-record path only.

Two ways, alternating, best of `--repeat`, for each number of runs per partition:

  per-second lists   the clock-offset estimate as it was: per host, a deque holding a
                     [second, smallest, second smallest] list per second of arrival (the
                     obvious layout; kept here as the baseline)
  flat array         runwatch's: per host, one array of doubles with the same three values
                     per second, contiguous

The estimate alone is timed the same way (`observe` over the same records), since that is
the part that differs. A fleet of 10,000 runs on two workers holds 25,000 hosts per worker,
each touched about once a second: the estimate is memory-bound, and the layout decides how
many cache lines a record touches. Figures only: nothing here asserts a timing.

    .venv/bin/python bench/live_path.py [--quick] [--runs 250 1250 2500] [--seconds 240]
        [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from benchinfo import SAID, machine, say, write_section
from fleet_shape import schedule, wire

from runwatch.stream.decode import decode
from runwatch.stream.live import LiveDriver, _source
from runwatch.stream.timekeeping.skew import ClockOffsets

T0 = 1_800_000_000.0
BATCH = 1000
Record = tuple[bytes, float, int]


class _ListsHost:
    """A host's samples as `ClockOffsets` kept them until 2026-11-27, verbatim."""

    __slots__ = ("buckets", "last", "low1", "low2", "streak_start")

    def __init__(self, arrival: float) -> None:
        # [second of arrival, smallest sample, second smallest sample], oldest first
        self.buckets: deque[list[float]] = deque()
        self.streak_start = arrival
        self.last = arrival
        self.low1 = self.low2 = math.inf

    def add(self, sample: float, second: float) -> None:
        buckets = self.buckets
        if not buckets or second > buckets[-1][0]:
            buckets.append([second, sample, math.inf])
        else:
            b = buckets[-1]
            if sample < b[1]:
                b[1], b[2] = sample, b[1]
            elif sample < b[2]:
                b[2] = sample
        if sample < self.low2:
            if sample < self.low1:
                self.low1, self.low2 = sample, self.low1
            else:
                self.low2 = sample

    def forget_before(self, horizon: float) -> None:
        buckets = self.buckets
        low2 = self.low2
        lost = False
        while len(buckets) > 1 and buckets[0][0] < horizon:
            lost = buckets.popleft()[1] <= low2 or lost
        if lost:
            low1 = low2 = math.inf
            for _, a, b in buckets:
                if a < low2:
                    if a < low1:
                        low1, low2 = a, (low1 if low1 < b else b)
                    else:
                        low2 = a
            self.low1, self.low2 = low1, low2


class PerSecondLists(ClockOffsets):
    """The baseline: the same estimate, a deque of per-second lists per host (the
    `observe` of that time, verbatim, with its calls)."""

    def observe(self, host: object, ts: float, arrival: float) -> float:
        hosts: dict[object, Any] = self._hosts
        state: Any = hosts.get(host)
        if state is None:
            state = hosts[host] = _ListsHost(arrival)
        elif arrival - state.last > self.gap:
            state.streak_start = arrival
        if arrival > state.last:
            state.last = arrival
        state.add(arrival - ts, math.floor(arrival))
        if arrival - state.streak_start >= self.window:
            state.forget_before(arrival - self.window)
        return self._estimate(state)


def records(runs: int, seconds: float) -> list[Record]:
    rng = random.Random(2)
    out = []
    for i, p in enumerate(schedule([f"run-{k}" for k in range(runs)], seconds, seed=1)):
        ts = T0 + p.at
        if p.at < seconds:  # not the schedule's closing beats
            out.append((wire(p, ts, uuid.uuid4().hex), round(ts + rng.uniform(0.002, 0.05), 3), i))
    return out


def feed(driver: LiveDriver, recs: list[Record]) -> None:
    last_tick = -math.inf
    for i in range(0, len(recs), BATCH):
        batch = recs[i : i + BATCH]
        driver.feed(batch)
        now = batch[-1][1]
        if now - last_tick >= 0.1:
            driver.tick(now)
            last_tick = now


def live_path(recs: list[Record], make: Callable[[], object]) -> float:
    """CPU seconds per record over the last two thirds of `recs`, the first applied before."""
    third = len(recs) // 3
    driver = LiveDriver(clocks=make())  # type: ignore[arg-type]
    feed(driver, recs[:third])
    gc.collect()
    start = time.process_time()
    feed(driver, recs[third:])
    return (time.process_time() - start) / (len(recs) - third)


def estimate_only(recs: list[Record], make: Callable[[], object]) -> float:
    """CPU seconds per `observe`, over the same (host, ts, arrival) as the live path."""
    samples = [(_source(e.src), e.ts, arrival) for raw, arrival, _ in recs for e in [decode(raw)]]
    third = len(samples) // 3
    clocks = make()
    observe = clocks.observe  # type: ignore[attr-defined]
    for host, ts, arrival in samples[:third]:
        observe(host, ts, arrival)
    start = time.process_time()
    for host, ts, arrival in samples[third:]:
        observe(host, ts, arrival)
    return (time.process_time() - start) / (len(samples) - third)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[250, 1250, 2500],
                    help="runs per partition, one measurement each (250 1250 2500)")  # fmt: skip
    ap.add_argument("--seconds", type=float, default=240.0, help="schedule length (240)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, best kept (3)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--quick", action="store_true", help="250 runs, 120 s, once; print only")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.seconds, args.repeat, args.no_write = [250], 120.0, 1, True
    say(machine())
    ways: dict[str, Callable[[], object]] = {"per-second lists": PerSecondLists,
                                             "flat array": ClockOffsets}  # fmt: skip
    for runs in args.runs:
        recs = records(runs, args.seconds)
        say(f"{runs:,} runs in one partition ({5 * runs:,} hosts), {args.seconds:g} s of the "
            f"fleet's schedule: {len(recs):,} records, the last {len(recs) - len(recs) // 3:,} "
            "timed")  # fmt: skip
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.repeat):
            for name, make in ways.items():
                for what, measure in (("the estimate alone", estimate_only),
                                      ("the live path, per record", live_path)):  # fmt: skip
                    took = measure(recs, make)
                    key = (what, name)
                    best[key] = min(best.get(key, math.inf), took)
        for what in ("the estimate alone", "the live path, per record"):
            base = best[(what, "per-second lists")]
            for name in ways:
                t = best[(what, name)]
                say(f"  {what:<26} {name:<17} {t * 1e6:6.2f} µs  ({base / t:.2f}x)")
    if not args.no_write:
        write_section("live-path", ["## The worker's per-record path, and the hosts' clock "
                                    "offsets in it (`bench/live_path.py`)", "", "```",
                                    *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

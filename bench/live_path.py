"""The worker's per-record path in process, on the fleet's run shape: one event per record,
and the same events in batches as the emitters send them (contract section 8), and where an
event's CPU goes.

A live worker spends its CPU per record on: parsing the fetched records (aiokafka: the
producer batches' CRCs, their decompression, a ConsumerRecord each), splitting a record into
its events and decoding them, the host's clock-offset estimate (`ClockOffsets`), the run's
state and its rules (`LiveDriver.feed_records`, what the worker calls), before the fetch
itself and publishing. This bench builds one partition's fetches as the broker would hand
them out -- the fleet's run shape (`bench/fleet_shape.py`: five hosts and twelve processes
per run), every emitter process's sends (what its sender takes each 50 ms linger) as one
producer batch, each send reaching the broker 2-50 ms after its events' stamps -- parses
them with aiokafka's own record classes and feeds them to `LiveDriver.feed_records`, ticked
every `tick_s` of the records' time as the worker ticks it, and reports CPU µs per record
and per event over the schedule's second and third thirds (the first warms the runs up). No
broker, no network.

Three ways, alternating, best of `--repeat`, for each number of runs per partition:

  one per record   every event its own Kafka record, a send's records in one gzip producer
                   batch (what the emitters sent before batches)
  batched          a send's events in one record, JSON Lines under the batch header (the 32
                   trajectories a rollout worker starts at once travel together, each
                   process's heartbeat alone), gzip as before
  batched, plain   the same, uncompressed

Then the parts of an event's cost (batched, plain: what the emitters send now), each timed
alone over the same events: parsing the fetches, decoding, the duplicate-id look-up, the
metrics' count by kind, the clock-offset estimate, the engine's apply (the run state and the
ids, every rule off) and its rules (all of them, less that); what is left is the driver's
own per-event work (time checks, the read clock, serializing alerts, the clock's shift past
its estimate) and the split. Beside the driver, what the worker does with each batch and
tick: the fleet feed (its records made and encoded) and the metrics' batch call. Publishing
(`bench/transactions.py`) and checkpoints (`bench/checkpoint.py`) are measured there. The
garbage collector is tuned as `runwatch worker` runs it (`stream/collector.py`). Figures
only: nothing asserts a timing.

    .venv/bin/python bench/live_path.py [--quick] [--runs 250 1250] [--seconds 240]
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
from typing import Any

from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition
from benchinfo import SAID, machine, say, write_section
from fleet_shape import schedule, wire

from runwatch.emitters.topics import BATCH_HEADER
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.feed import FleetFeed
from runwatch.stream.fleet.wire import encode
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.live import LiveDriver, _source
from runwatch.stream.metrics.exporter import Limits
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.rules import BUILTIN_RULES
from runwatch.stream.timekeeping.skew import ClockOffsets
from runwatch.stream.tracked import KindCounts, RecentIds

T0 = 1_800_000_000.0
FETCH = 1000
#: the worker ticks its drivers this often (`WorkerSettings.tick_s`), here on the records' time
TICK_S = WorkerSettings.tick_s
#: an emitter's sender takes what gathered every this many seconds (`Sender.linger`)
LINGER = 0.05
#: aiokafka's codes for no compression and gzip (what the emitters' producer used)
NONE, GZIP = 0, 1
TP = TopicPartition("runwatch.events", 0)


def events(runs: int, seconds: float) -> list[tuple[bytes, float, tuple[str, str]]]:
    """The partition's events in schedule order: (value, broker time, (run, process))."""
    rng, ids = random.Random(2), random.Random(3)  # (ids seeded: the same run after run)
    out = []
    for p in schedule([f"run-{k}" for k in range(runs)], seconds, seed=1):
        ts = T0 + p.at
        if p.kind is not None and p.at < seconds:  # not the schedule's closing beats
            arrival = round(ts + rng.uniform(0.002, 0.05), 3)
            event_id = uuid.UUID(int=ids.getrandbits(128), version=4).hex
            out.append((wire(p, ts, event_id), arrival, (p.run, str(p.src))))
    return out


def sends(evs: list[tuple[bytes, float, Any]]) -> list[list[tuple[bytes, float]]]:
    """What the emitters' senders send: each process's events of one `LINGER` window, in the
    order they reach the broker (a window's last event's arrival)."""
    windows: dict[tuple[Any, int], list[tuple[bytes, float]]] = {}
    for raw, arrival, process in evs:
        windows.setdefault((process, math.floor(arrival / LINGER)), []).append((raw, arrival))
    return sorted(windows.values(), key=lambda g: g[-1][1])


Fetch = tuple[bytes, int, int]  # (buffer, records, events)


def fetches(
    groups: list[list[tuple[bytes, float]]], batched: bool, codec: int = GZIP
) -> list[Fetch]:
    """The partition as a consumer fetches it: each send one producer batch (as the
    emitter's kafka-python producer makes it, compressed with `codec`) of a record per
    event, or with `batched` of one record holding them all (JSON Lines under the batch
    header; a lone event plain); FETCH sends per fetch."""
    out: list[Fetch] = []
    offset, chunk, count, events_in = 0, [], 0, 0
    for group in groups:
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
        stamp = int(group[-1][1] * 1000)
        if batched and len(group) > 1:
            value = b"\n".join(raw for raw, _ in group)
            builder.append(0, stamp, b"k", value, [BATCH_HEADER])
        else:
            for i, (raw, _) in enumerate(group):
                builder.append(i, stamp, b"k", raw, [])
        made = bytearray(builder.build())
        made[0:8] = offset.to_bytes(8, "big")  # the base offset the broker gives it
        n = 1 if batched and len(group) > 1 else len(group)
        offset, count, events_in = offset + n, count + n, events_in + len(group)
        chunk.append(bytes(made))
        if len(chunk) == FETCH:
            out.append((b"".join(chunk), count, events_in))
            chunk, count, events_in = [], 0, 0
    if chunk:
        out.append((b"".join(chunk), count, events_in))
    return out


def parse(buffer: bytes, start: int) -> list[Any]:
    """aiokafka's records of one fetch, as its consumer makes them (CRCs checked)."""
    return list(PartitionRecords(TP, MemoryRecords(buffer), [], start, None, None, True, 0))


def live_path(fetched: list[Fetch]) -> tuple[float, float, int, int, float, float, float]:
    """CPU seconds per event over the last two thirds of the fetches (the first applied
    before), parsing and feeding, and parsing alone; the records and events timed; and per
    event, what the worker does beside the driver with each batch and tick: the fleet feed
    (`FleetFeed.records`, and encoding them as the publisher does) and the metrics
    (`WorkerMetrics.batch`)."""
    third = len(fetched) // 3
    driver = LiveDriver(arrival_gaps=True)
    driver.engine.views_changed = set()
    feed = FleetFeed(0)
    metrics = WorkerMetrics(lambda: [driver], 0, limits=Limits())
    metrics.live(driver)  # its events counted by kind, as the worker's are
    start, last_tick = 0, -math.inf
    beside = [0.0, 0.0]  # CPU seconds: the fleet feed, the metrics
    ticking = [0.0]  # CPU seconds in the driver's ticks (part of the driver's)

    def take(chunk: list[Fetch]) -> None:
        nonlocal start, last_tick
        clock = time.process_time
        for buffer, count, _ in chunk:
            records = parse(buffer, start)
            start += count
            alerts, dead = driver.feed_records(records)
            t0 = clock()
            metrics.batch(records[-1].timestamp / 1000.0, len(dead))
            t1 = clock()
            for record in feed.records(alerts, driver.engine):
                encode(record)
            beside[0] += clock() - t1
            beside[1] += t1 - t0
            now = records[-1].timestamp / 1000.0
            if now - last_tick >= TICK_S:
                t0 = clock()
                out = driver.tick(now)
                ticking[0] += clock() - t0
                t0 = clock()
                for record in feed.records(out, driver.engine):
                    encode(record)
                beside[0] += clock() - t0
                last_tick = now

    take(fetched[:third])
    beside[:] = [0.0, 0.0]
    ticking[0] = 0.0
    n_records = sum(count for _, count, _ in fetched[third:])
    n_events = sum(e for _, _, e in fetched[third:])
    gc.collect()
    t0 = time.process_time()
    take(fetched[third:])
    took = time.process_time() - t0 - sum(beside)
    at = sum(count for _, count, _ in fetched[:third])
    t0 = time.process_time()
    for buffer, count, _ in fetched[third:]:
        parse(buffer, at)
        at += count
    parsing = time.process_time() - t0
    return (took / n_events, parsing / n_events, n_records, n_events, beside[0] / n_events,
            beside[1] / n_events, ticking[0] / n_events)  # fmt: skip


def parts(evs: list[tuple[bytes, float, Any]]) -> dict[str, float]:
    """CPU seconds per event of each part alone, over the last two thirds of the events."""
    third = len(evs) // 3
    raws = [raw for raw, _, _ in evs]
    out: dict[str, float] = {}
    start = time.process_time()
    decoded = [decode(raw) for raw in raws[third:]]
    out["decode"] = (time.process_time() - start) / len(decoded)
    first = [decode(raw) for raw in raws[:third]]
    seen = RecentIds(100_000)
    for e in first:
        seen.add(e.id)
    start = time.process_time()
    for e in decoded:  # the driver's look-up before the estimate; the engine adds it
        if e.id in seen:
            pass
    out["duplicate-id check"] = (time.process_time() - start) / len(decoded)
    counts = KindCounts(64, "other")  # what the engine adds to for the exporter, inline
    start = time.process_time()
    for e in decoded:
        n = counts.get(e.kind)
        if n is None:
            counts.first(e.kind)
        else:
            counts[e.kind] = n + 1
    out["metrics (events by kind)"] = (time.process_time() - start) / len(decoded)
    samples = [(_source(e.src), e.ts, a) for e, (_, a, _) in zip(first + decoded, evs, strict=True)]
    clocks = ClockOffsets()
    shift, held = clocks.shifter(), clocks.held  # (as the driver calls them: one shifter)
    for host, ts, arrival in samples[:third]:
        shift(held(host, arrival), None, ts, arrival, -math.inf)
    start = time.process_time()
    for host, ts, arrival in samples[third:]:
        shift(held(host, arrival), None, ts, arrival, -math.inf)
    out["clock offset"] = (time.process_time() - start) / len(decoded)

    def engine_cost(config: RulesConfig | None) -> float:
        engine = Engine(config, dedup_capacity=100_000)
        for e, (_, arrival, _) in zip(first, evs[:third], strict=True):
            engine.apply(e, min(e.ts, arrival))
        gc.collect()
        start = time.process_time()
        for e, (_, arrival, _) in zip(decoded, evs[third:], strict=True):
            engine.apply(e, min(e.ts, arrival))
        return (time.process_time() - start) / len(decoded)

    whole = engine_cost(None)
    # the run state alone: every rule off (what the state keeps for them stays)
    off = RulesConfig.from_mapping({"rules": {r.id: {"enabled": False} for r in BUILTIN_RULES}})
    out["engine: apply (state, ids)"] = engine_cost(off)
    out["engine: rules"] = whole - out["engine: apply (state, ids)"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[250, 1250],
                    help="runs per partition, one measurement each (250 1250)")  # fmt: skip
    ap.add_argument("--seconds", type=float, default=240.0, help="schedule length (240)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, best kept (3)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--quick", action="store_true", help="250 runs, 120 s, once; print only")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.seconds, args.repeat, args.no_write = [250], 120.0, 1, True
    say(machine())
    say(f"CPU time (process_time), best of {args.repeat} rounds, the ways alternating; the "
        "garbage collector tuned as `runwatch worker` runs it")  # fmt: skip
    with tuned_for_consuming():
        measure(args)
    if not args.no_write:
        write_section("live-path", ["## The worker's per-record path, one event per record and "
                                    "batched (`bench/live_path.py`)", "", "```", *SAID,
                                    "```"])  # fmt: skip
    return 0


def measure(args: argparse.Namespace) -> None:
    """Each number of runs: the three ways, then the parts."""
    for runs in args.runs:
        evs = events(runs, args.seconds)
        groups = sends(evs)
        ways = {"one per record": fetches(groups, False, GZIP),
                "batched": fetches(groups, True, GZIP),
                "batched, plain": fetches(groups, True, NONE)}  # fmt: skip
        say(f"{runs:,} runs in one partition ({5 * runs:,} hosts), {args.seconds:g} s of the "
            f"fleet's schedule: {len(evs):,} events in {len(groups):,} sends, the last two "
            "thirds timed")  # fmt: skip
        best: dict[str, tuple[float, float, int, int, float, float, float]] = {}
        cost: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, fetched in ways.items():
                got = live_path(fetched)
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
            for part, t in parts(evs).items():
                cost[part] = min(cost.get(part, math.inf), t)
        for name, (per_event, parsing, n_records, n_events, *_) in best.items():
            say(
                f"  {name:<15} {n_events / n_records:5.2f} events a record: "
                f"{per_event * n_events / n_records * 1e6:6.2f} µs a record, "
                f"{per_event * 1e6:5.2f} µs an event ({parsing * 1e6:4.2f} of it parsing)"
            )
        single, per_event = best["one per record"][0], best["batched, plain"][0]
        say(f"  batched and plain against one per record: {single / per_event:.2f}x per event "
            f"(batched alone: {single / best['batched'][0]:.2f}x)")  # fmt: skip
        say("  an event's cost (batched, plain: what the emitters send now), part by part, "
            "each timed alone:")  # fmt: skip
        cost = {"fetch parsing (aiokafka)": best["batched, plain"][1], **cost,
                "ticks (the silence rules)": best["batched, plain"][6]}  # fmt: skip
        for part, t in cost.items():
            say(f"    {part:<28} {t * 1e6:5.2f} µs")
        rest = per_event - sum(cost.values())
        say(f"    {'the rest (driver, split)':<28} {rest * 1e6:5.2f} µs  (the whole less the "
            "parts)")  # fmt: skip
        fleet, metrics = best["batched, plain"][4:6]
        say(f"  beside the driver, per event: fleet feed {fleet * 1e6:.2f} µs, metrics "
            f"{metrics * 1e6:.2f} µs")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

"""How fast a takeover re-reads: fleet-shaped partitions on a local broker, re-read through
the worker's own takeover path into the rules, against `runwatch replay` of the same events in
the same run.

A worker that takes partitions over (a SIGKILL, a rebalance) restores their checkpoints and
re-reads the records after them before it judges them live (`stream/kafka/takeover.py`, as
`ownership.py` drives it: restore, fence the previous owner, read what the output topics
hold, re-read the events, publish what is missing, checkpoint). This bench writes
`--partitions` partitions of the fleet's run shape (`bench/fleet_shape.py`: `--runs` runs a
partition over `--seconds` of schedule, ending a few seconds before the takeover) as the
emitters write them -- each process's sends of one linger window one record, JSON Lines under
the batch header, uncompressed (contract section 8) -- with the records stamped with their
arrival (CreateTime on this bench's events topic: the worker's own is LogAppendTime, which
would stamp the whole schedule with the seconds it took to write it). Then, with nothing
else running, a fresh `StreamWorker` takes the partitions over from no checkpoint (the
longest re-read there is), and the bench prints the events per second its rebuild fed into
the rules (its own figure, `Rebuilt.seconds`: the output topics' read, the events' fetch,
decode, the gap logic, the rules), the whole takeover's wall time and this process's CPU,
and `runwatch replay`'s speed on the same events (`stream/replay.py`, per partition its
events as JSON Lines in partition order; its CPU time, all of it in process), and the
ratios. The garbage collector is tuned as `runwatch worker` and `runwatch replay` run it.
Figures only: nothing asserts a timing.

    .venv/bin/python bench/takeover.py [--runs 1250] [--partitions 2] [--seconds 240]
        [--repeat 2] [--profile FILE] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import random
import sys
import time
import uuid
from typing import NamedTuple

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from benchinfo import SAID, machine, say, write_section
from fleet_shape import schedule, wire
from live_path import sends

from runwatch.dev.broker import KafkaBroker
from runwatch.emitters.topics import BATCH_HEADER, Topics
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.engine import Engine
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.kafka.takeover import Rebuilt
from runwatch.stream.kafka.worker import StreamWorker
from runwatch.stream.replay import replay

Partition = list[tuple[bytes, float, tuple[str, str]]]  # (event, arrival, (run, process))


def partition_events(p: int, runs: int, seconds: float, t0: float) -> Partition:
    """One partition's events in arrival order, its runs named after it."""
    rng = random.Random(p)
    out = []
    for planned in schedule([f"p{p}-run-{k}" for k in range(runs)], seconds, seed=p + 1):
        ts = t0 + planned.at
        if planned.kind is not None and planned.at < seconds:
            arrival = round(ts + rng.uniform(0.002, 0.05), 3)
            out.append((wire(planned, ts, uuid.uuid4().hex), arrival,
                        (planned.run, str(planned.src))))  # fmt: skip
    return out


async def write(bootstrap: str, topics: Topics, parts: dict[int, Partition]) -> int:
    """The partitions as the emitters send them; returns the records written."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:  # made before ensure_topics, which finds it there and leaves it be
        await admin.create_topics([NewTopic(topics.events, len(parts), 1,
                                            topic_configs={"message.timestamp.type":
                                                           "CreateTime"})])  # fmt: skip
    finally:
        await admin.close()
    await ensure_topics(bootstrap, topics, len(parts))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all",
                                max_batch_size=1 << 20)  # fmt: skip
    await producer.start()
    records = 0
    try:
        for p, evs in parts.items():
            futures = []
            for group in sends(evs):
                value = b"\n".join(raw for raw, _ in group)
                headers = [BATCH_HEADER] if len(group) > 1 else []
                futures.append(await producer.send(topics.events, value, partition=p,
                                                   timestamp_ms=int(group[-1][1] * 1000),
                                                   headers=headers))  # fmt: skip
            await asyncio.gather(*futures)
            records += len(futures)
    finally:
        await producer.stop()
    return records


async def take_over(bootstrap: str, topics: Topics, partitions: list[int],
                    profile: cProfile.Profile | None) -> Taken:  # fmt: skip
    """A fresh worker takes `partitions` over as a rebalance has it do (`Ownership`)."""
    worker = StreamWorker(WorkerSettings(bootstrap, topic_prefix=topics.prefix,
                                         app_id=f"bench-{uuid.uuid4().hex[:8]}",
                                         partitions=len(partitions), say=lambda line: None,
                                         checkpoint_fork=False))  # fmt: skip
    got: list[Rebuilt] = []
    rebuild = worker.takeover.rebuild

    async def kept(*args: object) -> Rebuilt:
        done = await rebuild(*args)  # type: ignore[arg-type]
        got.append(done)
        return done

    worker.takeover.rebuild = kept  # type: ignore[method-assign]
    worker.rebuilding.update(partitions)
    collecting = [0.0, 0.0]  # when the collection under way began; seconds collecting

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.process_time()
        else:
            collecting[1] += time.process_time() - collecting[0]

    gc.collect()
    gc.callbacks.append(timed)
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        await worker.ownership._take_over(partitions)
        if profile is not None:
            profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.callbacks.remove(timed)
        await worker.publisher.close()
    return Taken(got[0], wall, cpu, collecting[1])


class Taken(NamedTuple):
    """One takeover: its rebuild, its wall seconds, this process's CPU seconds, and of
    those the garbage collector's."""

    rebuilt: Rebuilt
    wall: float
    cpu: float
    gc: float


def replayed(evs: Partition) -> tuple[int, float]:
    """`runwatch replay` of one partition's events: (events applied, CPU seconds: all of
    it is this process's)."""
    lines = [("p", n, raw) for n, (raw, _, _) in enumerate(evs, 1)]
    engine = Engine()
    gc.collect()
    t0 = time.process_time()
    for _ in replay(lines, engine, until=evs[-1][1]):
        pass
    return len(lines), time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1250, help="runs per partition (1250)")
    ap.add_argument("--partitions", type=int, default=2, help="partitions taken over (2)")
    ap.add_argument("--seconds", type=float, default=240.0, help="schedule length (240)")
    ap.add_argument("--repeat", type=int, default=2, help="takeovers, best kept (2)")
    ap.add_argument("--profile", help="write the takeover's cProfile stats here")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    say(machine())
    t0 = time.time() - args.seconds - 5.0
    parts = {p: partition_events(p, args.runs, args.seconds, t0) for p in range(args.partitions)}
    n_events = sum(map(len, parts.values()))
    # the garbage collector as `runwatch worker` and `runwatch replay` tune it
    with KafkaBroker(progress=lambda line: None) as broker, tuned_for_consuming():
        topics = Topics(f"bench.takeover-{uuid.uuid4().hex[:8]}.")
        records = asyncio.run(write(broker.bootstrap, topics, parts))
        say(f"{args.partitions} partitions of {args.runs:,} runs, {args.seconds:g} s of the "
            f"fleet's schedule: {n_events:,} events in {records:,} records "
            f"({n_events / records:.2f} events a record)")  # fmt: skip
        profile = cProfile.Profile() if args.profile else None
        best: Taken | None = None
        for i in range(args.repeat):
            got = asyncio.run(take_over(broker.bootstrap, topics, list(parts),
                                        profile if i == args.repeat - 1 else None))  # fmt: skip
            if best is None or got.cpu < best.cpu:
                best = got
    assert best is not None
    done, wall, cpu, collecting = best
    rate = done.events / done.seconds
    say(f"takeover from no checkpoint, the least CPU of {args.repeat}: re-read "
        f"{done.events:,} records into the rules in {done.seconds:.2f} s: "
        f"{n_events / done.seconds:,.0f} events/s ({rate:,.0f} records/s); the whole "
        f"takeover (restore, fence, re-read, publish, checkpoint) {wall:.2f} s wall, "
        f"{cpu:.2f} s CPU of this process ({cpu / n_events * 1e6:.1f} µs an event, "
        f"{n_events / cpu:,.0f} events per CPU second; {collecting:.2f} s of it collecting "
        "garbage)")  # fmt: skip
    with tuned_for_consuming():
        replay_s = min(sum(replayed(evs)[1] for evs in parts.values())
                       for _ in range(args.repeat))  # fmt: skip
    say(f"runwatch replay of the same events, best of {args.repeat}: {replay_s:.2f} s CPU, "
        f"{n_events / replay_s:,.0f} events/s; the takeover's re-read at "
        f"{replay_s / done.seconds:.2f}x replay's speed (its whole CPU against replay's: "
        f"{replay_s / cpu:.2f}x)")  # fmt: skip
    if profile is not None:
        profile.dump_stats(args.profile)
    if not args.no_write:
        write_section("takeover", ["## A takeover's re-read against replay (`bench/takeover.py`)",
                                   "", "```", *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the worker's fencing costs (issue 43): its output in a transaction per input
partition and turn, against the same records sent the way it sent them before, on a local
broker, in one run.

Each turn of the consuming loop that made output publishes, per partition, its alert
transitions, dead letters and run views, and commits (`stream/kafka/publish.py`); a turn
that made none commits nothing. Three ways of publishing the same output:

- transactional: `Publisher` as the worker runs it -- a producer per partition, each turn a
  transaction (AddPartitionsToTxn, the records, EndTxn), the partitions committed side by
  side;
- plain, sent: one idempotent producer, records handed to it and not waited for (what the
  worker did before: it flushed only before a checkpoint);
- plain, flushed: the same, flushed each turn (the records on the broker at the turn, as a
  committed transaction is).

Two measurements, each printing per way the process's CPU and the wall time:

- per event, on the fleet's run shape (`bench/fleet_shape.py`): `--runs` runs over
  `--partitions` partitions for `--seconds` of schedule, with a NaN step in one run of
  `--nan-every` and one process gone silent in as many, fed through the partitions'
  `LiveDriver`s in turns of the worker's fetch wait (50 ms), ticked every 0.5 s as the
  worker ticks them; what each turn made is kept, then published the three ways as fast as
  the broker takes it. CPU per event is the publishing's CPU over every event of the
  schedule (the drivers' own cost is not in it: `bench/live_path.py` has that); the wall
  time a turn with output waits is what it adds to an alert's delay. Checkpoints (two
  transactions a partition each checkpoint interval, 30 s by default: not per event) are
  left out.
- per turn, a storm: `--turns` turns of `--transitions` transitions and as many run views
  to each partition (every turn with output).

Figures only: nothing asserts a timing.

    .venv/bin/python bench/transactions.py [--runs 500] [--seconds 240] [--partitions 4]
        [--nan-every 20] [--turns 500] [--transitions 2] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from aiokafka import AIOKafkaProducer
from benchinfo import machine, say, write_section
from fleet_shape import schedule, wire

from runwatch.dev.broker import KafkaBroker
from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.clients import Connection
from runwatch.stream.kafka.publish import Output, Publisher
from runwatch.stream.live import LiveDriver

TOPICS = Topics("bench.")
T0 = 1_800_000_000.0
#: the worker's defaults: its fetch wait (a turn of the loop under steady traffic) and tick
TURN_S, TICK_S = 0.05, 0.5

#: One turn of the consuming loop: what each partition made in it.
Turn = list[tuple[int, Output]]


class Measured(NamedTuple):
    cpu: float  # process CPU seconds
    wall: float  # seconds


# -- what is published ---------------------------------------------------------------------


def storm(turns: int, partitions: int, n: int) -> list[Turn]:
    """`turns` turns of `n` transitions and the run views they changed, to every partition."""
    out = []
    for t in range(turns):
        turn = []
        for p in range(partitions):
            alerts, views = [], []
            for i in range(n):
                run = f"run-{t}-{p}-{i}"
                alerts.append(Alert(id=f"{t}-{p}-{i}", ts=T0 + t, rule="non_finite_metric",
                                    run=run, state="firing", severity="critical",
                                    key=f"non_finite_metric|{run}", since=T0 + t,
                                    summary="non-finite value at step 7: loss",
                                    details={"step": 7, "keys": ["loss"]}))  # fmt: skip
                views.append(RunView(run=run, ts=T0 + t, alerts=[], lifted=0, resumed=None))
            turn.append((p, Output(alerts, [], views)))
        out.append(turn)
    return out


def fleet(runs: int, partitions: int, seconds: float, nan_every: int) -> tuple[list[Turn], int]:
    """What the partitions' drivers make, turn by turn, on the fleet's run shape (with a NaN
    step in one run of `nan_every` and a silent process in as many); and the events."""
    names = [f"run-{k}" for k in range(runs)]
    faults = [(seconds * (0.2 + 0.6 * k / runs), run,
               "nan" if k // nan_every % 2 == 0 else "silent")
              for k, run in enumerate(names) if k % nan_every == 0]  # fmt: skip
    config = RulesConfig.default()
    drivers = [LiveDriver(config, topic=TOPICS.events, partition=p) for p in range(partitions)]
    for d in drivers:
        d.engine.views_changed = set()  # (the worker's drivers publish run views)
    offsets = [0] * partitions
    pending: list[list[tuple[bytes | None, float, int]]] = [[] for _ in range(partitions)]
    turns: list[Turn] = []
    events, turn_end, tick_at = 0, T0 + TURN_S, T0 + TICK_S

    def close_turn(now: float) -> None:
        nonlocal tick_at
        turn: Turn = []
        for p, d in enumerate(drivers):
            alerts, dead = d.feed(pending[p]) if pending[p] else ([], [])
            pending[p] = []
            if now >= tick_at:
                alerts += d.tick(now)
            views = d.engine.take_run_views()
            if alerts or dead or views:
                turn.append((p, Output(alerts, dead, views)))
        if now >= tick_at:
            tick_at = now + TICK_S
        if turn:
            turns.append(turn)

    for planned in schedule(names, seconds, seed=1, faults=faults):
        if planned.kind is None or planned.at >= seconds:
            continue
        ts = T0 + planned.at
        while ts >= turn_end:
            close_turn(turn_end)
            turn_end += TURN_S
        p = zlib.crc32(planned.run.encode()) % partitions
        pending[p].append((wire(planned, ts, uuid.uuid4().hex), ts + 0.01, offsets[p]))
        offsets[p] += 1
        events += 1
    close_turn(turn_end)
    return turns, events


# -- three ways of publishing it -----------------------------------------------------------


async def timed(turns: list[Turn], publish: Callable[[Turn], Awaitable[None]]) -> Measured:
    """Process CPU and wall seconds of publishing `turns`, after a warm-up (connections,
    metadata, coordinators)."""
    for turn in storm(10, 1, 1):
        await publish([(p, o._replace(alerts=[])) for p, o in turn])
    cpu, wall = time.process_time(), time.perf_counter()
    for turn in turns:
        await publish(turn)
    return Measured(time.process_time() - cpu, time.perf_counter() - wall)


async def transactional(bootstrap: str, partitions: int, turns: list[Turn]) -> Measured:
    publisher = Publisher(Connection(bootstrap).producer, TOPICS, "bench", "bench/1")
    for p in range(partitions):
        await publisher.open(p)

    async def publish(turn: Turn) -> None:
        for p, made in turn:
            await publisher.of(p).publish(*made)
        await publisher.commit()

    try:
        return await timed(turns, publish)
    finally:
        await publisher.close()


async def plain(bootstrap: str, turns: list[Turn], flush: bool) -> Measured:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1,
                                enable_idempotence=True)  # fmt: skip
    await producer.start()
    headers = [("runwatch-worker", b"bench/1")]

    async def publish(turn: Turn) -> None:
        for _, (alerts, dead, views) in turn:
            for a in alerts:
                await producer.send(TOPICS.alerts, a.to_json(), a.run.encode(), headers=headers)
            for letter in dead:
                await producer.send(TOPICS.dlq, letter.to_json(), letter.where.encode())
            for v in views:
                await producer.send(TOPICS.breaker, v.to_json(), v.run.encode())
        if flush:
            await producer.flush()

    try:
        measured = await timed(turns, publish)
        await producer.flush()  # (what was sent and not waited for is on the broker too)
        return measured
    finally:
        await producer.stop()


async def three_ways(bootstrap: str, partitions: int, turns: list[Turn]) -> dict[str, Measured]:
    return {
        "transactional": await transactional(bootstrap, partitions, turns),
        "plain, sent": await plain(bootstrap, turns, flush=False),
        "plain, flushed": await plain(bootstrap, turns, flush=True),
    }


def report(results: dict[str, Measured], per: int, unit: str, turns: int) -> list[str]:
    """Lines: per way, CPU µs per `unit` (`per` of them) and wall ms per turn with output;
    then transactions against the plain ways."""
    lines = []
    turns = max(turns, 1)
    for name, (cpu, wall) in results.items():
        lines.append(f"  {name:15} CPU {cpu / per * 1e6:8.2f} µs a{unit}; wall "
                     f"{wall / turns * 1e3:6.2f} ms a turn with output")  # fmt: skip
    txn, sent, flushed = results["transactional"], results["plain, sent"], results["plain, flushed"]
    lines.append(f"  transactions: {(txn.cpu - sent.cpu) / per * 1e6:+.2f} µs of CPU a{unit} "
                 f"against sending ({txn.cpu / sent.cpu:.1f}x), "
                 f"{(txn.wall - flushed.wall) / turns * 1e3:+.2f} ms a turn with output "
                 f"against a flush ({txn.wall / flushed.wall:.1f}x)")  # fmt: skip
    return lines


async def measure(bootstrap: str, args: argparse.Namespace) -> list[str]:
    await ensure_topics(bootstrap, TOPICS, args.partitions)
    lines = []
    turns, events = fleet(args.runs, args.partitions, args.seconds, args.nan_every)
    records = sum(len(o.alerts) + len(o.dead) + len(o.views) for t in turns for _, o in t)
    transactions = sum(len(t) for t in turns)
    lines.append(f"per event: {args.runs} runs of the fleet's shape on {args.partitions} "
                 f"partitions, {args.seconds:.0f} s of schedule, a fault in one run of "
                 f"{args.nan_every}: {events:,} events; {len(turns):,} turns of "
                 f"{args.seconds / TURN_S:,.0f} with output, {transactions:,} transactions, "
                 f"{records:,} records")  # fmt: skip
    lines += report(await three_ways(bootstrap, args.partitions, turns), events, "n event",
                    len(turns))  # fmt: skip
    turns = storm(args.turns, args.partitions, args.transitions)
    records = args.turns * args.partitions * args.transitions * 2
    lines.append(f"per turn, a storm: {args.turns} turns x {args.partitions} partitions x "
                 f"{args.transitions} transitions and {args.transitions} run views "
                 f"({records:,} records)")  # fmt: skip
    lines += report(await three_ways(bootstrap, args.partitions, turns), args.turns,
                    " turn", args.turns)  # fmt: skip
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--seconds", type=float, default=240.0)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--nan-every", type=int, default=20)
    p.add_argument("--turns", type=int, default=500)
    p.add_argument("--transitions", type=int, default=2)
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args()
    say(machine())
    with KafkaBroker(progress=lambda line: None) as broker:
        lines = asyncio.run(measure(broker.bootstrap, args))
    for line in lines:
        say(line)
    if not args.no_write:
        write_section("transactions", [
            "## What the worker's fencing costs: a transaction per partition and turn "
            "(`bench/transactions.py`)", "", "```", machine(), *lines, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

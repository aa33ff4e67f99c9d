"""What reading the events topic costs in the Kafka client alone: aiokafka, which the worker
uses, against confluent-kafka (librdkafka, C), on the same fleet-shaped partition of a local
broker, taking turns in one run (issue 44: the live worker's CPU outside the driver).

The partition is written as `bench/takeover.py` writes it (the fleet's run shape, each
process's sends of one linger window one record, JSON Lines under the batch header,
uncompressed). Each turn reads it whole from the start, as a takeover's re-read does and as
a live worker's fetches do in bigger pieces: aiokafka's `AIOKafkaConsumer.getmany` with the
worker's settings (`stream/kafka/clients.py`: read_committed, 8 MiB a partition), and
confluent-kafka's `Consumer.consume` with the same isolation and fetch size. Each touches
every record's value and headers, no more. The figure is this process's CPU (every thread's:
librdkafka fetches and parses in its own threads) per record and per event. Figures only:
nothing asserts a timing.

    .venv/bin/python bench/kafka_clients.py [--runs 1250] [--seconds 120] [--turns 3]
        [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import uuid

import aiokafka
import confluent_kafka  # (a dev dependency: `make setup` installs it)
from aiokafka import AIOKafkaConsumer, TopicPartition
from benchinfo import SAID, machine, say, write_section
from takeover import partition_events, write

from runwatch.dev.broker import KafkaBroker
from runwatch.emitters.topics import Topics

#: the worker's consumer settings that decide what a fetch brings (stream/kafka/clients.py)
PARTITION_BYTES = 8 << 20
FETCH_BYTES = 64 << 20


async def aiokafka_turn(bootstrap: str, topic: str, end: int) -> tuple[int, int, float]:
    """(records, bytes, CPU seconds) of reading the partition whole with aiokafka."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed",
                                max_partition_fetch_bytes=PARTITION_BYTES,
                                fetch_max_bytes=FETCH_BYTES)  # fmt: skip
    await consumer.start()
    tp = TopicPartition(topic, 0)
    records = size = 0
    try:
        gc.collect()
        cpu = time.process_time()  # (from the assignment: what fetches before the loop counts)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        while records < end:
            got = await consumer.getmany(tp, timeout_ms=1000, max_records=5000)
            for record in got.get(tp, ()):
                size += len(record.value) + len(record.headers)
                records += 1
        cpu = time.process_time() - cpu
    finally:
        await consumer.stop()
    return records, size, cpu


def confluent_turn(bootstrap: str, topic: str, end: int) -> tuple[int, int, float]:
    """(records, bytes, CPU seconds) of reading the partition whole with confluent-kafka."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "max.partition.fetch.bytes": PARTITION_BYTES, "fetch.max.bytes": FETCH_BYTES,
        "enable.partition.eof": False,
    })  # fmt: skip
    records = size = 0
    try:
        gc.collect()
        cpu = time.process_time()  # (from the assignment: librdkafka prefetches from there)
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        while records < end:
            for message in consumer.consume(num_messages=5000, timeout=1.0):
                if message.error() is not None:
                    raise RuntimeError(message.error())
                size += len(message.value()) + len(message.headers() or ())
                records += 1
        cpu = time.process_time() - cpu
    finally:
        consumer.close()
    return records, size, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1250, help="runs in the partition (1250)")
    ap.add_argument("--seconds", type=float, default=120.0, help="schedule length (120)")
    ap.add_argument("--turns", type=int, default=3, help="turns of each client (3)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    say(machine())
    librdkafka = confluent_kafka.libversion()[0]
    say(f"aiokafka {aiokafka.__version__}; confluent-kafka {confluent_kafka.__version__} "
        f"(librdkafka {librdkafka})")  # fmt: skip
    t0 = time.time() - args.seconds - 5.0
    events = partition_events(0, args.runs, args.seconds, t0)
    cpus: dict[str, list[float]] = {"aiokafka": [], "confluent-kafka": []}
    with KafkaBroker(progress=lambda line: None) as broker:
        topics = Topics(f"bench.clients-{uuid.uuid4().hex[:8]}.")
        records = asyncio.run(write(broker.bootstrap, topics, {0: events}))
        say(f"one partition of {args.runs:,} runs, {args.seconds:g} s of the fleet's schedule: "
            f"{len(events):,} events in {records:,} records "
            f"({len(events) / records:.2f} events a record)")  # fmt: skip
        for turn in range(1, args.turns + 1):
            for name in cpus:
                if name == "aiokafka":
                    got = asyncio.run(aiokafka_turn(broker.bootstrap, topics.events, records))
                else:
                    got = confluent_turn(broker.bootstrap, topics.events, records)
                n, size, cpu = got
                if n != records:
                    raise SystemExit(f"{name} read {n:,} records of {records:,}")
                cpus[name].append(cpu)
                say(f"  turn {turn} {name:<16} {cpu:6.2f} s CPU  "
                    f"{cpu / records * 1e6:5.2f} µs a record  {cpu / len(events) * 1e6:5.2f} µs "
                    f"an event  ({size / 1e6:,.0f} MB)")  # fmt: skip
    medians = {name: statistics.median(v) for name, v in cpus.items()}
    for name, cpu in medians.items():
        say(f"median {name:<16} {cpu / records * 1e6:5.2f} µs a record, "
            f"{cpu / len(events) * 1e6:5.2f} µs an event")  # fmt: skip
    say(f"aiokafka against confluent-kafka: {medians['aiokafka'] / medians['confluent-kafka']:.1f}x"
        " the CPU a record")  # fmt: skip
    if not args.no_write:
        write_section("kafka-clients", ["## Reading the events topic: aiokafka against "
                                        "confluent-kafka (`bench/kafka_clients.py`)", "",
                                        "```", *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

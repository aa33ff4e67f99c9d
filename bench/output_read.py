"""What a takeover reads of runwatch.alerts and the dead-letter topic to learn what is
published (`stream/kafka/read.py`): all of both topics, or only what came after the
checkpoint it starts from (the ends the checkpoint keeps, `read.output_ends`).

For each size of dead-letter flood in turn, on one local broker and fresh 4-partition
topics: the flood produced, then each way timed three times (the best is printed) --
reading the topics whole (the obvious alternative, what every takeover did before, and
what one without a checkpoint still does) and reading them from their ends as a checkpoint
made after the flood keeps them. The ratio is against the whole read.

Figures only, no pass/fail.

    .venv/bin/python bench/output_read.py [--letters 0 100000 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid

import orjson
from benchinfo import SAID, machine, say, write_section
from kafka import KafkaProducer

from runwatch.dev.broker import KafkaBroker
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.read import output_ends, read_published

PARTITIONS = 4
TRIES = 3


def flood(bootstrap: str, topics: Topics, letters: int) -> None:
    """`letters` dead letters, as a worker writes them for invalid events."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20)
    try:
        for i in range(letters):
            letter = {"topic": topics.events, "partition": i % PARTITIONS, "offset": i,
                      "reason": "not JSON", "raw": f"garbage {i}"}  # fmt: skip
            producer.send(topics.dlq, orjson.dumps(letter), key=b"%d" % (i % 64))
        producer.flush(300)
    finally:
        producer.close(30)


async def timed(bootstrap: str, topics: Topics) -> tuple[float, float, int, int]:
    """(best seconds whole, best seconds from the ends, records read each way)."""
    kafka = clients.Connection(bootstrap)
    ends = await output_ends(kafka, topics)
    whole, since = float("inf"), float("inf")
    read_whole = read_since = 0
    for _ in range(TRIES):
        started = time.perf_counter()
        read_whole = (await read_published(kafka, topics)).read
        whole = min(whole, time.perf_counter() - started)
        started = time.perf_counter()
        read_since = (await read_published(kafka, topics, ends)).read
        since = min(since, time.perf_counter() - started)
    return whole, since, read_whole, read_since


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--letters", type=int, nargs="+", default=[0, 100_000, 1_000_000])
    args = ap.parse_args()
    say(machine())
    with KafkaBroker(progress=lambda _: None) as broker:  # in a temporary folder, removed
        for letters in args.letters:
            topics = Topics(f"or{uuid.uuid4().hex[:6]}.")
            asyncio.run(ensure_topics(broker.bootstrap, topics, PARTITIONS))
            flood(broker.bootstrap, topics, letters)
            whole, since, n_whole, n_since = asyncio.run(timed(broker.bootstrap, topics))
            say(f"{letters:>9,} dead letters: whole topics {whole * 1000:7,.0f} ms "
                f"({n_whole:,} read); from a checkpoint's ends {since * 1000:5,.0f} ms "
                f"({n_since:,} read): {whole / since:,.1f}x")  # fmt: skip
    write_section("output-read", ["## What a takeover reads of the output topics "
                                  "(`bench/output_read.py`)", "", "```", *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Finding a partition's newest checkpoint on `runwatch.checkpoints`, from the end backwards."""

from __future__ import annotations

import asyncio

import pytest
from kafka_double import MemoryBroker, MemoryConnection

from runwatch.stream.kafka.checkpoints import checkpoint_key, latest

TOPIC = "t.runwatch.checkpoints"


def key(p: int) -> bytes:
    return checkpoint_key("workers", "t.runwatch.events", p)


@pytest.mark.parametrize("others", [0, 1, 5, 40], ids=lambda n: f"{n}-after")
def test_the_newest_value_of_the_key_however_many_others_follow_it(others: int) -> None:
    """Where the checkpoints topic has fewer partitions than the events topic, other
    partitions' checkpoints come after the one wanted: the search widens until it finds it."""
    b = MemoryBroker()
    for version in range(3):
        b.produce(TOPIC, f"p0 v{version}".encode(), 0, key(0))
    b.produce(TOPIC, None, 0, key(0) + b"-gone")  # a tombstone of someone else's
    for i in range(others):
        b.produce(TOPIC, f"p{1 + i % 3} v{i}".encode(), 0, key(1 + i % 3))
    got = asyncio.run(latest(MemoryConnection(b), TOPIC, key(0), 0))
    assert got == b"p0 v2"


def test_none_for_a_key_never_written_and_for_a_missing_topic() -> None:
    b = MemoryBroker()
    b.produce(TOPIC, b"p1", 0, key(1))
    assert asyncio.run(latest(MemoryConnection(b), TOPIC, key(0), 0)) is None
    assert asyncio.run(latest(MemoryConnection(b), "t.nothing", key(0), 0)) is None

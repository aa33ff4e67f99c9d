"""The worker's checkpoint store, `runwatch.checkpoints`: finding a partition's newest
checkpoint from the end backwards, waiting for one a handover promised, and writing each
partition's records through its publisher."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka_double import MemoryBroker, MemoryConnection, MemoryRecord

from runwatch.emitters.topics import Topics
from runwatch.stream.kafka import checkpoints
from runwatch.stream.kafka.checkpoints import (
    PENDING,
    SETTLED,
    Found,
    checkpoint_key,
    handover_key,
    latest,
)
from runwatch.stream.kafka.publish import Publisher

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
    assert got == Found(b"p0 v2")


def test_none_for_a_key_never_written_and_for_a_missing_topic() -> None:
    b = MemoryBroker()
    b.produce(TOPIC, b"p1", 0, key(1))
    assert asyncio.run(latest(MemoryConnection(b), TOPIC, key(0), 0)).value is None
    assert asyncio.run(latest(MemoryConnection(b), "t.nothing", key(0), 0)).value is None


MARKER = handover_key("workers", "t.runwatch.events", 0)
#: Longer than any test waits: a search still waiting on a promise when its test gives up
#: (`until`) has failed to see what settled it.
FOREVER = 3600.0


async def until(what: Callable[[], Any], why: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {why}")
        await asyncio.sleep(0.01)


def promised(b: MemoryBroker, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, asyncio.Event]:
    """The old checkpoint, then a PENDING marker; the search of it, under way, and an event
    set once it follows what comes after the marker (it waits)."""
    b.produce(TOPIC, b"old", 0, key(0))
    b.produce(TOPIC, b"p1", 0, key(1))
    b.produce(TOPIC, PENDING, 0, MARKER)
    b.produce(TOPIC, b"p2", 0, key(2))
    following = asyncio.Event()
    follow = checkpoints._follow

    async def noted(*args: Any) -> Any:
        following.set()
        return await follow(*args)

    monkeypatch.setattr(checkpoints, "_follow", noted)
    search = asyncio.create_task(latest(MemoryConnection(b), TOPIC, key(0), 0, MARKER, FOREVER))
    return search, following


def test_a_promised_handover_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Newer than the checkpoint, a PENDING marker: the search waits, and takes the
    checkpoint that comes after it (another partition's records come in between)."""
    b = MemoryBroker()

    async def scenario() -> Found:
        search, following = promised(b, monkeypatch)
        await until(following.is_set, "the search waits on the promise")
        b.produce(TOPIC, b"p3", 0, key(3))
        b.produce(TOPIC, b"handed over", 0, key(0))
        await until(search.done, "the search took the handover")
        return search.result()

    found = asyncio.run(scenario())
    assert found.value == b"handed over"
    assert found.waited > 0


def test_a_promise_withdrawn_leaves_the_checkpoint_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The old owner kept the partition or could not checkpoint it (SETTLED) while the
    search waited: the search stops waiting and takes the checkpoint before the marker."""
    b = MemoryBroker()

    async def scenario() -> Found:
        search, following = promised(b, monkeypatch)
        await until(following.is_set, "the search waits on the promise")
        b.produce(TOPIC, SETTLED, 0, MARKER)
        await until(search.done, "the search saw the promise withdrawn")
        return search.result()

    assert asyncio.run(scenario()).value == b"old"


@pytest.mark.parametrize("word", [SETTLED, PENDING], ids=["settled", "stale-pending"])
def test_no_wait_for_a_settled_or_stale_promise(word: bytes) -> None:
    """A SETTLED marker, or a PENDING one older than the wait (its owner died before
    keeping it): the checkpoint before it, at once."""
    b = MemoryBroker()
    b.produce(TOPIC, b"old", 0, key(0))
    made = int((time.time() - 2 * FOREVER) * 1000) if word == PENDING else int(time.time() * 1000)
    log = b.topics[TOPIC][0]
    log.append(MemoryRecord(TOPIC, 0, len(log), made, 0, MARKER, word))
    found = asyncio.run(latest(MemoryConnection(b), TOPIC, key(0), 0, MARKER, FOREVER))
    assert found == Found(b"old")


class Sends:
    """A partition's publisher, as the store writes through it."""

    def __init__(self, partition: int, sent: list[tuple[int, bytes, bytes, int]]) -> None:
        self.partition, self.sent = partition, sent

    async def checkpoint(self, key: bytes, data: bytes, target: int) -> None:
        self.sent.append((self.partition, key, data, target))


def test_the_store_writes_each_partition_s_records_through_its_publisher() -> None:
    """Checkpoints and handover markers alike, to checkpoints partition p mod its count."""
    sent: list[tuple[int, bytes, bytes, int]] = []
    store = checkpoints.KafkaCheckpoints(MemoryConnection(MemoryBroker()), Topics("t."),
                                         "workers", lambda p: Sends(p, sent))  # fmt: skip
    store.partitions = 2

    async def scenario() -> None:
        await store.write(3, b"state")
        await store.mark(3, PENDING)
        with pytest.raises(ValueError, match="over"):
            await store.write(1, b"x" * (checkpoints.MAX_BYTES + 1))

    asyncio.run(scenario())
    assert sent == [(3, key(3), b"state", 1), (3, handover_key("workers", "t.runwatch.events", 3),
                                               PENDING, 1)]  # fmt: skip


def test_the_store_reads_back_what_it_wrote() -> None:
    b = MemoryBroker()
    b.create(TOPIC, 1)
    kafka = MemoryConnection(b)
    publisher = Publisher(kafka.producer, Topics("t."), "workers", "w/1")
    store = checkpoints.KafkaCheckpoints(kafka, Topics("t."), "workers", publisher.of)

    async def scenario() -> tuple[bytes | None, bytes | None]:
        await publisher.open(0)
        await publisher.open(1)
        none = await store.read(0)
        await store.write(0, b"v1")
        await store.write(1, b"other")
        await store.write(0, b"v2")
        return none, await store.read(0)

    assert asyncio.run(scenario()) == (None, b"v2")


def test_the_search_fetches_nothing_before_it_seeks() -> None:
    """Assigned, aiokafka fetches a partition from its start at once: the search holds it
    paused but for its own polls, so no fetch of old checkpoints (up to MAX_BYTES) is made
    and thrown away by the seek to the end."""
    b = MemoryBroker()
    for version in range(5):
        b.produce(TOPIC, f"p0 v{version}".encode(), 0, key(0))
    b.produce(TOPIC, SETTLED, 0, MARKER)  # newest: a marker, then the checkpoint before it
    got = asyncio.run(latest(MemoryConnection(b), TOPIC, key(0), 0, MARKER, FOREVER))
    assert got == Found(b"p0 v4")
    assert [c.fetched_ahead for c in b.consumers] == [[]]


def test_the_newest_of_records_written_in_transactions_in_one_poll() -> None:
    """Every record of the checkpoints topic goes out in a transaction of its own, so the
    partition ends in a commit marker: the search's first window takes the record and its
    marker, and finds the checkpoint in one poll -- not a poll of the marker alone first,
    which against Kafka waits out its whole timeout (a second of every takeover)."""
    b = MemoryBroker()
    b.create(TOPIC, 1)
    kafka = MemoryConnection(b)
    publisher = Publisher(kafka.producer, Topics("t."), "workers", "w/1")
    store = checkpoints.KafkaCheckpoints(kafka, Topics("t."), "workers", publisher.of)

    async def scenario() -> Found:
        await publisher.open(0)
        for version in range(3):
            await store.write(0, f"v{version}".encode())
        await store.mark(0, SETTLED)  # the newest: a settled promise, then the checkpoint
        return await store.newest(0)

    assert asyncio.run(scenario()) == Found(b"v2")
    (search,) = [c for c in b.consumers if c.polls]
    assert search.polls == 2  # the marker's record, then the checkpoint before it

"""The Kafka double (`tests/kafka_double.py`) held to a real broker: every case runs against
both, with aiokafka's consumer and producer on the real side (arroyo's pattern). What the unit
tests of the consuming loop rely on -- order per partition, offsets, positions, seek, pause,
committed offsets, what is refused -- and what the worker's fencing relies on -- a producer
that starts with a transactional id fences the one before, a read_committed consumer stops
before a transaction still open -- is what a real broker does, or this module fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import IllegalOperation, IllegalStateError, ProducerFenced
from aiokafka.structs import TopicPartition
from kafka_double import MemoryBroker, MemoryConsumer, MemoryProducer, MemoryTxnProducer

from runwatch.stream.kafka import clients

DEADLINE_S = 60.0  # generous: the broker shares two cores with the rest of the suite


@dataclass
class Kafka:
    """One side of the contract: makes topics, consumers and producers (not started)."""

    name: str
    create: Callable[[str, int], Coroutine[Any, Any, None]]
    #: a consumer of the group (or none), reading read_uncommitted or read_committed
    consumer: Callable[..., Any]
    producer: Callable[[], Any]
    #: records of a partition before an offset deleted (retention, DeleteRecords)
    delete: Callable[[TopicPartition, int], Coroutine[Any, Any, None]]
    #: values sent to a partition in one committed transaction
    transaction: Callable[[TopicPartition, list[bytes]], Coroutine[Any, Any, None]]
    #: a producer with a transactional id (not started), as the worker makes it
    #: (`clients.TransactionalProducer`)
    txn_producer: Callable[[str], Any]


def double() -> Kafka:
    broker = MemoryBroker()

    async def create(topic: str, partitions: int) -> None:
        broker.create(topic, partitions)

    async def delete(tp: TopicPartition, before: int) -> None:
        broker.delete_records(tp, before)

    async def transaction(tp: TopicPartition, values: list[bytes]) -> None:
        for value in values:
            broker.produce(tp.topic, value, tp.partition)
        broker.commit_marker(tp.topic, tp.partition)

    def consumer(group: str | None, isolation: str = "read_uncommitted") -> MemoryConsumer:
        return MemoryConsumer(broker, group, isolation)

    return Kafka("double", create, consumer, lambda: MemoryProducer(broker), delete,
                 transaction, lambda tid: MemoryTxnProducer(broker, tid))  # fmt: skip


def real(bootstrap: str) -> Kafka:
    async def create(topic: str, partitions: int) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            await admin.close()

    def consumer(group: str | None, isolation: str = "read_uncommitted") -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                isolation_level=isolation)  # fmt: skip

    async def delete(tp: TopicPartition, before: int) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_records({tp: RecordsToDelete(before)}, timeout_ms=30_000)
        finally:
            await admin.close()

    async def transaction(tp: TopicPartition, values: list[bytes]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    transactional_id=f"contract-{uuid.uuid4().hex}")  # fmt: skip
        await producer.start()
        try:
            async with producer.transaction():
                for value in values:
                    await producer.send_and_wait(tp.topic, value, partition=tp.partition)
        finally:
            await producer.stop()

    return Kafka("broker", create, consumer,
                 lambda: AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all"),
                 delete, transaction,
                 lambda tid: clients.producer(bootstrap, tid))  # fmt: skip


@pytest.fixture(params=["double", "broker"])
def kafka(request: pytest.FixtureRequest, kafka_broker: str) -> Kafka:
    """Each case, once against the double and once against the session's broker."""
    return double() if request.param == "double" else real(kafka_broker)


def run(case: Coroutine[Any, Any, None]) -> None:
    asyncio.run(case)


async def fill(kafka: Kafka, topic: str) -> tuple[TopicPartition, TopicPartition]:
    """Two partitions: five records on the first, three on the second, keyed."""
    await kafka.create(topic, 2)
    producer = kafka.producer()
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"a{i}".encode(), key=b"a", partition=0)
        for i in range(3):
            await producer.send_and_wait(topic, f"b{i}".encode(), key=b"b", partition=1)
    finally:
        await producer.stop()
    return TopicPartition(topic, 0), TopicPartition(topic, 1)


@contextlib.asynccontextmanager
async def started(
    kafka: Kafka, group: str | None, *partitions: TopicPartition, committed: bool = False
) -> AsyncIterator[Any]:
    """A consumer (of `group`, or none; `committed`: reading read_committed), started,
    holding `partitions`; stopped after."""
    consumer = kafka.consumer(group, "read_committed" if committed else "read_uncommitted")
    await consumer.start()
    try:
        consumer.assign(list(partitions))
        yield consumer
    finally:
        await consumer.stop()


async def drain(consumer: Any, want: int) -> list[Any]:
    """Records until `want` came (a real fetch may answer empty at first), in fetch order."""
    got: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records came"
        batches = await consumer.getmany(timeout_ms=200)
        for tp in sorted(batches):
            got += batches[tp]
    return got


async def quiet(consumer: Any, polls: int = 5) -> list[Any]:
    """What a few more fetches bring (expected: nothing)."""
    out: list[Any] = []
    for _ in range(polls):
        for records in (await consumer.getmany(timeout_ms=200)).values():
            out += records
    return out


def by_partition(records: list[Any]) -> dict[int, list[tuple[int, bytes | None, bytes]]]:
    out: dict[int, list[tuple[int, bytes | None, bytes]]] = {}
    for r in records:
        out.setdefault(r.partition, []).append((r.offset, r.key, r.value))
    return out


def test_records_come_back_in_offset_order_per_partition(kafka: Kafka, kafka_topic: str) -> None:
    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with started(kafka, None, p0, p1) as consumer:
            records = await drain(consumer, 8)
            assert {r.topic for r in records} == {kafka_topic}
            assert by_partition(records) == {
                0: [(i, b"a", f"a{i}".encode()) for i in range(5)],
                1: [(i, b"b", f"b{i}".encode()) for i in range(3)],
            }
            assert await consumer.end_offsets([p0, p1]) == {p0: 5, p1: 3}
            assert (consumer.highwater(p0), consumer.highwater(p1)) == (5, 3)
            assert await quiet(consumer) == []

    run(case())


def test_seek_moves_the_position(kafka: Kafka, kafka_topic: str) -> None:
    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with started(kafka, None, p0, p1) as consumer:
            await drain(consumer, 8)
            consumer.seek(p0, 3)
            await consumer.seek_to_beginning(p1)
            assert by_partition(await drain(consumer, 5)) == {
                0: [(3, b"a", b"a3"), (4, b"a", b"a4")],
                1: [(i, b"b", f"b{i}".encode()) for i in range(3)],
            }

    run(case())


def test_a_paused_partition_yields_nothing_until_resumed(kafka: Kafka, kafka_topic: str) -> None:
    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with started(kafka, None, p0, p1) as consumer:
            consumer.pause(p0)
            first = await drain(consumer, 3)
            assert {r.partition for r in first + await quiet(consumer)} == {1}
            consumer.resume(p0)
            assert [r.offset for r in await drain(consumer, 5)] == [0, 1, 2, 3, 4]
            with pytest.raises(TypeError):
                consumer.pause((kafka_topic, 0))  # aiokafka takes its TopicPartition only

    run(case())


def test_a_group_goes_on_from_its_committed_offsets(
    kafka: Kafka, kafka_topic: str, kafka_group: str
) -> None:
    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with started(kafka, kafka_group, p0, p1) as first:
            await drain(first, 8)
            await first.commit({p0: 3, p1: 1})
        async with started(kafka, kafka_group, p0, p1) as second:
            assert by_partition(await drain(second, 4)) == {
                0: [(3, b"a", b"a3"), (4, b"a", b"a4")],
                1: [(1, b"b", b"b1"), (2, b"b", b"b2")],
            }

    run(case())


def test_what_is_refused(kafka: Kafka, kafka_topic: str, kafka_group: str) -> None:
    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with (
            started(kafka, None, p0) as lone,
            started(kafka, kafka_group, p0) as grouped,
        ):
            with pytest.raises(IllegalStateError):
                lone.seek(p1, 0)  # not assigned
            with pytest.raises(ValueError, match="positive integer"):
                lone.seek(p0, -1)
            with pytest.raises(IllegalOperation):
                await lone.commit({p0: 1})  # no group
            with pytest.raises(IllegalStateError):
                await grouped.commit({p1: 1})  # not assigned

    run(case())


def test_the_producer_says_where_each_record_went(kafka: Kafka, kafka_topic: str) -> None:
    """(A producer used before `start` hangs on aiokafka and is refused by the double: no
    code of runwatch may do it, and no case here can wait on it.)"""

    async def case() -> None:
        await kafka.create(kafka_topic, 2)
        producer = kafka.producer()
        await producer.start()
        try:
            sent = [await producer.send_and_wait(kafka_topic, b"x", partition=1) for _ in "ab"]
            assert [(s.topic, s.partition, s.offset) for s in sent] == [
                (kafka_topic, 1, 0),
                (kafka_topic, 1, 1),
            ]
            keyed = {(await producer.send_and_wait(kafka_topic, b"y", key=b"run-7")).partition
                     for _ in range(3)}  # fmt: skip
            assert len(keyed) == 1  # one key, one partition
        finally:
            await producer.stop()

    run(case())


def test_offsets_and_the_position_after_a_fetch(kafka: Kafka, kafka_topic: str) -> None:
    """What reading a checkpoint backwards relies on (`checkpoints.latest`): where a
    partition begins and ends, and the position after what was fetched."""

    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        async with started(kafka, None, p0, p1) as consumer:
            assert await consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
            assert await consumer.end_offsets([p0, p1]) == {p0: 5, p1: 3}
            consumer.seek(p0, 3)
            consumer.pause(p1)
            got = await drain(consumer, 2)
            assert [r.offset for r in got] == [3, 4]
            assert await consumer.position(p0) == 5

    run(case())


def test_records_deleted_from_a_partition_s_start(kafka: Kafka, kafka_topic: str) -> None:
    """Retention deletes a partition's oldest records: it begins later, a fetch from before
    that starts at its beginning, and one whose records all went begins at its end (what a
    takeover reading runwatch.alerts or the DLQ to its end relies on)."""

    async def case() -> None:
        p0, p1 = await fill(kafka, kafka_topic)
        await kafka.delete(p0, 3)
        await kafka.delete(p1, 3)  # all of them
        async with started(kafka, None, p0, p1) as consumer:
            assert await consumer.beginning_offsets([p0, p1]) == {p0: 3, p1: 3}
            assert await consumer.end_offsets([p0, p1]) == {p0: 5, p1: 3}
            consumer.seek(p0, 1)
            got = await drain(consumer, 2)
            assert [r.offset for r in got] == [3, 4]
            assert await quiet(consumer) == []

    run(case())


def test_a_transaction_s_commit_marker_takes_an_offset_no_record_has(
    kafka: Kafka, kafka_topic: str
) -> None:
    """Events written by a transactional producer (an exactly-once pipeline): the commit
    marker after them takes the partition's last offset, and is never fetched -- the
    consumer's position passes it (what a read to the end, and a live partition counted as
    read to its end, rely on)."""

    async def case() -> None:
        await kafka.create(kafka_topic, 1)
        tp = TopicPartition(kafka_topic, 0)
        await kafka.transaction(tp, [b"a", b"b", b"c"])
        async with started(kafka, None, tp) as consumer:
            deadline = time.monotonic() + DEADLINE_S  # the coordinator writes it after the
            while (await consumer.end_offsets([tp]))[tp] != 4:  # commit has returned
                assert time.monotonic() < deadline, "no commit marker at offset 3"
                await asyncio.sleep(0.05)
            consumer.seek(tp, 0)
            got = await drain(consumer, 3)
            assert [r.offset for r in got] == [0, 1, 2]
            assert await quiet(consumer) == []
            assert await consumer.position(tp) == 4

    run(case())


async def settled_end(consumer: Any, tp: TopicPartition, want: int) -> None:
    """Wait until the consumer says `tp` ends at `want` (the coordinator writes a
    transaction's markers after its commit or abort has returned)."""
    deadline = time.monotonic() + DEADLINE_S
    while (got := (await consumer.end_offsets([tp]))[tp]) != want:
        assert time.monotonic() < deadline, f"{tp} ends at {got}, not {want}"
        await asyncio.sleep(0.05)


def test_a_producer_that_starts_with_a_transactional_id_fences_the_one_before(
    kafka: Kafka, kafka_topic: str
) -> None:
    """What the worker's fencing is (stream/kafka/publish.py): a new owner's producer of a
    partition's transactional id aborts the transaction the old owner left open, and every
    later request of the old one is refused; read_committed, only the new owner's record."""

    async def case() -> None:
        await kafka.create(kafka_topic, 1)
        tp = TopicPartition(kafka_topic, 0)
        tid = f"contract-{uuid.uuid4().hex}"
        old, new = kafka.txn_producer(tid), kafka.txn_producer(tid)
        await old.start()
        try:
            await old.begin_transaction()
            await (await old.send(kafka_topic, b"zombie", partition=0))
            await new.start()
            try:
                with pytest.raises(ProducerFenced):
                    await old.commit_transaction()
                assert not old.usable
                with pytest.raises(ProducerFenced):  # and whatever it tries after
                    await old.begin_transaction()
                assert new.usable
                await new.begin_transaction()
                await (await new.send(kafka_topic, b"owner", partition=0))
                await new.commit_transaction()
            finally:
                await new.stop()
        finally:
            await old.stop()
        async with started(kafka, None, tp, committed=True) as reader:
            await settled_end(reader, tp, 4)  # zombie, its abort marker, owner, commit
            assert [r.value for r in await drain(reader, 1)] == [b"owner"]
            assert await quiet(reader) == []
        async with started(kafka, None, tp) as everything:
            assert [r.value for r in await drain(everything, 2)] == [b"zombie", b"owner"]

    run(case())


def test_read_committed_ends_before_a_transaction_still_open(
    kafka: Kafka, kafka_topic: str
) -> None:
    """The last stable offset: a read_committed consumer gets nothing at or past the first
    record of a transaction still open, and says the partition ends there -- what makes a
    takeover read the output topics to the log's end instead (stream/kafka/read.py)."""

    async def case() -> None:
        await kafka.create(kafka_topic, 1)
        tp = TopicPartition(kafka_topic, 0)
        plain = kafka.producer()
        txn = kafka.txn_producer(f"contract-{uuid.uuid4().hex}")
        await plain.start()
        await txn.start()
        try:
            await plain.send_and_wait(kafka_topic, b"before", partition=0)
            await txn.begin_transaction()
            await (await txn.send(kafka_topic, b"open", partition=0))
            await plain.send_and_wait(kafka_topic, b"after", partition=0)
            async with (
                started(kafka, None, tp, committed=True) as committed,
                started(kafka, None, tp) as everything,
            ):
                assert (await committed.end_offsets([tp]))[tp] == 1
                assert (await everything.end_offsets([tp]))[tp] == 3
                assert [r.value for r in await drain(committed, 1)] == [b"before"]
                assert await quiet(committed) == []
                await txn.commit_transaction()
                await settled_end(committed, tp, 4)
                assert [r.value for r in await drain(committed, 2)] == [b"open", b"after"]
        finally:
            await txn.stop()
            await plain.stop()

    run(case())

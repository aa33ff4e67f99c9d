"""An in-memory Kafka for unit tests of the consuming loop (`runwatch.stream.kafka.consume`)
and of the stream worker (`MemoryConnection` makes its consumers and its transactional
producers, `MemoryTxnProducer`).

`MemoryBroker` keeps topics as lists of records per partition, committed offsets per group
and group members; `MemoryConsumer` and `MemoryProducer` have the methods of aiokafka's
consumer and producer that runwatch uses, with the same semantics where runwatch relies on
them: a group splits partitions among its members (round robin) and rebalances when one
joins or leaves, calling the listener's `on_partitions_revoked` before and
`on_partitions_assigned` after -- every member's revoke before any member's assignment, as
Kafka's join barrier orders them (a member that does not poll is waited for up to
`JOIN_WAIT_S`, as the group waits out its rebalance timeout); positions start at the
committed offset, else at the start; `seek` overrides; `end_offsets`/`highwater` give the
next offset to be written. Records can be deleted from a partition's start, as retention and
DeleteRecords do (`delete_records`): the partition then begins later (`beginning_offsets`),
and a fetch from before its beginning starts there, as with auto_offset_reset="earliest".
A transaction's commit marker (`commit_marker`) takes an offset and is never fetched: the
consumer's position passes it, and no record is returned for it.

Transactions (`MemoryTxnProducer`, aiokafka's producer with a `transactional_id`): starting a
producer bumps its id's epoch and aborts the transaction an earlier producer of the id left
open; every later call of the earlier one raises `ProducerFenced`, as the broker's
transaction coordinator refuses it. A consumer reading `read_committed` (what runwatch's
clients read) gets no record of an aborted transaction, and none at or past the first record
of an open one (the last stable offset: its `end_offsets` too); `highwater` is the end of
the log either way. A commit of a group member whose group has rebalanced since it joined
fails (CommitFailedError), as the coordinator refuses a stale generation.

As strict as aiokafka 0.14 where it refuses: aiokafka's own `TopicPartition` (pause and
resume take nothing else), its errors (`seek` or `commit` of a partition not assigned:
`IllegalStateError`; a commit without a group: `IllegalOperation`; a negative offset:
`ValueError`). `tests/integration/test_kafka_contract.py` runs the same cases against this
double and a real broker, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import (
    CommitFailedError,
    IllegalOperation,
    IllegalStateError,
    KafkaConnectionError,
    ProducerFenced,
)
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import RecordMetadata, TopicPartition

_BY_KEY = DefaultPartitioner()

#: The longest a rebalance waits for a member that does not rejoin (Kafka: the group's
#: rebalance timeout, after which it goes on without that member).
JOIN_WAIT_S = 30.0


@dataclass(frozen=True)
class MemoryRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    #: a transaction's control record: it takes an offset, no consumer gets it
    control: bool = False
    #: (key, value) pairs, as aiokafka's ConsumerRecord has them
    headers: tuple[tuple[str, bytes], ...] = ()
    #: the transaction it was written in (None: none)
    txn: MemoryTxn | None = None


@dataclass(eq=False)
class MemoryTxn:
    """One transaction of a transactional producer: open until committed or aborted."""

    state: str = "open"  # "committed", "aborted"
    #: the partitions it wrote to (each gets a control record when it ends)
    partitions: set[tuple[str, int]] = field(default_factory=set)


@dataclass
class MemoryBroker:
    topics: dict[str, list[list[MemoryRecord]]] = field(default_factory=dict)
    committed: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    members: dict[str, list[MemoryConsumer]] = field(default_factory=dict)
    #: raised by the next getmany of any consumer (once), to test the loop's backoff
    fail_next_fetch: BaseException | None = None
    #: how many of the next consumer starts fail as aiokafka's do when no broker answers
    fail_starts: int = 0
    #: every record produced, (topic, partition, offset), in the order it was appended
    appended: list[tuple[str, int, int]] = field(default_factory=list)
    #: per group, its generation: a rebalance starts the next one
    generations: dict[str, int] = field(default_factory=dict)
    #: per partition, its first offset still there (0 where none was deleted)
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    #: per transactional id, its epoch (bumped by each producer that starts with it) and
    #: its transaction open now
    epochs: dict[str, int] = field(default_factory=dict)
    open_txns: dict[str, MemoryTxn] = field(default_factory=dict)
    #: every consumer made on it, in order
    consumers: list[MemoryConsumer] = field(default_factory=list)

    def create(self, topic: str, partitions: int = 1) -> None:
        parts = self.topics.setdefault(topic, [])
        while len(parts) < partitions:
            parts.append([])

    def produce(self, topic: str, value: bytes | None, partition: int = 0,
                key: bytes | None = None, headers: Any = (),
                txn: MemoryTxn | None = None) -> int:  # fmt: skip
        self.create(topic, partition + 1)
        log = self.topics[topic][partition]
        log.append(MemoryRecord(topic, partition, len(log), int(time.time() * 1000), 1, key,
                                value, headers=_headers(headers), txn=txn))  # fmt: skip
        self.appended.append((topic, partition, len(log) - 1))
        return len(log) - 1

    def send(self, topic: str, value: bytes | None, key: bytes | None,
             partition: int | None, headers: Any = (),
             txn: MemoryTxn | None = None) -> RecordMetadata:  # fmt: skip
        """What a producer's send does: to `partition`, else by key (the same key, the same
        partition). A topic that does not exist is refused (runwatch creates its topics
        first), as is a partition it does not have."""
        parts = self.topics.get(topic)
        if parts is None:
            raise KeyError(f"no topic {topic}")
        if partition is None:
            # Kafka's own key -> partition (murmur2), as a real producer picks it: the same
            # partition for a key on every run, not Python's salted hash()
            every = list(range(len(parts)))
            partition = _BY_KEY(key, every, every) if key is not None else 0
        if not 0 <= partition < len(parts):
            raise ValueError(f"Unrecognized partition {partition}")
        offset = self.produce(topic, value, partition, key, headers, txn)
        if txn is not None:
            txn.partitions.add((topic, partition))
        record = parts[partition][offset]
        return RecordMetadata(topic, partition, TopicPartition(topic, partition), offset,
                              record.timestamp, record.timestamp_type, -1)  # fmt: skip

    def commit_marker(self, topic: str, partition: int = 0) -> int:
        """What a transactional producer's commit leaves after its records: an offset with
        a control record in it, which consumers pass without getting it."""
        log = self.topics[topic][partition]
        log.append(MemoryRecord(topic, partition, len(log), int(time.time() * 1000), 1, None,
                                None, control=True))  # fmt: skip
        return len(log) - 1

    # -- transactions ----------------------------------------------------------------------

    def init_producer(self, transactional_id: str) -> int:
        """A producer starts with `transactional_id`: the id's next epoch (fencing every
        earlier producer of it), and the transaction an earlier one left open aborted."""
        self.end_txn(transactional_id, self.epochs.get(transactional_id, 0), commit=False)
        epoch = self.epochs[transactional_id] = self.epochs.get(transactional_id, 0) + 1
        return epoch

    def current(self, transactional_id: str, epoch: int) -> None:
        """Raise ProducerFenced unless `epoch` is the id's newest."""
        if self.epochs.get(transactional_id) != epoch:
            raise ProducerFenced()

    def end_txn(self, transactional_id: str, epoch: int, commit: bool) -> None:
        """End the id's open transaction (if any): its state, and a control record in each
        partition it wrote to."""
        txn = self.open_txns.pop(transactional_id, None)
        if txn is None:
            return
        txn.state = "committed" if commit else "aborted"
        for topic, partition in sorted(txn.partitions):
            self.commit_marker(topic, partition)

    def delete_records(self, tp: TopicPartition, before: int) -> None:
        """Records before offset `before` gone, as retention deletes them (offsets stay)."""
        end = len(self.topics[tp.topic][tp.partition])
        if not 0 <= before <= end:
            raise ValueError(f"offset {before} out of range [0, {end}]")  # as Kafka refuses
        self.starts[tp] = max(self.starts.get(tp, 0), before)

    def values(self, topic: str) -> list[bytes]:
        """Every value on `topic`, partition by partition."""
        return [r.value for part in self.topics.get(topic, []) for r in part if r.value]

    def visible(self, topic: str) -> list[MemoryRecord]:
        """The records of `topic` a read_committed consumer gets (none of an open or aborted
        transaction), partition by partition."""
        return [r for part in self.topics.get(topic, []) for r in part if r.value is not None
                and (r.txn is None or r.txn.state == "committed")]  # fmt: skip

    def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in range(len(self.topics.get(t, [])))]

    def rebalance(self, group: str) -> None:
        self.generations[group] = self.generations.get(group, 0) + 1
        for member in self.members.get(group, []):
            member.pending_rebalance = True

    async def join(self, member: MemoryConsumer) -> None:
        """Kafka's join barrier: the members of `member`'s group all rejoin (each revoked
        its partitions first) before any is given its new ones."""
        group = member.group_id or ""
        member.joined = self.generations.get(group, 0)
        deadline = time.monotonic() + JOIN_WAIT_S
        while time.monotonic() < deadline:
            generation = self.generations.get(group, 0)
            if all(m.joined >= generation for m in self.members.get(group, [])):
                return
            await asyncio.sleep(0.001)


class MemoryConsumer:
    def __init__(self, broker: MemoryBroker, group_id: str | None = None,
                 isolation_level: str = "read_uncommitted") -> None:  # fmt: skip
        self.broker = broker
        self.group_id = group_id
        self.committed_only = isolation_level == "read_committed"
        self.topics: list[str] = []
        self.listener: Any = None
        self._assignment: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.pending_rebalance = False
        self.joined = 0  # the generation this member last rejoined in
        self.started = self.stopped = False
        self.polls = 0
        self.commits = 0
        #: where aiokafka would have fetched ahead, unasked (`_fetching_ahead`)
        self.fetched_ahead: list[tuple[TopicPartition, int]] = []
        broker.consumers.append(self)

    def _fetching_ahead(self) -> None:
        """aiokafka fetches every assigned partition that is not paused in the background,
        from its position (a new one: from its start), whenever its loop turns: a request
        to the broker is such a turn. Noted, so that a reader that seeks elsewhere can be
        held to fetching nothing before it does (what it fetched would be thrown away)."""
        for tp in sorted(self._assignment - self.paused):
            self.fetched_ahead.append((tp, self.positions.get(tp, 0)))

    async def start(self) -> None:
        if self.started:
            raise AssertionError("Did you call `start` twice?")  # as aiokafka asserts
        if self.broker.fail_starts > 0:
            self.broker.fail_starts -= 1
            raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 9, 2)]")
        self.started = True

    async def stop(self) -> None:
        self.stopped = True
        if self.group_id is not None and self in self.broker.members.get(self.group_id, []):
            self.broker.members[self.group_id].remove(self)
            self.broker.rebalance(self.group_id)

    def subscribe(self, topics: Sequence[str], listener: Any = None) -> None:
        self.topics, self.listener = list(topics), listener
        if self.group_id is not None:
            self.broker.members.setdefault(self.group_id, []).append(self)
            self.broker.rebalance(self.group_id)
        else:
            self.pending_rebalance = True

    def assign(self, partitions: Sequence[Any]) -> None:
        _only_topic_partitions(partitions)
        self._assignment = set(partitions)
        group = self.group_id or ""
        self.positions = {tp: self.positions.get(tp, self.broker.committed.get((group, tp), 0))
                          for tp in self._assignment}  # fmt: skip

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        parts = self.broker.topics.get(topic)
        return set(range(len(parts))) if parts is not None else None

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    async def seek_to_beginning(self, *partitions: Any) -> None:
        for tp in partitions:
            tp = TopicPartition(*tp)
            self.positions[tp] = self.broker.starts.get(tp, 0)

    def seek(self, partition: Any, offset: int) -> None:
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("Offset must be a positive integer")
        if partition not in self._assignment:
            raise IllegalStateError(f"No current assignment for partition {partition}")
        self.positions[partition] = offset

    def pause(self, *partitions: Any) -> None:
        _only_topic_partitions(partitions)
        self.paused.update(partitions)

    def resume(self, *partitions: Any) -> None:
        _only_topic_partitions(partitions)
        self.paused.difference_update(partitions)

    async def _rebalance(self) -> None:
        self.pending_rebalance = False
        if self._assignment and self.listener is not None:
            await _call(self.listener.on_partitions_revoked, set(self._assignment))
        if self.group_id is not None:
            await self.broker.join(self)
            if self.pending_rebalance:  # a member came or went meanwhile: join again
                await self._rebalance()
                return
        everything = self.broker.partitions(self.topics)
        if self.group_id is None:
            mine = set(everything)
        else:
            members = self.broker.members[self.group_id]
            index = members.index(self)
            mine = {tp for i, tp in enumerate(everything) if i % len(members) == index}
        self._assignment = mine
        self.positions = {
            tp: self.broker.committed.get((self.group_id or "", tp), 0) for tp in mine
        }
        if self.listener is not None and self.group_id is not None:
            await _call(self.listener.on_partitions_assigned, set(mine))

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, list[Any]]:
        self.polls += 1
        if self.broker.fail_next_fetch is not None:
            err, self.broker.fail_next_fetch = self.broker.fail_next_fetch, None
            raise err
        if self.pending_rebalance:
            await self._rebalance()
        out: dict[TopicPartition, list[Any]] = {}
        left = max_records or 1_000_000
        for tp in sorted(self._assignment - self.paused):
            log = self.broker.topics.get(tp.topic, [[]] * (tp.partition + 1))[tp.partition]
            start = max(self.positions.get(tp, 0), self.broker.starts.get(tp, 0))
            self.positions[tp] = start  # before the beginning: from there ("earliest")
            taken = log[start : min(start + left, self._stable(tp, log))]
            self.positions[tp] = start + len(taken)  # past control records too
            records = [r for r in taken if not r.control
                       and (r.txn is None or r.txn.state == "committed"
                            or not self.committed_only)]  # fmt: skip
            if records:
                out[tp] = records
                left -= len(records)
        if not out:
            await asyncio.sleep(min(timeout_ms, 5) / 1000)
        return out

    async def beginning_offsets(self, partitions: Sequence[Any]) -> dict[TopicPartition, int]:
        self._fetching_ahead()
        return {TopicPartition(*tp): self.broker.starts.get(TopicPartition(*tp), 0)
                for tp in partitions}  # fmt: skip

    async def position(self, partition: Any) -> int:
        if partition not in self._assignment:
            raise IllegalStateError(f"Partition {partition} is not assigned")
        return self.positions.get(partition, 0)

    async def end_offsets(self, partitions: Sequence[Any]) -> dict[TopicPartition, int]:
        self._fetching_ahead()
        return {TopicPartition(*tp): self._end(TopicPartition(*tp)) for tp in partitions}

    def _end(self, tp: TopicPartition) -> int:
        """Where a read ends: the log's end, or, read_committed, its last stable offset."""
        parts = self.broker.topics.get(tp.topic, [])
        return self._stable(tp, parts[tp.partition]) if tp.partition < len(parts) else 0

    def _stable(self, tp: TopicPartition, log: list[MemoryRecord]) -> int:
        if self.committed_only:
            for r in log[self.broker.starts.get(tp, 0) :]:
                if r.txn is not None and r.txn.state == "open":
                    return r.offset
        return len(log)

    def highwater(self, partition: Any) -> int | None:
        parts = self.broker.topics.get(partition.topic, [])
        return len(parts[partition.partition]) if partition.partition < len(parts) else 0

    def last_poll_timestamp(self, partition: Any) -> int | None:
        return int(time.time() * 1000)

    async def commit(self, offsets: Any = None) -> None:
        if self.group_id is None:
            raise IllegalOperation("Requires group_id")
        if not self._assignment:
            raise IllegalStateError("No partitions assigned")
        given = offsets if offsets is not None else self.positions
        for tp in given:
            if tp not in self._assignment:
                raise IllegalStateError(f"Partition {tp} is not assigned")
        if self.pending_rebalance or self.joined < self.broker.generations.get(self.group_id, 0):
            raise CommitFailedError("the group has rebalanced since this member joined")
        self.commits += 1
        for tp, pos in given.items():
            self.broker.committed[(self.group_id, tp)] = pos


class MemoryProducer:
    """The part of aiokafka's producer runwatch uses: `send_and_wait` to a partition (or by
    key: the same key, the same partition), after `start`."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker
        self.started = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def send_and_wait(self, topic: str, value: bytes | None = None,
                            key: bytes | None = None, partition: int | None = None,
                            headers: Any = None) -> RecordMetadata:  # fmt: skip
        if not self.started:
            raise IllegalStateError("the producer is not started")
        return self.broker.send(topic, value, key, partition, headers)


def _headers(headers: Any) -> tuple[tuple[str, bytes], ...]:
    """Headers as Kafka keeps them: (str key, bytes value) pairs; anything else is refused,
    as aiokafka's producer refuses it."""
    out = tuple((key, value) for key, value in headers or ())
    if not all(isinstance(k, str) and isinstance(v, bytes) for k, v in out):
        raise TypeError(f"headers must be (str, bytes) pairs, not {out!r}")
    return out


class MemoryTxnProducer:
    """aiokafka's producer with a `transactional_id`, as the worker publishes with it:
    `start` (fences every earlier producer of the id), `begin_transaction`, `send` (within
    one), `commit_transaction` / `abort_transaction`, `stop`. A fenced producer's calls
    raise ProducerFenced; `fail_commits` makes the next commits fail as a broker away does
    (an error short of fencing: the transaction can be aborted and tried again)."""

    def __init__(self, broker: MemoryBroker, transactional_id: str) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self.epoch: int | None = None
        self.txn: MemoryTxn | None = None
        self.fail_commits = 0
        self.commits = 0

    async def start(self) -> None:
        self.epoch = self.broker.init_producer(self.transactional_id)

    @property
    def usable(self) -> bool:
        """Started, and not fenced since."""
        return (
            self.epoch is not None and self.broker.epochs.get(self.transactional_id) == self.epoch
        )

    async def stop(self) -> None:
        self.epoch = None

    def _current(self) -> int:
        if self.epoch is None:
            raise IllegalStateError("the producer is not started")
        self.broker.current(self.transactional_id, self.epoch)
        return self.epoch

    async def begin_transaction(self) -> None:
        self._current()
        if self.txn is not None:
            raise IllegalOperation("a transaction is open already")
        self.txn = self.broker.open_txns[self.transactional_id] = MemoryTxn()

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> asyncio.Future[RecordMetadata]:  # fmt: skip
        self._current()
        if self.txn is None:
            raise IllegalOperation("Can't send messages while not in transaction")
        done: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        done.set_result(self.broker.send(topic, value, key, partition, headers or (), self.txn))
        return done

    async def commit_transaction(self) -> None:
        epoch = self._current()
        if self.fail_commits > 0:
            self.fail_commits -= 1
            raise KafkaConnectionError("Connection at 127.0.0.1:9 closed")
        self.broker.end_txn(self.transactional_id, epoch, commit=True)
        self.txn = None
        self.commits += 1

    async def abort_transaction(self) -> None:
        epoch = self._current()
        self.broker.end_txn(self.transactional_id, epoch, commit=False)
        self.txn = None


def _only_topic_partitions(partitions: Any) -> None:
    if not all(isinstance(p, TopicPartition) for p in partitions):
        raise TypeError("partitions must be TopicPartition namedtuples")


async def _call(callback: Any, arg: Any) -> None:
    result = callback(arg)
    if inspect.isawaitable(result):
        await result


#: What AIOKafkaConsumer accepts as tuning: a name it lacks would fail there, so here too.
_TUNING = frozenset(inspect.signature(AIOKafkaConsumer).parameters) - {"topics", "loop"}
_PRODUCER_TUNING = frozenset(inspect.signature(AIOKafkaProducer).parameters) - {"loop"}


@dataclass
class MemoryConnection:
    """A role's `Connects` (runwatch.stream.kafka.clients) to a `MemoryBroker`: each
    consumer it makes reads the broker. aiokafka's tuning is checked by name as aiokafka
    would take it, kept on the connection (`tuning`, one dict per consumer made), and not
    otherwise needed."""

    broker: MemoryBroker
    tuning: list[dict[str, Any]] = field(default_factory=list)
    #: every producer it made, in order
    producers: list[MemoryTxnProducer] = field(default_factory=list)

    def consumer(self, *, group: str | None = None, **tuning: Any) -> MemoryConsumer:
        unknown = sorted(set(tuning) - _TUNING)
        if unknown:
            raise TypeError(f"AIOKafkaConsumer takes no {', '.join(unknown)}")
        self.tuning.append(tuning)
        # read_committed unless told otherwise, as runwatch's clients read
        isolation = tuning.get("isolation_level", "read_committed")
        return MemoryConsumer(self.broker, group, isolation)

    def producer(self, transactional_id: str, **tuning: Any) -> MemoryTxnProducer:
        """A transactional producer of the id (not started), as `clients.Connection`'s;
        its tuning checked by name as aiokafka would take it."""
        unknown = sorted(set(tuning) - _PRODUCER_TUNING)
        if unknown:
            raise TypeError(f"AIOKafkaProducer takes no {', '.join(unknown)}")
        producer = MemoryTxnProducer(self.broker, transactional_id)
        self.producers.append(producer)
        return producer

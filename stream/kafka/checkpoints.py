"""Where the worker keeps its checkpoints: `runwatch.checkpoints`, a compacted topic.

Why a topic of our own and not Faust tables: a checkpoint is one value per (group,
partition) that is replaced whole every half minute and read once per takeover. A compacted
topic keeps exactly that, on the broker every worker already reaches, with no local state to
lose with a pod; a Faust table would keep it in a changelog plus a local RocksDB/memory copy
that Faust recovers -- by replaying that changelog -- before the app starts, the cost we
are removing. The checkpoint of events partition p is written to checkpoints partition p
(mod the topic's partitions), keyed by group, topic and partition, so a takeover reads one
partition, from its end backwards, and stops at the newest record with its key.

A rebalance does not wait for checkpoints: a worker whose partitions are revoked writes a
small marker per partition (`handover_key`, PENDING) and rejoins at once; once the new
assignment says which partitions went elsewhere, it checkpoints those and settles the
markers of those it kept. A takeover that finds a PENDING marker newer than the checkpoint
waits (a bounded while) for the checkpoint that follows it. So a rebalance -- a member that
died included -- holds every member's live partitions only as long as the group protocol
does, and a partition that moves still starts from its state as the old owner left it.

Records are single values up to `MAX_BYTES` (the topic's max.message.bytes, the producer's
request limit): a checkpoint is compressed (`runwatch.stream.checkpoint`), and its size per
live run is reported, so one over the limit is a figure to act on, not a surprise.

`KafkaCheckpoints` is the worker's `CheckpointStore` (`runwatch.stream.checkpointer`): the one
place that writes this topic, checkpoints and handover markers alike, each through its
partition's publisher (`publish.PartitionPublisher`), after what that partition published.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.clients import Connects
from runwatch.stream.kafka.consume import TP, partitions_of

#: The largest checkpoint record (topic max.message.bytes, producer max_request_size).
MAX_BYTES = 64 << 20

#: The checkpoints topic's settings: compacted, segments small enough to be compacted soon
#: (a takeover reads the uncompacted tail), records as large as a checkpoint may be.
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "max.message.bytes": str(MAX_BYTES),
    "segment.bytes": str(MAX_BYTES),
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),
}


def checkpoint_key(group: str, topic: str, partition: int) -> bytes:
    """Whose checkpoint a record is: a worker group's, of one partition of one topic."""
    return f"{group}|{topic}|{partition}".encode()


#: Offsets one record written in a transaction of its own takes: itself and the commit
#: marker after it (every record of the checkpoints topic is one, `publish.py`).
RECORD = 2

#: The longest a handover may take: a takeover waits this long for a checkpoint its
#: previous owner promised, and a stopping worker's checkpoints hold its stop this long.
HANDOVER_S = 10.0

#: A handover marker's values: the previous owner is writing the partition's checkpoint
#: (a takeover waits for it), or it is not (it kept the partition, or could not).
PENDING, SETTLED = b"pending", b"settled"


def handover_key(group: str, topic: str, partition: int) -> bytes:
    """The key of the previous owner's word on a handover of that partition: a key of its
    own, so that compaction keeps it beside the checkpoint, not instead of it."""
    return b"handover|" + checkpoint_key(group, topic, partition)


class _Sends(Protocol):
    async def checkpoint(self, key: bytes, data: bytes, target: int) -> None: ...


class KafkaCheckpoints:
    """A worker group's checkpoints of the partitions of `topics.events`, on
    `topics.checkpoints`. `publisher(p)`: the publisher of events partition p, which each
    record of that partition goes out through."""

    def __init__(
        self, kafka: Connects, topics: Topics, group: str, publisher: Callable[[int], _Sends]
    ) -> None:
        self.kafka = kafka
        self.topics = topics
        self.group = group
        self.publisher = publisher
        #: the checkpoints topic's partitions (`runwatch worker` learns them as it starts)
        self.partitions = 1

    async def read(self, partition: int) -> bytes | None:
        return (await self.newest(partition)).value

    async def newest(self, partition: int) -> Found:
        """The newest checkpoint of `partition`, waiting up to HANDOVER_S for one its
        previous owner promised (`latest`)."""
        key = checkpoint_key(self.group, self.topics.events, partition)
        promised = handover_key(self.group, self.topics.events, partition)
        return await latest(self.kafka, self.topics.checkpoints, key, partition, promised,
                            HANDOVER_S)  # fmt: skip

    async def write(self, partition: int, data: bytes) -> None:
        """Store `data` as `partition`'s newest checkpoint; raises ValueError when it is over
        MAX_BYTES, and whatever the producer raises."""
        if len(data) > MAX_BYTES:
            raise ValueError(f"{len(data)} bytes, over {MAX_BYTES}")
        await self._put(partition, checkpoint_key(self.group, self.topics.events, partition), data)

    async def mark(self, partition: int, word: bytes) -> None:
        """The handover marker of `partition`: PENDING or SETTLED."""
        await self._put(partition, handover_key(self.group, self.topics.events, partition), word)

    async def _put(self, partition: int, key: bytes, value: bytes) -> None:
        await self.publisher(partition).checkpoint(key, value, partition % self.partitions)


@dataclass
class Found:
    """A partition's newest checkpoint (None: there is none), and how long the search
    waited for one a handover promised."""

    value: bytes | None
    waited: float = 0.0


async def latest(
    kafka: Connects,
    topic: str,
    key: bytes,
    partition: int,
    handover: bytes | None = None,
    wait_s: float = 0.0,
) -> Found:
    """The newest value of `key` in `partition` of `topic`, read from the end backwards (a
    few records at a time, then more); None when there is none (or no such topic). Where
    a PENDING `handover` marker is newer than it, first up to `wait_s` (counted from the
    marker's time, so an old promise is not waited on) for the checkpoint that follows."""
    reader = kafka.consumer(max_partition_fetch_bytes=MAX_BYTES, fetch_max_bytes=MAX_BYTES)
    await reader.start()
    try:
        partitions = await partitions_of(reader, topic)
        if not partitions:
            return Found(None)
        tp = TP(topic, partition % len(partitions))
        reader.assign([tp])
        # fetched only where sought (`_fetched`): assigned, aiokafka fetches from the
        # partition's start at once -- up to MAX_BYTES of old checkpoints, which the seek
        # then throws away (bench/RESULTS.md "fleet")
        reader.pause(tp)
        begin = (await reader.beginning_offsets([tp]))[tp]
        stop = (await reader.end_offsets([tp]))[tp]
        keys = {key} if handover is None else {key, handover}
        waited = 0.0
        # its own partition, when the topics match: the newest record is it, followed by
        # its transaction's commit marker (a window of one held the marker alone)
        window = RECORD
        while stop > begin:
            start = max(begin, stop - window)
            found = await _newest(reader, tp, keys, start, stop)
            if found is None:
                stop, window = start, window * 4
                continue
            if found.key == key:
                return Found(found.value, waited)
            keys = {key}  # a marker: only the checkpoint before it counts now
            left = min(wait_s, found.timestamp / 1000.0 + wait_s - time.time())
            if found.value == PENDING and left > 0:
                started = time.monotonic()
                value = await _follow(reader, tp, key, found.key, found.offset + 1, left)
                waited = time.monotonic() - started
                if value is not None:
                    return Found(value, waited)
            stop, window = found.offset, RECORD
        return Found(None, waited)
    finally:
        await reader.stop()


async def _newest(reader: Any, tp: TP, keys: set[bytes], start: int, stop: int) -> Any:
    """The newest record of one of `keys` with a value among offsets [start, stop)
    (compaction leaves gaps)."""
    reader.seek(tp, start)
    found: Any = None
    position = start
    while position < stop:
        batch = await _fetched(reader, tp, 1000)
        records = batch.get(tp, [])
        if not records:
            position = await reader.position(tp)
            continue
        for record in records:
            if record.offset >= stop:
                return found
            if record.key in keys and record.value is not None:
                found = record
        # past the transaction markers fetched with them: a poll for the marker alone would
        # wait out its whole timeout, as no record comes
        position = max(records[-1].offset + 1, await reader.position(tp))
    return found


async def _fetched(reader: Any, tp: TP, timeout_ms: int) -> Any:
    """One poll of `tp`, which is fetched only meanwhile: paused again before anything else
    runs, so that aiokafka fetches nothing ahead -- the next read seeks elsewhere (back, a
    window before), and a fetch ahead at the end would hold that seek for the broker's fetch
    wait."""
    reader.resume(tp)
    try:
        return await reader.getmany(tp, timeout_ms=timeout_ms)
    finally:
        reader.pause(tp)


async def _follow(
    reader: Any, tp: TP, key: bytes, marker: bytes, position: int, seconds: float
) -> bytes | None:
    """What comes after a PENDING marker, for up to `seconds`: the checkpoint of `key` it
    promised (the newest one read), or None once the marker is settled or time is up."""
    reader.seek(tp, position)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        batch = await _fetched(reader, tp, max(1, int(min(left, 0.5) * 1000)))
        found: bytes | None = None
        for record in batch.get(tp, []):
            if record.value is None:
                continue
            if record.key == key:
                found = record.value
            elif record.key == marker and record.value != PENDING and found is None:
                return None  # the promise was withdrawn: the checkpoint before stands
        if found is not None:
            return found
    return None

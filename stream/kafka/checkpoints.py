"""Where the worker keeps its checkpoints: `runwatch.checkpoints`, a compacted topic.

Why a topic of our own and not Faust tables: a checkpoint is one value per (group,
partition) that is replaced whole every half minute and read once per takeover. A compacted
topic keeps exactly that, on the broker every worker already reaches, with no local state to
lose with a pod; a Faust table would keep it in a changelog plus a local RocksDB/memory copy
that Faust recovers -- by replaying that changelog -- before the app starts, the cost we
are removing. The checkpoint of events partition p is written to checkpoints partition p
(mod the topic's partitions), keyed by group, topic and partition, so a takeover reads one
partition, from its end backwards, and stops at the newest record with its key.

Records are single values up to `MAX_BYTES` (the topic's max.message.bytes, the producer's
request limit): a checkpoint is compressed (`runwatch.stream.checkpoint`), and its size per
live run is reported, so one over the limit is a figure to act on, not a surprise.
"""

from __future__ import annotations

from typing import Any

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


async def latest(kafka: Connects, topic: str, key: bytes, partition: int) -> bytes | None:
    """The newest value of `key` in `partition` of `topic`, read from the end backwards
    (a few records at a time, then more); None when there is none (or no such topic)."""
    reader = kafka.consumer(max_partition_fetch_bytes=MAX_BYTES, fetch_max_bytes=MAX_BYTES)
    await reader.start()
    try:
        partitions = await partitions_of(reader, topic)
        if not partitions:
            return None
        tp = TP(topic, partition % len(partitions))
        reader.assign([tp])
        begin = (await reader.beginning_offsets([tp]))[tp]
        stop = (await reader.end_offsets([tp]))[tp]
        window = 1  # its own partition, when the topics match: the newest record is it
        while stop > begin:
            start = max(begin, stop - window)
            found = await _newest(reader, tp, key, start, stop)
            if found is not None:
                return found
            stop, window = start, window * 4
        return None
    finally:
        await reader.stop()


async def _newest(reader: Any, tp: TP, key: bytes, start: int, stop: int) -> bytes | None:
    """The newest value of `key` among offsets [start, stop) (compaction leaves gaps)."""
    reader.seek(tp, start)
    found: bytes | None = None
    position = start
    while position < stop:
        batch = await reader.getmany(tp, timeout_ms=1000)
        records = batch.get(tp, [])
        if not records:
            position = await reader.position(tp)
            continue
        for record in records:
            if record.offset >= stop:
                return found
            if record.key == key and record.value is not None:
                found = record.value
        position = records[-1].offset + 1
    return found

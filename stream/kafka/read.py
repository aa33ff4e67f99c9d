"""Reading a topic from its start, outside any consumer group, through the consuming loop:
what a worker re-reads when it takes over partitions, and what `runwatch.alerts` and the
dead-letter topic already hold -- all of them, or only what came after a checkpoint was made
(`output_ends`), so that a takeover reads the checkpoint interval's output, not the topics'
whole retention (a flood of invalid events would otherwise slow every later takeover).

Everything is read `read_committed`. What the output topics hold is read to their log's end
as it is once the takeover has fenced the previous owner, not to the last stable offset:
another partition's transaction still open would end the read before what the previous
owner committed after it began, and that would be published again."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.kafka.clients import Connects
from runwatch.stream.kafka.consume import (
    TP,
    ConsumingLoop,
    Group,
    Handler,
    Partitions,
    Record,
    Until,
    ends_of,
)
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.refused import WHOLE

Batch = Callable[[list[Any]], Awaitable[None] | None]


class _Each(Handler):
    def __init__(self, each: Batch) -> None:
        self.each = each

    async def handle(self, records: list[Record]) -> None:
        result = self.each(records)
        if result is not None:
            await result


async def read_topic(
    kafka: Connects,
    topic: str,
    each: Batch,
    *,
    partitions: Iterable[int] | None = None,
    start: Mapping[int, int] | None = None,
    until: Until = "end",
    stop: Callable[[], bool] = lambda: False,
    ends: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Hand `each` one partition's records at a time, in offset order, from the start of
    `topic` (the given partitions, else all; from the offsets in `start` where given) to its
    end (see `Until`; `ends`: to those offsets), or until `stop()`; return where each
    partition was read up to (past the records retention deleted, too: a partition's first
    offset left is where it goes on)."""
    source: Group | Partitions
    if until == "stopped" and partitions is None:  # follow: also partitions made later
        source = Group((topic,))  # a consumer without a group is assigned every one
    else:
        numbers = tuple(partitions) if partitions is not None else None
        source = Partitions(topic, numbers, start, ends)
    reader = kafka.consumer()
    loop = ConsumingLoop(reader, source, _Each(each), until=until, max_records=20_000,
                         poll_ms=500, stop=stop, name=f"reading {topic}")  # fmt: skip
    await loop.run()
    return {tp.partition: offset for tp, offset in loop.read.items()}


#: Per output topic (runwatch.alerts, the dead-letter topic), per partition, the offset its
#: next record gets: where a checkpoint's output ends (plain data, kept in its position).
Ends = dict[str, dict[int, int]]


async def output_ends(kafka: Connects, topics: Topics, *, logs: bool = False) -> Ends:
    """Where runwatch.alerts and the dead-letter topic end now (read_committed: before any
    transaction still open; `logs`: where their logs end, open transactions included).
    Taken before a checkpoint's state, it bounds what a takeover from it must read:
    everything the state made was on its way to those topics by then, so what is missing
    from them comes after."""
    reader = kafka.consumer(isolation_level="read_uncommitted") if logs else kafka.consumer()
    await reader.start()
    try:
        ends = await ends_of(reader, [topics.alerts, topics.dlq])
    finally:
        await reader.stop()
    out: Ends = {topics.alerts: {}, topics.dlq: {}}
    for tp, end in ends.items():
        out[tp.topic][tp.partition] = end
    return out


def earliest(marks: Iterable[Ends | None]) -> Ends | None:
    """Where to read from to cover every one of `marks`: None if one is None (a checkpoint
    without them: from the start); an empty one (a partition that never had a record) needs
    nothing; a partition one of them lacks (added after it was made), from 0."""
    known: list[Ends] = []
    for mark in marks:
        if mark is None:
            return None
        if mark:
            known.append(mark)
    out: Ends = {}
    for topic in {t for mark in known for t in mark}:
        parts = {p for mark in known for p in mark.get(topic, {})}
        out[topic] = {p: min(mark.get(topic, {}).get(p, 0) for mark in known) for p in parts}
    return out


@dataclass
class Published:
    """What a takeover learned of the output topics: the transitions on runwatch.alerts, per
    events partition the place of the last dead letter on the DLQ (`Refused.place`: offset,
    line of a batch record), and how many records it read for that."""

    alerts: PublishedAlerts
    dead_upto: dict[int, tuple[int, int]]
    read: int = 0


async def read_published(kafka: Connects, topics: Topics, since: Ends | None = None) -> Published:
    """What runwatch.alerts and the DLQ hold -- from `since` on where given (the earlier
    records are a checkpoint's: `PublishedAlerts.checkpointed`), else all of it. A topic
    made anew since (it ends before `since`) is read from its start."""
    out = Published(PublishedAlerts(), {})

    def alerts(records: list[Any]) -> None:
        out.read += len(records)
        for r in records:
            with contextlib.suppress(InvalidAlert):
                out.alerts.add(Alert.from_json(r.value or b"{}"))

    def letters(records: list[Any]) -> None:
        out.read += len(records)
        for r in records:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                letter = orjson.loads(r.value or b"{}")
                if letter.get("topic") == topics.events:
                    line = letter.get("line")  # (a whole record's letter has none)
                    place = (int(letter["offset"]), WHOLE if line is None else int(line))
                    p = int(letter["partition"])
                    out.dead_upto[p] = max(out.dead_upto.get(p, (-1, 0)), place)

    logs = await output_ends(kafka, topics, logs=True)
    for topic, each in ((topics.alerts, alerts), (topics.dlq, letters)):
        start = since.get(topic, {}) if since is not None else None  # (none: from 0)
        await read_topic(kafka, topic, each, start=start, ends=logs.get(topic, {}))
    return out


async def end_offset(kafka: Connects, topic: str, partition: int) -> int:
    """The offset the next record of `partition` of `topic` will get."""
    reader = kafka.consumer()
    await reader.start()
    try:
        return (await ends_of(reader, [topic]))[TP(topic, partition)]
    finally:
        await reader.stop()

"""Reading a topic from its start, outside any consumer group, through the consuming loop:
what a worker re-reads when it takes over partitions, and what `runwatch.alerts` and the
dead-letter topic already hold."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
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
)
from runwatch.stream.live import PublishedAlerts

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
) -> None:
    """Hand `each` one partition's records at a time, in offset order, from the start of
    `topic` (the given partitions, else all; from the offsets in `start` where given) to its
    end (see `Until`), or until `stop()`."""
    source: Group | Partitions
    if until == "stopped" and partitions is None:  # follow: also partitions made later
        source = Group((topic,))  # a consumer without a group is assigned every one
    else:
        numbers = tuple(partitions) if partitions is not None else None
        source = Partitions(topic, numbers, start)
    reader = kafka.consumer()
    loop = ConsumingLoop(reader, source, _Each(each), until=until, max_records=20_000,
                         poll_ms=500, stop=stop, name=f"reading {topic}")  # fmt: skip
    await loop.run()


async def read_published(kafka: Connects, topics: Topics) -> tuple[PublishedAlerts, dict[int, int]]:
    """What runwatch.alerts holds, and per events partition the last offset on the DLQ."""
    published = PublishedAlerts()

    def alerts(records: list[Any]) -> None:
        for r in records:
            with contextlib.suppress(InvalidAlert):
                published.add(Alert.from_json(r.value or b"{}"))

    dead_upto: dict[int, int] = {}

    def letters(records: list[Any]) -> None:
        for r in records:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                letter = orjson.loads(r.value or b"{}")
                if letter.get("topic") == topics.events:
                    p, off = int(letter["partition"]), int(letter["offset"])
                    dead_upto[p] = max(dead_upto.get(p, -1), off)

    await read_topic(kafka, topics.alerts, alerts)
    await read_topic(kafka, topics.dlq, letters)
    return published, dead_upto


async def end_offset(kafka: Connects, topic: str, partition: int) -> int:
    """The offset the next record of `partition` of `topic` will get."""
    reader = kafka.consumer()
    await reader.start()
    try:
        tp = TP(topic, partition)
        return int((await reader.end_offsets([tp]))[tp])
    finally:
        await reader.stop()

"""The worker's checkpoints (`stream/kafka/checkpointing.py`): made after everything they
cover is committed, stored through the partition's publisher, due by the one
`Checkpointer`, and never of a partition given away meanwhile; run against the in-memory
Kafka double (`worker_double`)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

import pytest
from worker_double import NAN, TOPICS, alerts, broker, markers, send, step, until, worker

from runwatch.stream import checkpoint
from runwatch.stream.checkpointer import Checkpointer
from runwatch.stream.kafka.checkpointing import Checkpointing
from runwatch.stream.live import LiveDriver


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_an_alert_is_published_before_its_breaker_view_and_its_checkpoint(fork: bool) -> None:
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said, fork) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            send(b, 0, b"not json")
            await until(lambda: b.visible(TOPICS.dlq), "the bad record dead-lettered")
            assert await w.checkpointing.checkpoint(0, time.time())

    asyncio.run(scenario())
    order = [topic for topic, _, _ in b.appended if topic != TOPICS.events]
    assert order.index(TOPICS.alerts) < order.index(TOPICS.breaker), order
    assert order[-1] == TOPICS.checkpoints, order  # after everything it covers
    # in a transaction of its own, after the ones of everything it covers were committed
    (stored,) = [r for r in b.visible(TOPICS.checkpoints) if not r.key.startswith(b"handover")]
    before = b.visible(TOPICS.alerts) + b.visible(TOPICS.dlq) + b.visible(TOPICS.breaker)
    assert stored.txn is not None
    assert all(r.txn is not stored.txn for r in before)
    (letter,) = [json.loads(v) for v in b.values(TOPICS.dlq)]
    assert (letter["topic"], letter["partition"], letter["offset"]) == (TOPICS.events, 0, 2)
    assert letter["raw"] == "not json"


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_partition_given_away_while_the_output_ends_are_asked_is_not_checkpointed(
    fork: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint asks the broker where the output topics end before it takes the state;
    a partition the group gave to another worker meanwhile is that worker's now, and a
    checkpoint of the state left behind would replace the newer ones it stores."""
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said, fork) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            ask = w.checkpointing._output_ends

            async def given_away_meanwhile() -> Any:
                ends = await ask()
                w.drivers.pop(0)
                return ends

            monkeypatch.setattr(w.checkpointing, "_output_ends", given_away_meanwhile)
            assert not await w.checkpointing.checkpoint(0, time.time())

    asyncio.run(scenario())
    assert markers(b) == [], markers(b)


class Store:
    """The checkpoint store as `Checkpointing` writes to it; `failing`: raise as a broker
    away would."""

    def __init__(self) -> None:
        self.written: list[tuple[int, bytes]] = []
        self.failing = False

    async def write(self, partition: int, data: bytes) -> None:
        if self.failing:
            raise ConnectionError("the broker is away")
        self.written.append((partition, data))


def live(records: int) -> LiveDriver:
    """A driver of partition 0 that applied `records` steps of r1."""
    d = LiveDriver(topic=TOPICS.events)
    now = time.time()
    for i in range(records):
        d.feed([(json.dumps(step("r1", i, 0.5)).encode(), now, i)])
    return d


def checkpointing(
    drivers: dict[int, LiveDriver], store: Store, fork: bool = False
) -> Checkpointing:
    async def ends() -> dict[str, dict[int, int]]:
        return {TOPICS.alerts: {0: 5}}

    return Checkpointing(Checkpointer(30.0), store, drivers, asyncio.Lock(), fork=fork,  # type: ignore[arg-type]
                         ends=ends, prune=lambda *_: None)  # fmt: skip


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_due_partition_is_stored_with_the_offset_and_the_output_ends_it_covers(
    fork: bool,
) -> None:
    store, d = Store(), live(3)
    c = checkpointing({0: d}, store, fork=fork)

    async def scenario() -> None:
        assert c.due(1000.0) == [0]
        await c.turn(1000.0)
        await c.idle()

    asyncio.run(scenario())
    ((partition, data),) = store.written
    fresh = LiveDriver(topic=TOPICS.events)
    assert partition == 0
    assert checkpoint.load(data, fresh) == {"offset": 3, "output": {TOPICS.alerts: {0: 5}}}
    assert "r1" in fresh.engine.runs
    assert c.due(1000.0, handover=True) == []  # nothing new since


def test_a_checkpoint_not_stored_is_counted_due_an_interval_later_and_handed_over_at_once() -> None:
    store, d = Store(), live(2)
    c = checkpointing({0: d}, store)
    store.failing = True

    async def scenario() -> tuple[bool, list[int], list[int]]:
        stored = await c.checkpoint(0, 1000.0)
        return stored, c.due(1001.0), c.due(1001.0, handover=True)

    assert asyncio.run(scenario()) == (False, [], [0])
    assert store.written == []


def test_a_round_of_due_partitions_is_made_by_one_child_and_stored_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forked, every partition due in a turn is pickled by one child (a fork costs the live
    path for every page it writes while the child lives); each is stored as its own, with
    its own offset; one whose state cannot be pickled is not, the others are."""
    from runwatch.stream.kafka import checkpointing as module

    store = Store()
    drivers = {0: live(3), 1: live(5), 2: live(4)}
    monkeypatch.setattr(drivers[2], "dump_state", lambda: {"unpicklable": lambda: None})
    c = checkpointing(drivers, store, fork=True)
    forks: list[int] = []
    made = module.Snapshot

    def counted(parts: Any, fork: bool) -> Any:
        forks.append(len(parts))
        return made(parts, fork=fork)

    monkeypatch.setattr(module, "Snapshot", counted)

    async def scenario() -> None:
        assert c.due(1000.0) == [0, 1, 2]
        await c.turn(1000.0)
        await c.idle()

    asyncio.run(scenario())
    assert forks == [3]
    assert [p for p, _ in store.written] == [0, 1]
    for p, data in store.written:
        assert checkpoint.load(data, LiveDriver(topic=TOPICS.events))["offset"] == {0: 3, 1: 5}[p]
    assert c.due(1000.0, handover=True) == [2]  # not stored: the next turn tries again

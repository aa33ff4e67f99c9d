"""Handovers (`stream/kafka/handover.py`): a worker whose partitions move -- on a revoke, at
the assignment after it, at a stop -- leaves their new owners a checkpoint of the state as it
stood, and never an older one than what they stored; run against the in-memory Kafka double
(`worker_double`)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from worker_double import (
    FINE,
    NAN,
    PARTITIONS,
    TOPICS,
    alerts,
    broker,
    ids,
    markers,
    send,
    step,
    took_over,
    until,
    worker,
)

from runwatch.stream.kafka import handover as handover_module
from runwatch.stream.kafka.checkpoints import PENDING, SETTLED
from runwatch.stream.kafka.consume import TP


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_worker_that_stops_hands_its_partitions_over_checkpointed(fork: bool) -> None:
    """A rolling restart: no checkpoint was due (the interval is off here), yet the next
    worker starts from one that covers everything read, and re-reads nothing."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, fork):
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
        async with worker(b, second):
            send(b, 0, step("r1", 3, 0.4))
            await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert len(set(ids(b))) == 2
    took_over(second, 0)


def test_a_revoke_promises_a_handover_and_rejoins_without_a_checkpoint() -> None:
    """The group takes the partitions back (a worker joined or died): the worker promises
    a checkpoint of each with something new since its last one, and makes none yet; the
    assignment says it kept them, and it withdraws the promise."""
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            await w.revoked(set())
            assert markers(b) == [(0, PENDING)]  # partition 1 has nothing new
            await w.revoked(set())  # promised already
            assert markers(b) == [(0, PENDING)]
            w.assigned({TP(TOPICS.events, p) for p in range(PARTITIONS)})
            await until(lambda: markers(b) == [(0, PENDING), (0, SETTLED)], "settled")

    asyncio.run(scenario())


def test_a_partition_that_moves_is_handed_over_after_the_assignment() -> None:
    """A second worker joins: the first promised partition 1 on the revoke and, told at the
    assignment that it went to the newcomer, checkpoints it as it stood; the newcomer waits
    for that checkpoint and re-reads nothing."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first):
            send(b, 1, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            async with worker(b, second):
                send(b, 1, step("r1", 3, 0.4))
                await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert markers(b)[:2] == [(1, PENDING), (1, b"checkpoint")], markers(b)
    assert len(set(ids(b))) == 2
    took_over(second, 1)


def test_the_handovers_of_one_assignment_are_made_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every partition went elsewhere: each new owner waits for its own handover, so none
    waits for another's pickling -- each checkpoint here goes on only once every one has
    begun (one after another, the first would wait out the new owner's deadline)."""
    monkeypatch.setattr(handover_module, "HANDOVER_S", 3.0)
    b, said = broker(), []
    began: set[int] = set()

    async def scenario() -> None:
        everyone = asyncio.Event()
        async with worker(b, said) as w:
            for p in range(PARTITIONS):
                send(b, p, step(f"r{p}", 1, 0.5))
            await until(lambda: all(d.position is not None for d in w.drivers.values()),
                        "news in every partition")  # fmt: skip
            checkpoint = w.checkpointing.of

            async def together(partition: int, *args: Any) -> bool:
                began.add(partition)
                if len(began) == PARTITIONS:
                    everyone.set()
                await everyone.wait()
                return await checkpoint(partition, *args)

            monkeypatch.setattr(w.checkpointing, "of", together)
            await w.revoked(set())
            w.assigned(set())  # all went elsewhere
            await until(lambda: not w.handover.settling, "the handovers made")

    asyncio.run(scenario())
    stored = [p for p, word in markers(b) if word == b"checkpoint"]
    assert sorted(stored) == list(range(PARTITIONS)), markers(b)


def test_a_handover_its_new_owner_stopped_waiting_for_is_not_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new owner waits HANDOVER_S from the promise, then goes on from the checkpoint
    before and stores a newer one; an old owner too slow to checkpoint by then stores
    nothing, lest its older state replace that."""
    monkeypatch.setattr(handover_module, "HANDOVER_S", 0.2)
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            gate = asyncio.Event()  # never set: a pickling that takes for ever
            checkpoint = w.checkpointing.of

            async def slow(*args: Any) -> bool:
                await gate.wait()
                return await checkpoint(*args)

            monkeypatch.setattr(w.checkpointing, "of", slow)
            await w.revoked(set())
            w.assigned(set())  # all went elsewhere
            await until(lambda: not w.handover.settling, "the handover given up")

    asyncio.run(scenario())
    assert markers(b) == [(0, PENDING)], markers(b)


def test_a_worker_stopping_before_its_assignment_keeps_its_promises() -> None:
    """Revoked, then stopped before the assignment came: the promised checkpoint is made
    on the way out, so that no successor waits on a promise left open."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            await w.revoked(set())
        async with worker(b, second):
            send(b, 0, step("r1", 3, 0.4))
            await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert markers(b)[:2] == [(0, PENDING), (0, b"checkpoint")], markers(b)
    took_over(second, 0, rebuilt=None)
    assert not any("waited" in line for line in second), second


class Checkpoints:
    """What a handover asks of the worker's checkpointing: which partitions are due, a
    checkpoint of a driver (`stores`: whether it is stored), the ones under way."""

    def __init__(self, drivers: dict[int, Any], stores: bool = True) -> None:
        self.drivers = drivers
        self.stores = stores
        self.made: list[int] = []

    def due(self, now: float, handover: bool = False) -> list[int]:
        assert handover
        return sorted(self.drivers)

    async def of(self, partition: int, driver: Any, now: float) -> bool:
        self.made.append(partition)
        return self.stores

    async def idle(self) -> None:
        pass

    async def all(self, partitions: list[int], now: float) -> None:
        self.made += partitions


class Marks:
    def __init__(self) -> None:
        self.marks: list[tuple[int, bytes]] = []

    async def mark(self, partition: int, word: bytes) -> None:
        self.marks.append((partition, word))


class Publishing:
    """The worker's publisher as a handover uses it: commits, and the handovers done."""

    def __init__(self) -> None:
        self.commits = 0
        self.done: list[int] = []  # the partitions whose handovers were done

    async def commit(self) -> None:
        self.commits += 1

    def handed(self, partition: int) -> None:
        self.done.append(partition)


def handover(stores: bool = True) -> tuple[Any, Checkpoints, Marks, Publishing]:
    checkpoints, marks = Checkpoints({0: "d0", 1: "d1", 2: "d2"}, stores), Marks()
    publishing = Publishing()
    h = handover_module.Handover(checkpoints, marks, publishing)  # type: ignore[arg-type]
    return h, checkpoints, marks, publishing


def test_a_promise_is_kept_by_a_settled_marker_a_checkpoint_or_a_settled_marker_instead() -> None:
    """Kept: SETTLED; went elsewhere: its checkpoint; went elsewhere and the checkpoint was
    not stored: SETTLED, so that its new owner waits no longer."""
    h, checkpoints, marks, publishing = handover()

    async def scenario() -> None:
        await h.promise()
        assert marks.marks == [(0, PENDING), (1, PENDING), (2, PENDING)]
        checkpoints.stores = True
        h.assigned({0})
        await asyncio.gather(*h.settling)

    asyncio.run(scenario())
    assert sorted(checkpoints.made) == [1, 2]
    assert marks.marks[3:] == [(0, SETTLED)]
    assert sorted(publishing.done) == [1, 2]  # their publishers go once the handover is done

    h, checkpoints, marks, _ = handover(stores=False)

    async def not_stored() -> None:
        await h.promise()
        h.assigned(set())
        await asyncio.gather(*h.settling)

    asyncio.run(not_stored())
    assert sorted(marks.marks[3:]) == [(0, SETTLED), (1, SETTLED), (2, SETTLED)]


def test_a_worker_that_stops_checkpoints_every_partition_and_commits() -> None:
    h, checkpoints, _, publishing = handover()
    asyncio.run(h.stop())
    assert checkpoints.made == [0, 1, 2]
    assert publishing.commits == 1

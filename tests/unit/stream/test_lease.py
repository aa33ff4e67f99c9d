"""The group lease (`stream/kafka/lease.py`): renewed by each heartbeat the coordinator
answers and by each assignment, lapsed a session timeout after the last; kept by the
consuming loop of a group member."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_double import MemoryBroker, MemoryConnection

from runwatch.stream.kafka.consume import TP, ConsumingLoop, Group, Handler
from runwatch.stream.kafka.lease import GroupLease


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Coordinator:
    """aiokafka's group coordinator as far as the lease sees it: a heartbeat call that
    answers True while the group knows the member."""

    def __init__(self) -> None:
        self.known = True
        self.beats = 0

    async def _do_heartbeat(self) -> bool:
        self.beats += 1
        return self.known


class Consumer:
    def __init__(self) -> None:
        self._coordinator = Coordinator()


def test_answered_heartbeats_renew_the_lease_and_unanswered_ones_let_it_lapse() -> None:
    clock, consumer = Clock(), Consumer()
    lease = GroupLease(10.0, clock)
    assert not lease.held()  # not a member yet
    lease.watch(consumer)
    assert lease.held()
    coordinator = consumer._coordinator

    async def beat() -> Any:
        return await coordinator._do_heartbeat()  # what aiokafka's heartbeat task calls

    clock.now += 9.0
    assert asyncio.run(beat()) is True
    clock.now += 9.0
    assert lease.held()  # renewed 9 s ago
    coordinator.known = False  # expelled while paused: the coordinator does not know it
    assert asyncio.run(beat()) is False
    clock.now += 1.5
    assert not lease.held()
    assert coordinator.beats == 2


def test_an_assignment_renews_the_lease() -> None:
    clock = Clock()
    lease = GroupLease(10.0, clock)
    lease.renew()
    clock.now += 9.9
    assert lease.held()
    clock.now += 0.2
    assert not lease.held()


def test_a_coordinator_is_wrapped_once_and_a_new_one_in_turn() -> None:
    lease = GroupLease(10.0, Clock())
    consumer = Consumer()
    lease.watch(consumer)
    wrapped = consumer._coordinator._do_heartbeat
    lease.watch(consumer)
    assert consumer._coordinator._do_heartbeat is wrapped  # not wrapped twice
    consumer._coordinator = Coordinator()  # a reconnect: another coordinator
    lease.watch(consumer)
    assert consumer._coordinator._do_heartbeat is not wrapped


def test_without_a_heartbeat_to_watch_the_lease_is_always_held() -> None:
    class Other:
        _coordinator = object()  # another client: no `_do_heartbeat`

    clock = Clock()
    lease = GroupLease(10.0, clock)
    lease.watch(Other())
    clock.now += 1e6
    assert lease.held()


def test_the_consuming_loop_renews_its_member_s_lease_and_watches_its_heartbeats() -> None:
    """On each assignment, before the role hears of it; after a poll, the consumer's
    coordinator is watched."""
    b = MemoryBroker()
    b.create("t.events", 2)
    clock = Clock()
    lease = GroupLease(10.0, clock)
    seen: list[bool] = []
    turns: list[bool] = []
    coordinator = Coordinator()
    beat = coordinator._do_heartbeat

    class Noting(Handler):
        def assigned(self, partitions: set[TP]) -> dict[TP, int]:
            seen.append(lease.held())
            return {}

        async def turn(self) -> None:
            turns.append(coordinator._do_heartbeat != beat)

    async def scenario() -> None:
        consumer = MemoryConnection(b).consumer(group="g")
        consumer._coordinator = coordinator  # type: ignore[attr-defined]
        loop = ConsumingLoop(consumer, Group(("t.events",)), Noting(), lease=lease,
                             stop=lambda: bool(turns))  # fmt: skip
        await asyncio.wait_for(loop.run(), 30)

    asyncio.run(scenario())
    assert seen == [True]
    assert turns == [True]

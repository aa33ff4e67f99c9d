"""The consumers' tuning, as aiokafka takes it."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer

from runwatch.stream.kafka.clients import FETCH_FILL_BYTES, group_settings


def test_a_fetch_wait_holds_fetches_to_fill_and_zero_answers_at_once() -> None:
    held = group_settings(10.0, fetch_wait=0.05)
    assert (held["fetch_max_wait_ms"], held["fetch_min_bytes"]) == (50, FETCH_FILL_BYTES)
    assert not {"fetch_max_wait_ms", "fetch_min_bytes"} & set(group_settings(10.0, 0.0))
    assert group_settings(10.0, 0.0004)["fetch_max_wait_ms"] == 1  # never "wait 0 ms to fill"


def test_the_group_waits_for_a_revoke_as_long_as_it_may_take() -> None:
    """A member still checkpointing in its revoke callback stays in the next generation: the
    rebalance timeout is the session timeout plus the callback's bound."""
    assert group_settings(6.0, revoke_bound=10.0)["rebalance_timeout_ms"] == 16_000
    assert group_settings(6.0)["rebalance_timeout_ms"] == 6_000


def test_aiokafka_takes_the_group_settings() -> None:
    async def made() -> tuple[int, int]:  # (never started: nothing is reached)
        consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9", group_id="g",
                                    **group_settings(6.0, fetch_wait=0.05))  # fmt: skip
        await consumer.stop()
        return consumer._fetch_max_wait_ms, consumer._fetch_min_bytes

    assert asyncio.run(made()) == (50, FETCH_FILL_BYTES)


def test_each_group_member_keeps_its_own_assignment_for_the_sticky_assignor() -> None:
    """aiokafka's sticky assignor keeps a member's last assignment -- what it tells the group
    to stay sticky -- in class attributes. A worker is a member of two groups (the events',
    the fleet stage's): shared, the one assigned last spoke for both, the events group
    dealt its partitions out as if from nothing, and a kill moved partitions between
    survivors (bench/fleet.py)."""
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    (events,) = group_settings(6.0)["partition_assignment_strategy"]
    (fleet,) = group_settings(6.0)["partition_assignment_strategy"]
    events.on_assignment(ConsumerProtocolMemberAssignment(0, [("events", [1, 3, 5])], b""))
    fleet.on_assignment(ConsumerProtocolMemberAssignment(0, [("fleet", [0])], b""))
    told = StickyAssignorUserDataV1.decode(events.metadata(["events"]).user_data)
    assert [(t, sorted(p)) for t, p in told.previous_assignment] == [("events", [1, 3, 5])]
    assert events.name == fleet.name == "sticky"  # the protocol the group agrees on

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

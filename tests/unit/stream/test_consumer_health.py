"""Liveness and readiness of a consuming loop (what `runwatch sink` and `runwatch notify`
serve as /healthz and /readyz), and both HTTP servers answering them."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

import pytest
from helpers import http_get

from runwatch.stream.exceptions import PortUnavailable
from runwatch.stream.kafka.health import ConsumerHealth
from runwatch.stream.metrics.http import AsyncMetricsServer, MetricsServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _health(
    lag: Mapping[tuple[str, int], int | None] | None = None,
) -> tuple[ConsumerHealth, Clock, dict[str, object]]:
    clock = Clock()
    state: dict[str, object] = {"lag": lag}
    health = ConsumerHealth(
        lambda: state["lag"],  # type: ignore[arg-type,return-value]
        stall=30.0,
        behind_ok=500,
        clock=clock,
    )
    return health, clock, state


def test_alive_while_the_loop_turns_and_not_after_a_stall() -> None:
    health, clock, _ = _health()
    assert health.live() == (True, "consuming")
    clock.now += 29
    assert health.live()[0]
    clock.now += 2
    ok, reason = health.live()
    assert not ok
    assert reason == "the consuming loop has not turned for 31 s"
    health.beat()
    assert health.live()[0]


def test_a_wait_with_its_own_deadline_is_not_a_hang_until_the_deadline() -> None:
    health, clock, _ = _health()
    health.beat(grace=660)  # a flush that may wait 600 s for readers
    clock.now += 600
    assert health.live()[0]
    clock.now += 61
    assert not health.live()[0]
    health.beat()  # back to the loop: the short stall again
    clock.now += 31
    assert not health.live()[0]


@pytest.mark.parametrize(
    ("lag", "ready", "reason"),
    [
        (None, False, "no partitions assigned yet"),
        ({}, False, "no partitions assigned yet"),
        ({("ev", 0): 3, ("al", 0): None}, False, "waiting for Kafka to answer a fetch of al:0"),
        ({("ev", 0): 400, ("ev", 1): 101}, False, "catching up: 501 records behind"),
        ({("ev", 0): 400, ("ev", 1): 100}, True, "caught up on 2 partitions (500 records behind)"),
        ({("ev", 0): 0}, True, "caught up on 1 partitions (0 records behind)"),
    ],
)
def test_ready_once_assigned_fetched_and_caught_up(
    lag: Mapping[tuple[str, int], int | None] | None, ready: bool, reason: str
) -> None:
    health, _, _ = _health(lag)
    assert health.ready() == (ready, reason)


CHECKS = {
    "live": lambda: (False, "the consuming loop has not turned for 40 s"),
    "ready": lambda: (False, "catching up: 9000 records behind"),
}
ANSWERS = {
    "/healthz": (503, "the consuming loop has not turned for 40 s\n"),
    "/readyz": (503, "catching up: 9000 records behind\n"),
    "/metrics": (200, "m 1\n"),
}


def test_the_threaded_server_answers_both_checks() -> None:
    server = MetricsServer(lambda: b"m 1\n", 0, "127.0.0.1", **CHECKS)
    try:
        got = {path: http_get(server.port, path) for path in ANSWERS}
        assert http_get(server.port, "/nope")[0] == 404
    finally:
        server.close()
    assert got == ANSWERS


def test_the_asyncio_server_answers_both_checks() -> None:
    async def main() -> dict[str, tuple[int, str]]:
        server = AsyncMetricsServer(lambda: b"m 1\n", 0, "127.0.0.1", **CHECKS)
        await server.start()
        try:
            assert (await asyncio.to_thread(http_get, server.port, "/nope"))[0] == 404
            return {p: await asyncio.to_thread(http_get, server.port, p) for p in ANSWERS}
        finally:
            await server.close()

    assert asyncio.run(main()) == ANSWERS


def test_a_taken_port_is_one_clear_error_for_both_servers() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortUnavailable, match=f"cannot listen on 127.0.0.1:{port}: "):
            MetricsServer(lambda: b"", port, "127.0.0.1")

        async def start() -> None:
            await AsyncMetricsServer(lambda: b"", port, "127.0.0.1").start()

        with pytest.raises(PortUnavailable, match="in use"):
            asyncio.run(start())

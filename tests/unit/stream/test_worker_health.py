"""The worker's /healthz and /readyz (what the Helm chart's probes ask)."""

from __future__ import annotations

import asyncio

import pytest
from helpers import http_get

from runwatch.stream.metrics.http import AsyncMetricsServer


def test_healthz_and_readyz_follow_the_readiness_check() -> None:
    state = {"ready": (False, "rebuilding partitions [0]")}

    async def main() -> list[tuple[int, str]]:
        server = AsyncMetricsServer(lambda: b"m 1\n", 0, "127.0.0.1", ready=lambda: state["ready"])
        await server.start()
        try:
            out = []
            for path in ("/healthz", "/readyz", "/metrics"):
                out.append(await asyncio.to_thread(http_get, server.port, path))
            state["ready"] = (True, "live on partitions [0]")
            out.append(await asyncio.to_thread(http_get, server.port, "/readyz"))
            return out
        finally:
            await server.close()

    healthz, not_ready, metrics, ready = asyncio.run(main())
    assert healthz == (200, "ok\n")
    assert not_ready == (503, "rebuilding partitions [0]\n")
    assert metrics == (200, "m 1\n")
    assert ready == (200, "live on partitions [0]\n")


def test_readyz_without_a_check_is_ready() -> None:
    async def main() -> tuple[int, str]:
        server = AsyncMetricsServer(lambda: b"", 0, "127.0.0.1")
        await server.start()
        try:
            return await asyncio.to_thread(http_get, server.port, "/readyz")
        finally:
            await server.close()

    assert asyncio.run(main()) == (200, "ok\n")


@pytest.mark.parametrize(
    ("assigned", "rebuilding", "drivers", "ready"),
    [
        (False, set(), {}, False),
        (True, {1}, {0: None}, False),
        (True, set(), {0: None, 1: None}, True),
        (True, set(), {}, True),  # more workers than partitions: an idle standby is ready
    ],
)
def test_worker_readiness(
    assigned: bool, rebuilding: set[int], drivers: dict[int, None], ready: bool
) -> None:
    from runwatch.stream.kafka.worker import StreamWorker

    worker = StreamWorker.__new__(StreamWorker)  # readiness() reads three fields only
    worker.assigned_once = assigned
    worker.rebuilding = rebuilding
    worker.drivers = drivers  # type: ignore[assignment]
    ok, reason = worker.readiness()
    assert ok is ready
    assert reason

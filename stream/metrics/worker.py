"""The stream worker's /metrics: one object the worker calls at a handful of points.

Kept out of worker.py so the worker's own logic reads as before; every hook is a no-op
cost-wise beyond a counter update.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from runwatch.stream.alerts import Alert
from runwatch.stream.metrics.exporter import Limits, RunwatchMetrics
from runwatch.stream.metrics.http import AsyncMetricsServer, Ready
from runwatch.stream.metrics.roles import CheckpointMetrics


class WorkerMetrics:
    """Collector + HTTP endpoint (/metrics, /healthz, /readyz) for a `StreamWorker`'s live
    drivers."""

    def __init__(
        self,
        drivers: Callable[[], Iterable[Any]],
        port: int,
        host: str = "0.0.0.0",
        *,
        registry: CollectorRegistry | None = None,
        finished_grace: float = 600.0,
        ready: Ready | None = None,
        limits: Limits | None = None,
        held: Callable[[], float] | None = None,
    ) -> None:
        """`held`: the longest the worker's event loop was held, in seconds
        (`stream/kafka/held.py`)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.collector = RunwatchMetrics(
            self.registry, finished_grace=finished_grace, limits=limits
        )
        self.collector.add_source(lambda: [d.engine for d in drivers()])
        self.checkpoints = CheckpointMetrics(self.registry)
        if held is not None:
            Gauge("runwatch_event_loop_held_max_seconds",
                  "The longest the worker's event loop went without a turn since it started "
                  "(no group heartbeat meanwhile: past the session timeout less the heartbeat "
                  "interval, the group takes its partitions away)",
                  registry=self.registry).set_function(held)  # fmt: skip
        self.server = AsyncMetricsServer(self.collector.exposition, port, host, ready=ready,
                                         select=self.collector.exposition)  # fmt: skip

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()

    def live(self, driver: Any) -> None:
        """A driver went live (after its rebuild): count its events from now on."""
        self.collector.instrument(driver.engine, transitions=False, track=False)

    def batch(self, last_arrival: float, invalid: int) -> None:
        """A batch applied; `last_arrival`: the broker time of its last record."""
        if invalid:
            self.collector.record_invalid(invalid)
        self.collector.record_lag(max(0.0, time.time() - last_arrival))

    def published(self, alerts: Iterable[Alert]) -> None:
        self.collector.record_transitions(alerts)

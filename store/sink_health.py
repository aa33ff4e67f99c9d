"""`runwatch sink --health-port`: /healthz, /readyz and /metrics, served on the sink's loop.

/healthz and /readyz are the sink's `ConsumerHealth` (stream/consumer_health.py): alive while
the consuming loop turns, ready once partitions are assigned and it is within one batch of
their end. /metrics is a registry of its own, counted once per written batch (`flushed`, on
the writer's thread) and, for the lag, read from the consumer when scraped -- nothing is
added per record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from runwatch.store.writer import Flushed
from runwatch.stream.metrics.http import AsyncMetricsServer, registry_body

if TYPE_CHECKING:
    from runwatch.store.sink import Sink


class _Lag(Collector):
    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "runwatch_sink_lag_records",
            "Records between what the sink has read and the end of the partition (as of the "
            "last fetch)",
            labels=["topic", "partition"],
        )
        for (topic, partition), behind in sorted((self.sink.lag() or {}).items()):
            if behind is not None:
                family.add_metric([topic, str(partition)], behind)
        yield family


class SinkEndpoints:
    """The sink's HTTP endpoints and the metrics behind /metrics."""

    def __init__(
        self,
        sink: Sink,
        port: int,
        host: str = "0.0.0.0",
        then: Callable[[Flushed], None] | None = None,
    ) -> None:
        self.then = then
        self.registry = r = CollectorRegistry()
        self.events = Counter(
            "runwatch_sink_events",
            "Events in written batches (ids already stored included: they are left out)",
            registry=r,
        )
        self.new_events = Counter(
            "runwatch_sink_new_events", "Events written that were not stored before", registry=r
        )
        self.alerts = Counter("runwatch_sink_alerts", "Alert transitions written", registry=r)
        self.invalid = Counter(
            "runwatch_sink_invalid", "Invalid records kept in invalid_events", registry=r
        )
        self.batches = Counter("runwatch_sink_batches", "Batches written", registry=r)
        self.last_seconds = Gauge(
            "runwatch_sink_last_batch_seconds", "Seconds the last batch took to write", registry=r
        )
        self.last_at: float | None = None
        Gauge(
            "runwatch_sink_last_batch_age_seconds",
            "Seconds since the last batch was written (NaN: none yet)",
            registry=r,
        ).set_function(lambda: math.nan if self.last_at is None else time.time() - self.last_at)
        r.register(_Lag(sink))
        self.server = AsyncMetricsServer(
            registry_body(r), port, host, ready=sink.health.ready, live=sink.health.live
        )

    def flushed(self, done: Flushed) -> None:
        """Count one written batch (on the writer's thread), then pass it on."""
        self.events.inc(done.events)
        self.new_events.inc(done.new_events)
        self.alerts.inc(done.alerts)
        self.invalid.inc(done.invalid)
        self.batches.inc()
        self.last_seconds.set(done.seconds)
        self.last_at = time.time()
        if self.then is not None:
            self.then(done)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()

"""The /metrics of the roles themselves, beside the run gauges of `exporter.py`: what the sink
wrote, what the notifier did with each transition, what the embedded service accepted and
refused, and how far each consuming loop is behind. Each role gets one object here; nothing is
counted per record except where said.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client import generate_latest as _exposition
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from runwatch.stream.kafka.health import ConsumerHealth, Lag
from runwatch.stream.metrics.http import AsyncMetricsServer, MetricsServer, registry_body

#: The content type of an exposition, for servers of their own (`runwatch serve`).
EXPOSITION_TYPE = CONTENT_TYPE_LATEST


class LagGauge(Collector):
    """Records between what a consuming loop handed on and the end of each partition, read
    from the loop when scraped."""

    def __init__(self, name: str, documentation: str, lag: Lag) -> None:
        self.name, self.documentation, self.lag = name, documentation, lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=["topic", "partition"])
        for (topic, partition), behind in sorted((self.lag() or {}).items()):
            if behind is not None:
                family.add_metric([topic, str(partition)], behind)
        yield family


class SinkEndpoints:
    """`runwatch sink --health-port`: /healthz and /readyz (the loop's `ConsumerHealth`) and
    /metrics, counted once per written batch (`flushed`, on the writer's thread)."""

    def __init__(
        self,
        lag: Lag,
        health: ConsumerHealth,
        port: int,
        host: str = "0.0.0.0",
        then: Callable[[Any], None] | None = None,
        *,
        ready: Callable[[], tuple[bool, str]] | None = None,
        failures: Callable[[], int] | None = None,
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
        r.register(
            LagGauge(
                "runwatch_sink_lag_records",
                "Records between what the sink has read and the end of the partition (as of "
                "the last fetch)",
                lag,
            )
        )
        if failures is not None:
            Gauge(
                "runwatch_sink_history_write_failures",
                "Batches the history could not take (read again from Kafka after a pause)",
                registry=r,
            ).set_function(failures)
        self.server = AsyncMetricsServer(
            registry_body(r), port, host, ready=ready or health.ready, live=health.live
        )

    def flushed(self, done: Any) -> None:
        """Count one written batch (a `store.writer.Flushed`), then pass it on."""
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


class _SlackCalls(Collector):
    def __init__(self, calls: Callable[[], int]) -> None:
        self.calls = calls

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "runwatch_notify_slack_calls", "Slack API calls made, retries included"
        )
        family.add_metric([], self.calls())
        yield family


class NotifyEndpoints:
    """`runwatch notify --health-port`: health and counters of the notifier, served from a
    daemon thread when given a port. The checks read what the consuming loop left: its lag
    as of its last turn (`lag`, set on the loop's thread) and its beats."""

    #: one Slack call with its retries can take a minute and a half: not a hang
    STALL_SECONDS = 300.0
    #: records per poll: ready within one poll of the end of runwatch.alerts
    CAUGHT_UP = 500

    def __init__(
        self, slack_calls: Callable[[], int], port: int | None, host: str = "0.0.0.0"
    ) -> None:
        self.lag: dict[tuple[str, int], int | None] | None = None
        self.health = ConsumerHealth(
            lambda: self.lag, stall=self.STALL_SECONDS, behind_ok=self.CAUGHT_UP
        )
        self.registry = r = CollectorRegistry()
        self.transitions = Counter(
            "runwatch_notify_transitions",
            "Alert transitions handled, by outcome (sent, duplicate, silenced, stale, skipped, "
            "failed, disabled, invalid)",
            ["outcome"],
            registry=r,
        )
        self.retries = Counter(
            "runwatch_notify_retries",
            "Waits before trying a transition again because Slack stayed unreachable",
            registry=r,
        )
        self.reminders = Counter("runwatch_notify_reminders", "Reminders posted", registry=r)
        r.register(_SlackCalls(slack_calls))
        r.register(
            LagGauge(
                "runwatch_notify_lag_records",
                "Alert transitions between what the notifier handled and the end of the partition",
                lambda: self.lag,
            )
        )
        self.server: MetricsServer | None = None
        if port is not None:  # raises PortUnavailable
            self.server = MetricsServer(
                registry_body(r), port, host, live=self.health.live, ready=self.health.ready
            )

    def handled(self, outcome: str) -> None:
        self.transitions.labels(outcome).inc()
        self.health.beat()  # a batch of Slack calls is progress, not a hang

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def new_registry() -> CollectorRegistry:
    """A registry of one's own (tests and embedders pass theirs)."""
    return CollectorRegistry()


class ServiceCounters:
    """`runwatch serve`'s own counters, in the registry its /metrics answers from."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.rejected = Counter(
            "runwatch_serve_rejected_total",
            "Requests or lines the service refused, by reason",
            ["reason"],
            registry=registry,
        )
        self.accepted = Counter(
            "runwatch_serve_accepted_events_total", "Events acknowledged", registry=registry
        )
        self.history_failures = Counter(
            "runwatch_serve_history_write_failures_total",
            "Flushes of the DuckDB history that failed (tried again at the next flush)",
            registry=registry,
        )
        self.dead_letters = Counter(
            "runwatch_serve_dead_letters_total",
            "Lines refused and kept in the history's invalid_events, by class of reason",
            ["reason"],
            registry=registry,
        )
        self.evicted = Counter(
            "runwatch_serve_evicted_runs_total",
            "Runs the rules stopped tracking (finished or silent past the horizon, or over "
            "the cap on live runs); their events stay in the history",
            ["why"],
            registry=registry,
        )

    def follow(self, lag_bytes: Callable[[], float], lag_seconds: Callable[[], float]) -> None:
        """How far the history is behind the event log (it is written on its own thread)."""
        Gauge(
            "runwatch_serve_history_lag_bytes",
            "Bytes of the event log the DuckDB history does not hold yet",
            registry=self.registry,
        ).set_function(lag_bytes)
        Gauge(
            "runwatch_serve_history_lag_seconds",
            "Seconds since the history last held the whole event log (0: it does)",
            registry=self.registry,
        ).set_function(lag_seconds)

    def exposition(self) -> bytes:
        return _exposition(self.registry)


class CheckpointMetrics:
    """Checkpoints of the rules' state (`runwatch.stream.checkpoint`), per partition (the
    worker) or of the event log (`serve`: "wal"): how big, for how many live runs -- a size
    that should follow the live runs, not the history -- and how long they take to write."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.bytes = Gauge("runwatch_checkpoint_bytes", "Size of the latest checkpoint",
                           ["partition"], registry=registry)  # fmt: skip
        self.runs = Gauge("runwatch_checkpoint_runs", "Live runs in the latest checkpoint",
                          ["partition"], registry=registry)  # fmt: skip
        self.seconds = Gauge(
            "runwatch_checkpoint_write_seconds",
            "Time the latest checkpoint took to make and store",
            ["partition"],
            registry=registry,
        )
        self.written = Counter("runwatch_checkpoints_written_total", "Checkpoints stored",
                               ["partition"], registry=registry)  # fmt: skip
        self.failed = Counter(
            "runwatch_checkpoint_failures_total",
            "Checkpoints that could not be stored (the restart replays further back)",
            ["partition"],
            registry=registry,
        )

    def stored(self, partition: str, size: int, runs: int, seconds: float) -> None:
        self.bytes.labels(partition).set(size)
        self.runs.labels(partition).set(runs)
        self.seconds.labels(partition).set(seconds)
        self.written.labels(partition).inc()

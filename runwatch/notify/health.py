"""`runwatch notify --health-port`: /healthz, /readyz and /metrics from a daemon thread.

The notifier's loop is synchronous (kafka-python), so the endpoints are the threaded server
and the checks read what the loop left: it calls `observe(consumer)` after each poll (a lag
snapshot of the runwatch.alerts partitions; the consumer is never touched from the server's
thread) and `handled(outcome)` after each transition. Alive: the loop turned within
`STALL_SECONDS` -- long, because one Slack call with its retries can take a minute and a
half. Ready: the alert partitions assigned and within one poll of their end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from runwatch.notify.notifier import Notifier
from runwatch.stream.kafka.health import ConsumerHealth
from runwatch.stream.metrics.http import MetricsServer, registry_body

STALL_SECONDS = 300.0
#: records per poll: ready within one poll of the end of runwatch.alerts
CAUGHT_UP = 500


class _Collected(Collector):
    def __init__(self, owner: NotifyHealth) -> None:
        self.owner = owner

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        calls = CounterMetricFamily(
            "runwatch_notify_slack_calls", "Slack API calls made, retries included"
        )
        calls.add_metric([], self.owner.notifier.poster.calls)
        yield calls
        lag = GaugeMetricFamily(
            "runwatch_notify_lag_records",
            "Alert transitions between what the notifier handled and the end of the partition",
            labels=["topic", "partition"],
        )
        for (topic, partition), behind in sorted((self.owner.lag or {}).items()):
            if behind is not None:
                lag.add_metric([topic, str(partition)], behind)
        yield lag


class NotifyHealth:
    """The loop's health and counters; serves them when given a port."""

    def __init__(
        self, notifier: Notifier, alerts_topic: str, port: int | None, host: str = "0.0.0.0"
    ) -> None:
        self.notifier = notifier
        self.alerts_topic = alerts_topic
        self.lag: dict[tuple[str, int], int | None] | None = None
        self.health = ConsumerHealth(lambda: self.lag, stall=STALL_SECONDS, behind_ok=CAUGHT_UP)
        self.registry = r = CollectorRegistry()
        self.transitions = Counter(
            "runwatch_notify_transitions",
            "Alert transitions handled, by outcome (sent, duplicate, silenced, stale, skipped, "
            "failed, disabled)",
            ["outcome"],
            registry=r,
        )
        self.retries = Counter(
            "runwatch_notify_retries",
            "Batches kept for a later try because Slack stayed unreachable",
            registry=r,
        )
        self.reminders = Counter("runwatch_notify_reminders", "Reminders posted", registry=r)
        r.register(_Collected(self))
        self.server: MetricsServer | None = None
        if port is not None:  # raises PortUnavailable
            self.server = MetricsServer(
                registry_body(r), port, host, live=self.health.live, ready=self.health.ready
            )

    def observe(self, consumer: Any) -> None:
        """After a poll, on the loop's thread: it turned; how far behind each alert partition
        is (the end as of the last fetch, less the consumer's position)."""
        self.health.beat()
        if self.server is None:
            return
        lag: dict[tuple[str, int], int | None] = {}
        for tp in consumer.assignment() or ():
            if tp.topic != self.alerts_topic:
                continue
            try:
                end, at = consumer.highwater(tp), consumer.position(tp, timeout_ms=0)
            except Exception:  # unassigned meanwhile, no position yet: not known
                end = at = None
            lag[(tp.topic, tp.partition)] = None if end is None or at is None else max(0, end - at)
        self.lag = lag  # one assignment: the server's thread sees the old or the new

    def handled(self, outcome: str) -> None:
        self.transitions.labels(outcome).inc()
        self.health.beat()  # a batch of Slack calls is progress, not a hang

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

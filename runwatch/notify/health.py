"""`runwatch notify --health-port`: /healthz, /readyz and /metrics from a daemon thread.

The endpoints are a threaded server; the checks read what the consuming loop left: its lag
snapshot after each turn (the consumer is never touched from the server's thread) and
`handled(outcome)` after each transition. Alive: the loop turned within `STALL_SECONDS` --
long, because one Slack call with its retries can take a minute and a half -- or it waits out
a Slack outage (`Delivery` says for how long). Ready: the alert partitions assigned and within
one poll of their end.
"""

from __future__ import annotations

from collections.abc import Iterator

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

    def __init__(self, notifier: Notifier, port: int | None, host: str = "0.0.0.0") -> None:
        self.notifier = notifier
        #: the consuming loop's lag, as of its last turn (set on the loop's thread)
        self.lag: dict[tuple[str, int], int | None] | None = None
        self.health = ConsumerHealth(lambda: self.lag, stall=STALL_SECONDS, behind_ok=CAUGHT_UP)
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
        r.register(_Collected(self))
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

"""What a stream worker publishes, and in which order.

Alert transitions first, then dead letters, then the run views they changed: a guarding
trainer reads the view, and the transition it names is on its topic by then. A partition's
checkpoint goes out only after a flush, so it never covers a transition that is not on
`runwatch.alerts` yet (a takeover from it would otherwise lose that transition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.stream.worker")


class Producer(Protocol):
    """The part of Faust's producer the worker publishes with (positional: topic, key, value,
    partition, timestamp, headers)."""

    async def send(self, topic: str, key: bytes | None, value: bytes | None,
                   partition: int | None, timestamp: float | None,
                   headers: Any) -> Any: ...  # fmt: skip
    async def send_and_wait(self, topic: str, key: bytes | None, value: bytes | None,
                            partition: int | None, timestamp: float | None,
                            headers: Any) -> Any: ...  # fmt: skip
    async def flush(self) -> None: ...


class Publisher:
    """Puts a worker's output on its topics. `producer` is asked each time (Faust makes its
    producer when the app starts); `name` goes on every alert as a header (which worker
    published it, outside the contract's body)."""

    def __init__(
        self,
        producer: Callable[[], Producer],
        topics: Topics,
        name: str,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self._producer = producer
        self.topics = topics
        self.headers = [("runwatch-worker", name.encode())]
        self.metrics = metrics

    async def publish(
        self, alerts: list[Alert], dead: list[Refused], views: Sequence[RunView] = ()
    ) -> None:
        """Transitions, then dead letters, then run views."""
        producer, topics = self._producer(), self.topics
        for alert in alerts:
            try:
                value = alert.to_json()
            except Exception:  # made by a timer, so no event to dead-letter: said, skipped
                log.exception("alert transition %s could not be encoded; not published", alert.id)
                continue
            await producer.send(topics.alerts, alert.run.encode(), value, None, None, self.headers)
        for letter in dead:
            await producer.send(topics.dlq, letter.where.encode(), letter.to_json(), None, None,
                                None)  # fmt: skip
        for view in views:
            await producer.send(topics.breaker, view.run.encode(), view.to_json(), None, None,
                                None)  # fmt: skip
        if self.metrics is not None:
            self.metrics.published(alerts)

    async def checkpoint(self, key: bytes, data: bytes, partition: int) -> None:
        """One checkpoint record, once everything published before it is on its topic."""
        producer = self._producer()
        await producer.flush()
        await producer.send_and_wait(self.topics.checkpoints, key, data, partition, None, None)

    async def flush(self) -> None:
        await self._producer().flush()

"""What a stream worker publishes, in which order, and through what: one publisher per
partition of `runwatch.events` it holds.

Everything made from one input partition's state goes out through that partition's
`PartitionPublisher`: its alert transitions, its dead letters, its runs' run views, its
checkpoints and handover markers (`checkpoints.KafkaCheckpoints` writes through it). Within
a publish: transitions first, then dead letters, then the run views they changed -- a
guarding trainer reads the view, and the transition it names is on its topic by then. A
checkpoint goes out only after a flush, so it never covers a transition that is not on
`runwatch.alerts` yet (a takeover from it would otherwise lose that transition).

While the group lease has lapsed (`lease.GroupLease`: the group may have given the partition
to another member), a partition's output is held, not sent; it goes out once the lease is
renewed and the partition is still this worker's, else it is dropped -- its new owner's
re-read makes and publishes the same transitions, with the same ids.

All partitions share the one producer today; a partition's publisher is where a producer of
its own -- a transaction per input partition, whose epoch fences a previous owner at the
broker -- would sit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

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


class Output(NamedTuple):
    """What a partition's driver made at one go, in the order it goes out."""

    alerts: list[Alert]
    dead: list[Refused]
    views: Sequence[RunView] = ()


class Publisher:
    """The worker's output, one `PartitionPublisher` per input partition. `producer` is asked
    each time (Faust makes its producer when the app starts); `name` goes on every alert as
    a header (which worker published it, outside the contract's body); `leased`: whether
    the group lease is held."""

    def __init__(
        self,
        producer: Callable[[], Producer],
        topics: Topics,
        name: str,
        metrics: WorkerMetrics | None = None,
        leased: Callable[[], bool] = lambda: True,
    ) -> None:
        self.producer = producer
        self.topics = topics
        self.headers = [("runwatch-worker", name.encode())]
        self.metrics = metrics
        self.leased = leased
        self._partitions: dict[int, PartitionPublisher] = {}

    def of(self, partition: int) -> PartitionPublisher:
        """Input partition `partition`'s publisher."""
        found = self._partitions.get(partition)
        if found is None:
            found = self._partitions[partition] = PartitionPublisher(self, partition)
        return found

    def keep(self, partitions: set[int]) -> None:
        """The group's assignment: the publishers of the partitions that went elsewhere go,
        with what they held (the new owners publish it)."""
        for p in list(self._partitions):
            if p not in partitions:
                del self._partitions[p]

    def holds(self, partition: int) -> bool:
        """Whether `partition`'s publisher holds output (made while the lease had lapsed)."""
        found = self._partitions.get(partition)
        return found is not None and bool(found.held)

    def holding(self) -> list[PartitionPublisher]:
        """The partitions' publishers that hold output, by partition."""
        return [self._partitions[p] for p in sorted(self._partitions) if self._partitions[p].held]

    async def flush(self) -> None:
        await self.producer().flush()


class PartitionPublisher:
    """One input partition's output (see the module's docstring)."""

    def __init__(self, worker: Publisher, partition: int) -> None:
        self.worker = worker
        self.partition = partition
        #: output made while the lease had lapsed, in order
        self.held: list[Output] = []

    async def publish(
        self, alerts: list[Alert], dead: list[Refused], views: Sequence[RunView] = ()
    ) -> None:
        """Transitions, then dead letters, then run views -- or, while the lease has
        lapsed, hold them (after anything held before)."""
        if self.worker.leased() and not self.held:
            await self._send(Output(alerts, dead, views))
        else:
            self.held.append(Output(alerts, dead, views))

    async def release(self, mine: bool) -> None:
        """Once the lease is held again: what was held goes out if the partition is still
        `mine`, else it is dropped (its new owner's re-read publishes it)."""
        if not self.held or not self.worker.leased():
            return
        held, self.held = self.held, []
        if mine:
            for output in held:
                await self._send(output)

    async def _send(self, output: Output) -> None:
        w = self.worker
        producer, topics = w.producer(), w.topics
        for alert in output.alerts:
            try:
                value = alert.to_json()
            except Exception:  # made by a timer, so no event to dead-letter: said, skipped
                log.exception("alert transition %s could not be encoded; not published", alert.id)
                continue
            await producer.send(topics.alerts, alert.run.encode(), value, None, None, w.headers)
        for letter in output.dead:
            await producer.send(topics.dlq, letter.where.encode(), letter.to_json(), None, None,
                                None)  # fmt: skip
        for view in output.views:
            await producer.send(topics.breaker, view.run.encode(), view.to_json(), None, None,
                                None)  # fmt: skip
        if w.metrics is not None:
            w.metrics.published(output.alerts)

    async def checkpoint(self, key: bytes, data: bytes, target: int) -> None:
        """One record of the checkpoints topic (partition `target`), once everything
        published before it is on its topic."""
        producer = self.worker.producer()
        await producer.flush()
        await producer.send_and_wait(self.worker.topics.checkpoints, key, data, target, None,
                                     None)  # fmt: skip

"""What a stream worker publishes, in which order, and how a worker that lost a partition is
kept from publishing anything more for it: one publisher per partition of `runwatch.events`,
each with a transactional producer of its own.

Everything made from one input partition's state goes out through that partition's
`PartitionPublisher`: its alert transitions, its dead letters, its runs' run views, its
checkpoints and handover markers (`checkpoints.KafkaCheckpoints` writes through it). Within
a publish: transitions first, then dead letters, then the run views they changed -- a
guarding trainer reads the view, and the transition it names is on its topic by then.

Fencing. A partition's producer has a transactional id of its own, the same in every worker
of the group (`transactional_id`). Whoever takes the partition over starts a producer with
that id (`open`): the broker's transaction coordinator bumps the id's epoch, aborts any
transaction an earlier owner left open, and from then on refuses every request that carries
the earlier epoch -- its sends, its commit (ProducerFenced). So a worker that lost a
partition publishes nothing more for it, alerts, run views, dead letters and checkpoints
alike, however long it was paused: what fences it is a number the broker compares on each
request, not a timer that a paused process would have to see run out, so a pause of any
length -- a GC, SIGSTOP, a frozen node -- ends in the same refusal. Every runwatch consumer
reads `read_committed` (`clients.consumer`), so what an aborted transaction held is seen by
no one; the new owner's re-read makes the same transitions again, with the same ids.

Transactions. What a partition publishes between two turns of the consuming loop goes in
one transaction (`publish` opens it, `commit` ends it, after each poll): a batch's
transitions, dead letters and run views, and the wall-clock tick's. A checkpoint commits
what is open first, then goes in a transaction of its own: it never covers a transition
that is not committed. A transaction that fails short of fencing (the broker away, a batch
timed out) is aborted and what it held sent again in the next, until it commits or the
partition is lost (`lost`: the worker stops judging it, and takes it over again only if the
group confirms it is still its own). Input offsets are not in the transaction
(`send_offsets_to_transaction`): a takeover starts from a checkpoint's offset, never from
the group's committed one, which is committed for Kafka's lag tools alone -- and aiokafka's
`send_offsets_to_transaction` takes no group generation, so it would fence nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple, Protocol

from aiokafka.errors import ProducerFenced

from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import PartitionLost as Lost
from runwatch.stream.fleet.wire import FleetRecord, encode
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.stream.worker")

#: The longest wait between tries of a transaction that failed short of fencing.
RETRY_MAX_S = 5.0


class TxnProducer(Protocol):
    """The part of a transactional producer the worker publishes with
    (`clients.TransactionalProducer`, aiokafka's): a failed call raises what failed, and
    `usable` says whether the producer can go on (not: another producer of its id fenced
    it, or it broke)."""

    @property
    def usable(self) -> bool: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def begin_transaction(self) -> None: ...
    async def commit_transaction(self) -> None: ...
    async def abort_transaction(self) -> None: ...
    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> Any: ...  # fmt: skip


class Output(NamedTuple):
    """What a partition's driver made at one go, in the order it goes out."""

    alerts: list[Alert]
    dead: list[Refused]
    views: Sequence[RunView] = ()


#: One record to send: topic, key, value, partition (None: by key), headers.
Send = tuple[str, bytes | None, bytes, int | None, Any]


def transactional_id(group: str, topic: str, partition: int) -> str:
    """The transactional id of a worker group's output from one input partition."""
    return f"runwatch-worker|{group}|{topic}|{partition}"


class Publisher:
    """The worker's output, one `PartitionPublisher` per input partition. `producers(id)`:
    a transactional producer of the id, not started; `name` goes on every alert as a
    header (which worker published it, outside the contract's body); `lost(p)`: called
    once partition p's producer is fenced or fails for good."""

    def __init__(
        self,
        producers: Callable[[str], TxnProducer],
        topics: Topics,
        group: str,
        name: str,
        metrics: WorkerMetrics | None = None,
        lost: Callable[[int], None] = lambda partition: None,
        stamp: Callable[[list[Alert]], list[Alert]] | None = None,
    ) -> None:
        """`stamp`: what each transition carries of the fleet stage's decisions
        (`runwatch.stream.fleet.members.Membership.stamp`), applied as it is published."""
        self.producers = producers
        self.stamp = stamp
        self.topics = topics
        self.group = group
        self.headers = [("runwatch-worker", name.encode())]
        self.metrics = metrics
        self.lost = lost
        self._partitions: dict[int, PartitionPublisher] = {}
        self._closing: set[asyncio.Task[None]] = set()  # producers being stopped

    def of(self, partition: int) -> PartitionPublisher:
        """Input partition `partition`'s publisher (publishing nothing until `open`)."""
        found = self._partitions.get(partition)
        if found is None:
            found = self._partitions[partition] = PartitionPublisher(self, partition)
        return found

    async def open(self, partition: int) -> None:
        """Take `partition` over at the broker (`PartitionPublisher.open`)."""
        await self.of(partition).open()

    def keep(self, partitions: Collection[int], handing: Collection[int] = ()) -> None:
        """The group's assignment: the publishers of the partitions that went elsewhere are
        closed (in the background), but for those `handing` over: their handover checkpoint
        goes out through them (`handed` closes them). A handover an earlier assignment left
        under way stays open through a later one (rebalances come in bursts after a kill):
        closed early, its checkpoint is refused and the new owner waits out HANDOVER_S."""
        for p, found in list(self._partitions.items()):
            found.handing = p not in partitions and (p in handing or found.handing)
            if p not in partitions and not found.handing:
                self._close(p)

    def handed(self, partition: int) -> None:
        """The handover of `partition` is done: its publisher goes, unless it came back."""
        found = self._partitions.get(partition)
        if found is not None and found.handing:
            self._close(partition)

    def _close(self, partition: int) -> None:
        task = asyncio.ensure_future(self._partitions.pop(partition).close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def commit(self) -> None:
        """Commit what each partition has open (after a poll: a transaction per turn), the
        partitions side by side (each commit is a round trip to the broker)."""
        open_ = [p for p in self._partitions.values() if p.open_transaction or p.pending]
        if open_:
            await asyncio.gather(*(p.commit() for p in open_))

    async def close(self) -> None:
        """Commit what is open, and stop every producer (the worker stops)."""
        await self.commit()
        for p in list(self._partitions):
            await self._partitions.pop(p).close()
        if self._closing:
            await asyncio.wait(self._closing)


class PartitionPublisher:
    """One input partition's output (see the module's docstring)."""

    def __init__(self, worker: Publisher, partition: int) -> None:
        self.worker = worker
        self.partition = partition
        self.transactional_id = transactional_id(worker.group, worker.topics.events, partition)
        self.producer: TxnProducer | None = None
        #: what the open transaction holds (sent again should it be aborted), and the
        #: transitions among it (counted once committed)
        self._sends: list[Send] = []
        self._alerts: list[Alert] = []
        self.open_transaction = False
        self.fenced = False
        #: a send failed short of fencing: the transaction must be aborted and sent again
        self._failed: Exception | None = None
        #: a revoke promised its handover: kept after the partition went elsewhere
        self.handing = False
        #: one transaction step at a time (the live path, the tick, a checkpoint)
        self._lock = asyncio.Lock()

    @property
    def pending(self) -> bool:
        """Whether output waits to be committed (sent again after an abort)."""
        return bool(self._sends)

    @property
    def live(self) -> bool:
        """Opened, and not fenced since."""
        return self.producer is not None and not self.fenced

    async def open(self) -> None:
        """Take the partition over at the broker: start its transactional producer, whose
        start fences every earlier producer of the id (an earlier owner's open transaction
        is aborted). Raises what the producer raises (the broker away: try again)."""
        async with self._lock:
            await self._stop()
            producer = self.worker.producers(self.transactional_id)
            try:
                await producer.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self.producer, self.fenced, self._failed = producer, False, None
            self._sends, self._alerts, self.open_transaction = [], [], False

    async def publish(
        self,
        alerts: list[Alert],
        dead: list[Refused],
        views: Sequence[RunView] = (),
        fleet: Sequence[FleetRecord] = (),
    ) -> None:
        """Transitions, then dead letters, then run views, then what the fleet stage reads
        of them (`runwatch.stream.fleet.wire`), into the open transaction (one begun if
        none is). Nothing once the partition is lost: its new owner publishes it."""
        sends: list[Send] = []
        w = self.worker
        topics = w.topics
        if w.stamp is not None and alerts:
            alerts = w.stamp(alerts)
        for alert in alerts:
            try:
                value = alert.to_json()
            except Exception:  # made by a timer, so no event to dead-letter: said, skipped
                log.exception("alert transition %s could not be encoded; not published", alert.id)
                continue
            sends.append((topics.alerts, alert.run.encode(), value, None, w.headers))
        for letter in dead:
            sends.append((topics.dlq, letter.where.encode(), letter.to_json(), None, None))
        for view in views:
            sends.append((topics.breaker, view.run.encode(), view.to_json(), None, None))
        for record in fleet:
            key, value = encode(record)
            sends.append((topics.fleet, key, value, 0, None))
        if not sends:
            return
        async with self._lock:
            if not self.live:
                return
            self._alerts += alerts
            with contextlib.suppress(Lost):  # (the new owner publishes it)
                await self._send(sends)

    async def commit(self) -> bool:
        """Commit the open transaction; whether it was (not: the partition is lost)."""
        async with self._lock:
            return await self._commit()

    async def checkpoint(self, key: bytes, data: bytes, target: int) -> None:
        """One record of the checkpoints topic (partition `target`), in a transaction of
        its own after everything published before it is committed. Raises Lost when the
        partition is lost, and is stored then by no one but its owner."""
        async with self._lock:
            if not self.live or not await self._commit():
                raise Lost(f"partition {self.partition} is another worker's now")
            await self._send([(self.worker.topics.checkpoints, key, data, target, None)])
            if not await self._commit():
                raise Lost(f"partition {self.partition} is another worker's now")

    async def close(self) -> None:
        async with self._lock:
            await self._stop()

    # -- inside the lock ---------------------------------------------------------------------

    async def _send(self, sends: list[Send]) -> None:
        """Into the open transaction (begun if none is), noted to be sent again should it
        fail; raises Lost when the producer cannot go on (a failure short of that is the
        commit's to sort out)."""
        producer = self.producer
        assert producer is not None
        self._sends += sends
        try:
            if not self.open_transaction:
                await producer.begin_transaction()
                self.open_transaction = True
            for topic, key, value, partition, headers in sends:
                await producer.send(topic, value, key, partition, None, headers)
        except Exception as err:
            if not producer.usable:
                await self._lose(err)
                raise Lost(str(err)) from None
            self._failed = err  # the commit aborts it and sends it all again

    async def _commit(self) -> bool:
        """Commit until it is committed (aborted and sent again after a failure short of
        fencing, backing off), or the partition is lost."""
        wait = 0.1
        while self.live and (self.open_transaction or self._sends):
            producer = self.producer
            assert producer is not None
            try:
                if self._failed is not None:
                    raise self._failed
                if not self.open_transaction:  # aborted: what it held goes again
                    sends, self._sends = self._sends, []
                    await self._send(sends)
                    continue
                await producer.commit_transaction()
            except Lost:
                return False
            except Exception as err:
                self._failed = None
                if not producer.usable:
                    await self._lose(err)
                    return False
                log.info("partition %d: transaction not committed (%s: %s); again in %.1fs",
                         self.partition, type(err).__name__, err, wait)  # fmt: skip
                await self._abort()
                await asyncio.sleep(wait)
                wait = min(RETRY_MAX_S, wait * 2)
                continue
            self.open_transaction = False
            self._sends, alerts, self._alerts = [], self._alerts, []
            if self.worker.metrics is not None and alerts:
                self.worker.metrics.published(alerts)
        return self.live

    async def _abort(self) -> None:
        producer = self.producer
        assert producer is not None
        if self.open_transaction:
            try:
                await producer.abort_transaction()
            except Exception as err:
                if not producer.usable:
                    await self._lose(err)
                # else the coordinator aborts it (its timeout, or the next producer's start)
        self.open_transaction = False

    async def _lose(self, err: BaseException) -> None:
        """The producer is done for: said once, what it held dropped, the worker told."""
        if self.fenced:
            return
        self.fenced = True
        self._sends, self._alerts, self.open_transaction, self._failed = [], [], False, None
        log.warning("partition %d: %s; it publishes nothing more here",
                    self.partition, "fenced by another worker" if isinstance(
                        err, ProducerFenced) else f"producer failed ({err!r})")  # fmt: skip
        self.worker.lost(self.partition)
        await self._stop()

    async def _stop(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.stop()

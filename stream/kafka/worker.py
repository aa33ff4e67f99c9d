"""The stream worker: a thin faust-streaming app around `LiveDriver`s.

Faust hosts the worker -- its life cycle and signals (`faust.Worker`), the wall-clock timer,
the producer that publishes alerts and dead letters -- and nothing on the per-event path.
Events come through the one consuming loop (`runwatch.stream.kafka.consume`) from a plain
aiokafka consumer in the worker's group, a partition's batch at a time; decoding, clock
correction and the rules run in `LiveDriver.feed`. bench/worker.py measured Faust's own stream
path (`agent` + `stream.take_events`) at ~12k events/s on one core, with over 90% of the time
in Faust's per-message machinery, against ~100k through the plain consumer.

State is not kept in Faust tables. Every `checkpoint_every_s` seconds (or
`checkpoint_every_events` events) the worker stores each live partition's state with the
offset it covers on `runwatch.checkpoints` (`runwatch.stream.checkpoint` is the format,
`runwatch.stream.kafka.checkpoints` the topic), after what that state made is on
`runwatch.alerts`. The worker is split by concern: this module is the live path (batches,
wall-clock ticks, the group lease, when to checkpoint); `takeover.py` brings partitions the
group gives it up to date (newest checkpoint, re-read of the rest, only the missing
transitions out) while the live consumer holds them paused; `publish.py` puts output on
its topics in the order consumers rely on. The group's offsets are committed as it goes, so
Kafka's lag tools (kafka-consumer-groups.sh) show its lag; the recovery never reads them.

Its Kafka clients come from outside (`kafka`, `producer`): the settings' cluster and the Faust
app's producer in `runwatch worker`, an in-memory broker's in the unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import faust

from runwatch.emitters.exceptions import RunwatchError
from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.checkpoints import (
    HANDOVER_S,
    MAX_BYTES,
    PENDING,
    SETTLED,
    checkpoint_key,
    handover_key,
)
from runwatch.stream.kafka.consume import (
    LOG_APPEND_TIME,
    TP,
    ConsumingLoop,
    Group,
    Handler,
    Record,
    refused,
)
from runwatch.stream.kafka.publish import Producer, Publisher
from runwatch.stream.kafka.read import Ends, output_ends
from runwatch.stream.kafka.snapshot import CAN_FORK, Snapshot, SnapshotFailed
from runwatch.stream.kafka.takeover import Takeover, fed
from runwatch.stream.live import DEFAULT_GRACE, LiveDriver
from runwatch.stream.metrics.exporter import Limits
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.reading import ReadClock
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.stream.worker")


#: How often finished and long-silent runs are let go (`LiveDriver.evict`).
EVICT_EVERY_S = 10.0
#: How often the group's positions are committed (for lag tools only).
COMMIT_EVERY_S = 5.0


@dataclass
class WorkerSettings:
    """What `runwatch worker` is told on its command line."""

    bootstrap: str
    config: RulesConfig = field(default_factory=RulesConfig.default)
    partitions: int = 4
    topic_prefix: str = ""
    app_id: str = "runwatch-worker"
    tick_s: float = 0.5
    grace: float = DEFAULT_GRACE
    batch_max: int = 5000
    #: A worker that died is noticed by the group after this long (a restart waits for it).
    session_timeout: float = 10.0
    #: The broker holds a live fetch up to this long to fill it: fewer, larger batches cost
    #: less CPU per event at a fleet's steady trickle, for up to this much more alert delay
    #: (bench/fetch_wait.py); 0: answered as soon as a record is there.
    fetch_wait_s: float = 0.05
    say: Any = None  # callable(str) for status lines; default: stderr
    #: Serve Prometheus /metrics on this port (None: off; 0: a free port).
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    #: past this many runs, /metrics details only the runs with an alert (`Limits`)
    metrics_detailed_runs: int = Limits.detailed_runs
    #: TLS / SASL for every client: the Faust app's, the live and the rebuild consumers'.
    security: KafkaSecurity = PLAINTEXT
    #: Checkpoint each live partition this often, or after this many events (0: never).
    #: A stop or a rebalance hands partitions over checkpointed whatever the interval; it
    #: bounds what a crash costs (10 s: less, for three times the checkpoint CPU,
    #: docs/kubernetes.md)
    checkpoint_every_s: float = 30.0
    checkpoint_every_events: int = 1_000_000
    #: pickle checkpoints in a forked child while the live path goes on (`snapshot.py`),
    #: where the platform can fork; off (`--no-checkpoint-fork`), a checkpoint is made in
    #: place between polls and the live path waits for it (1.2 s at 5,000 runs:
    #: bench/checkpoint.py)
    checkpoint_fork: bool = CAN_FORK


class StreamWorker(Handler):
    """Owns the drivers of the partitions this worker holds, and the Faust app driving them;
    the consuming loop's handler for `runwatch.events`."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        kafka: clients.Connects | None = None,
        producer: Producer | None = None,
    ) -> None:
        """`kafka` and `producer`: where its consumers and the producer come from (default:
        the settings' cluster, and the Faust app's producer); a unit test gives it an
        in-memory broker's."""
        self.settings = settings
        self.kafka = kafka or clients.Connection(settings.bootstrap, settings.security)
        self._producer = producer
        self.topics = Topics(settings.topic_prefix)
        self.drivers: dict[int, LiveDriver] = {}  # partitions that are live
        self._evict_at = 0.0
        self.rebuilding: set[int] = set()
        self.wanted: set[int] = set()  # the partitions the group gave this worker
        #: the group's word that this worker is still a member, until then (monotonic):
        #: renewed by each heartbeat the coordinator answers and by each assignment
        self._leased_until = 0.0
        self._watched: Any = None  # the group coordinator whose heartbeats renew the lease
        #: per partition, output made while the lease had lapsed: published once it is
        #: renewed and the partition is still this worker's, else left to the new owner
        self._fenced: dict[int, list[tuple[list[Alert], list[Refused], list[RunView]]]] = {}
        self._clocks: dict[int, ReadClock] = {}  # per live partition, its reading's gaps
        self.assigned_once = False  # the consumer group has given this worker its share
        self._rebuild_tasks: set[asyncio.Task[None]] = set()
        #: the due checkpoints being made, off the polling loop (one batch at a time)
        self._checkpointing: asyncio.Task[None] | None = None
        self.loop: ConsumingLoop | None = None
        self._warned_create_time = False
        self._dead: list[Refused] = []  # records the loop isolated, to publish
        #: held while a driver's output is made and handed to the producer, so that a
        #: checkpoint never covers a transition the producer has not been given
        self._making = asyncio.Lock()
        #: the partitions a revoke promised a handover checkpoint of, with their drivers as
        #: they stood and until when (loop time) their new owners wait (`_promise`); the
        #: assignment after it keeps the promises (`_settle`)
        self._promised: dict[int, tuple[LiveDriver, float]] = {}
        self._settling: set[asyncio.Task[None]] = set()
        #: per partition: (when, driver.applied) of its last checkpoint, and its offset
        self._checkpointed: dict[int, tuple[float, int, int]] = {}
        self._commit_at = 0.0
        self._checkpoint_partitions = 1
        sweep_datadirs()
        self._datadir = tempfile.mkdtemp(prefix=f"{DATADIR_PREFIX}{os.getpid()}-")
        #: Which worker published an alert (a record header, outside the contract's body).
        self.name = f"{socket.gethostname()}/{os.getpid()}"
        self.metrics: WorkerMetrics | None = None
        if settings.metrics_port is not None:
            self.metrics = WorkerMetrics(
                self.drivers.values,
                settings.metrics_port,
                settings.metrics_host,
                ready=self.readiness,
                limits=Limits(detailed_runs=settings.metrics_detailed_runs),
            )
        self.app = self._build_app()
        self.publisher = Publisher(lambda: self.producer, self.topics, self.name, self.metrics)
        self.takeover = Takeover(self.kafka, self.topics, settings.app_id, self._driver,
                                 self.say, self._due, self._store)  # fmt: skip

    def readiness(self) -> tuple[bool, str]:
        """/readyz: in the consumer group (an assignment came, even an empty one: more
        workers than partitions leaves some idle) and every assigned partition rebuilt and
        live, i.e. caught up with its topic as of the takeover."""
        if not self.assigned_once:
            return False, "waiting for a partition assignment from the consumer group"
        if self.rebuilding:
            return False, f"rebuilding partitions {sorted(self.rebuilding)}"
        return True, f"live on partitions {sorted(self.drivers)}"

    @property
    def producer(self) -> Producer:
        """What alerts, dead letters, run views and checkpoints are published with."""
        return self._producer if self._producer is not None else self.app.producer

    def say(self, message: str) -> None:
        if self.settings.say is not None:
            self.settings.say(message)
        else:
            print(f"runwatch worker: {message}", file=sys.stderr, flush=True)

    # -- the Faust app ---------------------------------------------------------------------

    def _build_app(self) -> faust.App:
        s = self.settings
        app = faust.App(
            s.app_id,
            broker=f"kafka://{s.bootstrap}",
            broker_credentials=clients.faust_credentials(s.security),
            value_serializer="raw",
            key_serializer="raw",
            web_enabled=False,
            datadir=self._datadir,
            topic_partitions=s.partitions,
            topic_disable_leader=True,
            producer_linger_ms=1,
            producer_acks=-1,
            producer_max_request_size=MAX_BYTES + (1 << 20),  # a checkpoint in one record
        )
        # No Faust consumer at all: it would subscribe to nothing and crash.
        app.boot_strategy.enable_kafka_consumer = False
        app.task(self._consume)

        async def tick() -> None:
            await self.tick(time.time())

        app.timer(s.tick_s, on_leader=False)(tick)

        async def on_shutdown(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
            await self.shutdown()

        app.on_before_shutdown.connect(on_shutdown)
        return app

    async def prepare(self) -> None:
        """Create the topics before anything subscribes (so they get our settings)."""
        s = self.settings
        counts = await ensure_topics(s.bootstrap, self.topics, s.partitions, security=s.security)
        self._checkpoint_partitions = counts.get(self.topics.checkpoints) or 1
        if self.metrics is not None:
            await self.metrics.start()
            self.say(f"serving /metrics on port {self.metrics.server.port}")
        self.say(
            f"consuming {self.topics.events} ({counts.get(self.topics.events)} partitions) "
            f"as group {s.app_id}; alerts to {self.topics.alerts}"
        )

    async def _consume(self) -> None:
        s = self.settings
        tuning = clients.group_settings(s.session_timeout, s.fetch_wait_s, HANDOVER_S)
        consumer = self.kafka.consumer(group=s.app_id, **tuning)
        self.loop = ConsumingLoop(consumer, Group((self.topics.events,)), self,
                                  max_records=s.batch_max, name="worker")  # fmt: skip
        try:
            await self.loop.run()
        finally:
            self.loop = None

    # -- live path (the loop's handler) ----------------------------------------------------

    async def handle(self, records: list[Record]) -> None:
        """One partition's batch: feed its driver, publish what it made."""
        driver = self.drivers.get(records[0].partition)
        if driver is None:
            return  # being rebuilt: re-fetched from where the rebuild stops
        if records[-1].timestamp_type != LOG_APPEND_TIME and not self._warned_create_time:
            self._warned_create_time = True
            log.warning(
                "%s records carry the producer's time, not the broker's: clock skew "
                "correction is off (set message.timestamp.type=LogAppendTime on the topic)",
                self.topics.events,
            )
        async with self._making:
            alerts, dead = await fed(driver, records)  # in slices: a takeover's reads go on
            if self.metrics is not None:
                self.metrics.batch(records[-1].timestamp / 1000.0, len(dead))
            views = driver.engine.take_run_views()
            if alerts or dead or views:
                await self._publish_for(records[0].partition, alerts, dead, views)

    def dead(self, record: Record, reason: str) -> None:
        """A record that failed in the worker itself (not as invalid input): to the DLQ."""
        self._dead.append(refused(record, reason))

    async def turn(self) -> None:
        """Between polls: the group membership watched, output held while the lease lapsed,
        dead letters of isolated records, due checkpoints, commits."""
        if self.loop is not None:
            self._watch_membership(self.loop.consumer)
        if self._fenced and self._leased():
            async with self._making:
                fenced, self._fenced = self._fenced, {}
                for partition, held in sorted(fenced.items()):
                    if partition in self.drivers:  # still this worker's
                        for alerts, dead, views in held:
                            await self.publisher.publish(alerts, dead, views)
        if self._dead:
            dead, self._dead = self._dead, []
            await self.publisher.publish([], dead)
        now = time.time()
        if not self.settings.checkpoint_fork:
            for p in self._checkpoints_due(now):
                await self.checkpoint(p, now)
        elif self._checkpointing is None or self._checkpointing.done():
            due = self._checkpoints_due(now)
            if due:  # made off this loop: polling goes on while a child pickles
                self._checkpointing = asyncio.create_task(self._checkpoint_all(due, now))
        if now >= self._commit_at:
            self._commit_at = now + COMMIT_EVERY_S
            await self._commit()

    # -- checkpoints and commits -----------------------------------------------------------

    def _checkpoints_due(self, now: float, handover: bool = False) -> list[int]:
        """The live partitions with something new since their last checkpoint, whose
        interval has passed -- or, for a `handover`, whatever the interval."""
        due = []
        for p, driver in self.drivers.items():
            if driver.position is None or p in self._fenced:
                continue  # (a checkpoint covers only what is published)
            covered = self._checkpointed.get(p, (0.0, 0, -1))[2]
            if driver.position + 1 != covered and (handover or self._due(p, driver, now)):
                due.append(p)
        return due

    async def _hand_over(self) -> None:
        """This worker stopping: every live partition is checkpointed as it is now and the
        checkpoints flushed, so whoever gets one re-reads only what comes after instead of
        up to a checkpoint interval of records (a SIGKILL gives no such chance: the interval
        bounds that). Not while the lease has lapsed: a member the group expelled holds
        state that is the new owner's to make."""
        try:
            async with asyncio.timeout(HANDOVER_S):
                running = self._checkpointing
                if running is not None and not running.done():
                    await asyncio.wait([running])  # its outcome is its own, a cancel ours
                if not self._leased():
                    return
                now = time.time()
                await self._checkpoint_all(self._checkpoints_due(now, handover=True), now)
                await self.publisher.flush()
        except Exception as err:  # over HANDOVER_S (a broker away): the one before serves
            log.info("handover checkpoints cut short (%s: %s)", type(err).__name__, err)

    def _due(self, partition: int, driver: LiveDriver, now: float) -> bool:
        """Whether `partition`'s last checkpoint is older than the interval (in seconds or
        in events applied since)."""
        s = self.settings
        when, applied, _ = self._checkpointed.get(partition, (0.0, 0, -1))
        return (s.checkpoint_every_s > 0 and now - when >= s.checkpoint_every_s) or (
            s.checkpoint_every_events > 0 and driver.applied - applied >= s.checkpoint_every_events
        )

    async def _checkpoint_all(self, partitions: list[int], now: float) -> None:
        for p in partitions:
            try:
                await self.checkpoint(p, now)
            except asyncio.CancelledError:
                raise
            except Exception:  # said; the next turn tries again
                log.exception("partition %d: checkpoint failed", p)

    async def checkpoint(self, partition: int, now: float) -> bool:
        """Store the partition's state, with the offset it covers, once everything it made
        is on its topics; whether it was stored (a failure is said and counted: the next
        takeover replays from the checkpoint before). The state is taken as it is now; with
        `checkpoint_fork` it is pickled in a forked child while events go on being applied
        (`snapshot.py`), else in place."""
        driver = self.drivers.get(partition)
        if driver is None:
            return False
        return await self._checkpoint(partition, driver, now)

    async def _checkpoint(self, partition: int, driver: LiveDriver, now: float) -> bool:
        """`checkpoint` of `driver`: the partition's live one, or one a handover promised
        (given away since, and stored all the same: its new owner waits for it)."""
        if driver.position is None:
            return False
        mine = self.drivers.get(partition) is driver
        output = await self._output_ends()  # before the state: all it made is before them
        if mine and self.drivers.get(partition) is not driver:
            return False  # given away meanwhile: the new owner's to checkpoint
        async with self._making:  # no transition made and not yet handed to the producer
            if self._horizon(partition, driver, now)[1]:  # it holds the live runs only
                self._evict(partition, driver, now)
            offset, applied = driver.position + 1, driver.applied
            runs = len(driver.engine.runs)
            position: dict[str, Any] = {"offset": offset}
            if output is not None:
                position["output"] = output
            snapshot = Snapshot(driver, position, fork=self.settings.checkpoint_fork)
        try:
            data = await snapshot.data()
            forked = self.settings.checkpoint_fork
            gone = self.drivers.get(partition) is not driver or not self._leased()
            if mine and forked and gone:
                return False  # given away while the child pickled: the new owner's now
        except SnapshotFailed as err:
            log.warning("partition %d: checkpoint not made (%s); a takeover replays from the "
                        "one before", partition, err)  # fmt: skip
            if self.metrics is not None:
                self.metrics.checkpoints.failed.labels(str(partition)).inc()
            return False
        return await self._store(partition, applied, offset, data, runs, now, note=mine)

    async def _output_ends(self) -> Ends | None:
        """Where the output topics end now, for a checkpoint to keep (`read.output_ends`);
        None if the broker does not say (its takeover then reads them from the start)."""
        try:
            async with asyncio.timeout(HANDOVER_S):
                return await output_ends(self.kafka, self.topics)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.info("output topics' ends not known (%s: %s)", type(err).__name__, err)
            return None

    async def _store(
        self,
        partition: int,
        applied: int,
        offset: int,
        data: bytes,
        runs: int,
        now: float,
        note: bool = True,
    ) -> bool:
        """Put one checkpoint of `partition` (made when its driver had applied `applied`
        events) on the topic, once what the driver published is there; whether it was
        stored. `note`: the partition is this worker's (its next checkpoint is due from
        now)."""
        started = time.perf_counter()
        if note:
            self._checkpointed[partition] = (now, applied, offset)  # tried: due again later
        key = checkpoint_key(self.settings.app_id, self.topics.events, partition)
        target = partition % self._checkpoint_partitions
        try:
            if len(data) > MAX_BYTES:
                raise ValueError(f"{len(data)} bytes for {runs} runs, over {MAX_BYTES}")
            await self.publisher.checkpoint(key, data, target)
        except Exception as err:
            log.warning("partition %d: checkpoint not stored (%s: %s); a takeover replays "
                        "from the one before", partition, type(err).__name__, err)  # fmt: skip
            if self.metrics is not None:
                self.metrics.checkpoints.failed.labels(str(partition)).inc()
            return False
        if self.metrics is not None:
            self.metrics.checkpoints.stored(str(partition), len(data), runs,
                                            time.perf_counter() - started)  # fmt: skip
        return True

    async def _commit(self) -> None:
        """The live partitions' positions, for Kafka's lag tools; recovery never reads them."""
        loop = self.loop
        if loop is None:
            return
        offsets = {}
        for p in self.drivers:
            tp = TP(self.topics.events, p)
            if tp in loop.read:
                offsets[tp] = loop.read[tp]
        if not offsets:
            return
        try:
            await loop.consumer.commit(offsets)
        except Exception as err:  # a rebalance in between: the next commit has it
            log.info("commit skipped (%s)", err)

    async def tick(self, now: float) -> None:
        """Wall-clock time for conditions that ripen in silence -- but only as far as the
        worker knows it has read (`_horizon`): a pause of its own, a stall or a broker
        outage holds time, it does not make silence."""
        evict = now >= self._evict_at  # bounded state: finished and long-silent runs leave
        if evict:
            self._evict_at = now + EVICT_EVERY_S
        async with self._making:
            for p, driver in list(self.drivers.items()):
                if not self._owns(p, now):
                    continue  # judged by whoever holds it; by this worker once it knows
                horizon, caught_up = self._horizon(p, driver, now)
                out = driver.tick(horizon)
                views = driver.engine.take_run_views()
                if evict and caught_up:
                    self._evict(p, driver, now)
                if out or views:
                    await self._publish_for(p, out, [], views)

    def _owns(self, partition: int, now: float) -> bool:
        """Whether this worker may judge `partition` by the wall clock and publish what that
        makes: the partition is assigned to it and a fetch of it answered within the session
        timeout. A member the group expelled while it was paused has neither until it runs
        again -- and by the time a fresh fetch answers, its heartbeat has mostly learned it
        was expelled and the partition is revoked. What a zombie could still publish in
        that moment comes from records it read, so it is what the owner publishes, with
        the same deterministic transition ids, which notify and the history apply once.
        (Not transactions: a transactional producer per partition would fence it at the
        broker, but faust-streaming's producer has no per-partition transactional ids, and
        the ids already make a late write harmless.)"""
        loop = self.loop
        if loop is None or not self._leased():
            return False
        tp = TP(self.topics.events, partition)
        try:
            if tp not in loop.consumer.assignment():
                return False
            polled = loop.consumer.last_poll_timestamp(tp)
        except Exception:
            return False
        return polled is not None and now - polled / 1000.0 < self.settings.session_timeout

    def _leased(self) -> bool:
        """Whether the group confirmed this worker's membership within the session timeout
        (a heartbeat it answered, or an assignment). Always, where the coordinator cannot
        be watched."""
        return self._watched is False or time.monotonic() < self._leased_until

    def _renew(self) -> None:
        self._leased_until = time.monotonic() + self.settings.session_timeout

    def _watch_membership(self, consumer: Any) -> None:
        """Renew the lease on each heartbeat the group coordinator answers. A member the
        group expelled while it was paused gets no such answer (the coordinator says it
        does not know it): its lease lapses, and it publishes nothing until it has joined
        again. aiokafka keeps its last good heartbeat to itself, so its heartbeat call is
        wrapped (private API; without it the lease is always granted)."""
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or coordinator is self._watched:
            return
        beat = getattr(coordinator, "_do_heartbeat", None)
        if beat is None:
            self._watched = False
            return

        async def heartbeat() -> Any:
            answered = await beat()
            if answered:
                self._renew()
            return answered

        coordinator._do_heartbeat = heartbeat
        self._watched = coordinator
        self._renew()

    async def _publish_for(
        self, partition: int, alerts: list[Alert], dead: list[Refused], views: list[RunView]
    ) -> None:
        """Publish what a partition's driver made -- or, while the lease has lapsed, hold it
        (a zombie's output is the new owner's to publish)."""
        if self._leased() and partition not in self._fenced:
            await self.publisher.publish(alerts, dead, views)
        else:
            self._fenced.setdefault(partition, []).append((alerts, dead, views))

    def _horizon(self, partition: int, driver: LiveDriver, now: float) -> tuple[float, bool]:
        """(how far wall-clock time may go for `partition`'s silence rules, whether all of it
        is read): to the moment a fetch last answered with the partition's end (aiokafka's
        `last_poll_timestamp`) when everything up to that end is read -- silence until then
        is silence of the emitters; else to the broker time of the last record applied.
        After a pause of this worker (a long GC, SIGSTOP, a node freeze), a broker restart
        or any stall, no fetch has answered since: time holds until one does, and then a
        while longer for emitters that spooled through it (`runwatch.stream.reading`)."""
        held = min(now, driver.arrival + driver.grace)
        loop = self.loop
        if loop is None:
            return held, False
        tp = TP(self.topics.events, partition)
        try:
            high = loop.consumer.highwater(tp)
            polled = loop.consumer.last_poll_timestamp(tp)
        except Exception:  # not assigned any more
            return held, False
        clock = self._clocks.setdefault(partition, ReadClock())
        if polled is not None:
            clock.observe(polled / 1000.0)
        if high is None or polled is None or high > loop.read.get(tp, 0):
            return clock.limit(held, now), False
        return clock.limit(max(held, min(now, polled / 1000.0)), now), True

    @staticmethod
    def _evict(partition: int, driver: LiveDriver, now: float) -> None:
        finished, silent = driver.evict(now)
        if finished or silent:
            log.info("partition %d: %d finished and %d silent runs left the rules",
                     partition, len(finished), len(silent))  # fmt: skip

    # -- rebalances and restarts -----------------------------------------------------------

    async def revoked(self, partitions: set[TP]) -> None:
        """Partitions may be about to go to another worker: what we published must be on
        the topic before it reads the topic to learn what was published, and each new owner
        is promised a checkpoint as the partition stands now (`_promise`)."""
        with contextlib.suppress(Exception):
            await self.publisher.flush()
        await self._promise()

    async def _promise(self) -> None:
        """A revoke -- a worker joined, left or died: which partitions move is known only
        at the assignment, and checkpointing them all here would hold every member's live
        partitions until the slowest had pickled its state (seconds at thousands of runs).
        So each live partition with something new since its last checkpoint gets a PENDING
        marker on the checkpoints topic, and the worker rejoins at once; the assignment
        keeps the promise (`_settle`), with a checkpoint of the driver as it stands then (a
        batch fetched before the revoke may still have been applied: it is in there). A
        takeover waits for a promised checkpoint (`checkpoints.latest`)."""
        if not self._leased():
            return  # expelled: the state is the new owner's to make
        try:
            async with asyncio.timeout(HANDOVER_S):
                for p in self._checkpoints_due(time.time(), handover=True):
                    if p not in self._promised:
                        waited_until = asyncio.get_running_loop().time() + HANDOVER_S
                        await self._mark(p, PENDING)
                        self._promised[p] = (self.drivers[p], waited_until)
        except Exception as err:  # over HANDOVER_S (a broker away): the checkpoint before serves
            log.info("handover not promised (%s: %s)", type(err).__name__, err)

    async def _mark(self, partition: int, word: bytes) -> None:
        key = handover_key(self.settings.app_id, self.topics.events, partition)
        await self.publisher.checkpoint(key, word, partition % self._checkpoint_partitions)

    async def _settle(self, promised: dict[int, tuple[LiveDriver, float]], kept: set[int]) -> None:
        """Keep a revoke's promises, side by side (a new owner waits on each of its own):
        SETTLED for the partitions this worker `kept` (no one waits on them), a checkpoint
        of the driver left behind for each that went elsewhere -- or SETTLED where that
        fails, so its new owner waits no longer."""
        await asyncio.gather(*(self._keep_promise(p, *promised[p], kept=p in kept)
                               for p in sorted(promised)))  # fmt: skip

    async def _keep_promise(
        self, partition: int, driver: LiveDriver, waited_until: float, *, kept: bool
    ) -> None:
        """One partition's promise. Not once its new owner has stopped waiting: it went on
        from the checkpoint before, and the one it stores must stay the newest."""
        try:
            if kept:
                async with asyncio.timeout(HANDOVER_S):
                    await self._mark(partition, SETTLED)
                return
            async with asyncio.timeout_at(waited_until):
                if not await self._checkpoint(partition, driver, time.time()):
                    await self._mark(partition, SETTLED)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the new owner waits out HANDOVER_S at most
            log.info("partition %d: handover not kept (%s: %s)", partition,
                     type(err).__name__, err)  # fmt: skip

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        """The consumer group gave this worker `partitions`: keep the drivers of those it
        already had (the loop goes on where it read up to) and the rebuilds still under way
        of those it keeps, drop the others, rebuild the new ones in the background while the
        loop holds them paused."""
        numbers = {tp.partition for tp in partitions if tp.topic == self.topics.events}
        self.say(f"assigned partitions {sorted(numbers)}")
        self.assigned_once = True
        self.wanted = numbers
        self._renew()  # the group has just confirmed this member
        if self._promised:
            promised, self._promised = self._promised, {}
            _keep(self._settling, self._settle(promised, numbers & set(promised)))
        for p in list(self._fenced):
            if p not in numbers:
                del self._fenced[p]  # the new owner's rebuild publishes it
        for p in list(self.drivers):
            if p not in numbers:
                del self.drivers[p]
                self._checkpointed.pop(p, None)
                self._clocks.pop(p, None)
        self.rebuilding &= numbers  # a rebuild of one given away is dropped when it ends
        new = sorted(p for p in numbers if p not in self.drivers and p not in self.rebuilding)
        if self.loop is not None and (self.rebuilding or new):
            # an assignment starts every partition unpaused: those still rebuilding too
            self.loop.pause([TP(self.topics.events, p) for p in sorted(self.rebuilding | set(new))])
        if new:
            self.rebuilding.update(new)
            _keep(self._rebuild_tasks, self._rebuild(new))
        return {}

    async def _rebuild(self, partitions: list[int]) -> None:
        """Bring `partitions` up to date (`takeover.py`), then publish what is missing and
        let the live loop go on from where the re-read stopped."""
        # side by side: reading a checkpoint, or waiting for a promised one, is mostly I/O
        got = await asyncio.gather(*(self.takeover.restore(p) for p in partitions))
        restored = dict(zip(partitions, got, strict=True))
        for p, start in restored.items():
            self._checkpointed[p] = (time.time(), start.driver.applied, start.offset)
        done = await self.takeover.rebuild(partitions, restored, self.rebuilding.__contains__)
        await self.publisher.publish(done.alerts, done.dead, done.views)
        live = []
        for p in done.kept:
            if p not in self.rebuilding:
                continue  # given away while its transitions were published
            d = done.drivers[p]
            self.drivers[p] = d
            self._clocks[p] = ReadClock.after(d.arrival)
            self.rebuilding.discard(p)
            if self.metrics is not None:
                self.metrics.live(d)
            self._go_on(p, done.resume[p])
            live.append(p)
        # said as they go live (/readyz says so too), before the checkpoints below
        rate = done.events / done.seconds if done.seconds > 0 else 0.0
        dropped = sorted(set(partitions) - set(live))
        gone = f"; {dropped} given away meanwhile" if dropped else ""
        self.say(
            f"live on partitions {live}: rebuilt from {done.events} events in "
            f"{done.seconds:.2f}s ({rate:,.0f} events/s), {len(done.alerts)} missing alert "
            f"transitions published ({done.output_read} alert and dead-letter records "
            f"read){gone}"
        )
        now = time.time()
        for p in live:  # a takeover after this one starts from here
            await self.checkpoint(p, now)

    def _driver(self, partition: int) -> LiveDriver:
        """A new driver of `partition`, whose engine notes the run views to publish."""
        s = self.settings
        driver = LiveDriver(s.config, topic=self.topics.events, partition=partition,
                            grace=s.grace)  # fmt: skip
        driver.engine.views_changed = set()
        return driver

    def _go_on(self, partition: int, offset: int) -> None:
        """The live consumer goes on from where the rebuild stopped."""
        if self.loop is None:
            return
        tp = TP(self.topics.events, partition)
        try:
            self.loop.seek(tp, offset)
            self.loop.resume([tp])
        except Exception as err:  # taken away meanwhile: the next assignment sorts it out
            log.info("seek %s/%d: %r", tp.topic, partition, err)

    async def shutdown(self) -> None:
        """Stopping (a rolling restart, a scale-down): rebuilds under way are dropped, the
        handovers of partitions already given away finish, and every partition this worker
        holds is checkpointed before it leaves the group (`_hand_over`)."""
        for task in list(self._rebuild_tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._settling:  # handovers under way: their new owners wait for them
            await asyncio.wait(self._settling, timeout=HANDOVER_S)
        await self._hand_over()  # promises of a revoke not yet settled among them
        with contextlib.suppress(Exception):  # the producer may be stopped already
            await self.publisher.flush()
        if self.metrics is not None:
            await self.metrics.close()

    def cleanup(self) -> None:
        shutil.rmtree(self._datadir, ignore_errors=True)


def _keep(tasks: set[asyncio.Task[None]], work: Coroutine[Any, Any, None]) -> None:
    """Run `work` in the background, held in `tasks` until it ends (the loop keeps only a
    weak reference to a task; `shutdown` waits for or cancels what is held)."""
    task = asyncio.ensure_future(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


#: Faust's data directory of a worker: `runwatch-worker-PID-...` in the temp directory.
DATADIR_PREFIX = "runwatch-worker-"


def sweep_datadirs(root: str | None = None) -> list[str]:
    """Remove the data directories of workers that are gone (killed with SIGKILL, a worker
    cannot clean up after itself); those of live processes stay. Returns what went."""
    root = root or tempfile.gettempdir()
    gone = []
    for entry in os.scandir(root):
        name = entry.name
        if not name.startswith(DATADIR_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        pid = name[len(DATADIR_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        gone.append(entry.path)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class WorkerStartFailed(RunwatchError):
    """The worker could not set up its topics or metrics endpoint; the message says why."""

    status = 1


def run(settings: WorkerSettings, *, log_level: str = "warning") -> int:
    """Run a worker until SIGTERM / Ctrl-C (Faust's `Worker` handles the signals); the exit
    status. Raises WorkerStartFailed when Kafka cannot be reached to create the topics."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    worker = StreamWorker(settings)
    try:
        try:
            loop.run_until_complete(asyncio.wait_for(worker.prepare(), 60))
        except Exception as err:
            why = settings.security.scrub(f"{type(err).__name__}: {err}")
            raise WorkerStartFailed(f"cannot reach Kafka at {settings.bootstrap}: {why}") from None
        runner = faust.Worker(
            worker.app, loop=loop, loglevel=log_level.upper(), quiet=True, redirect_stdouts=False
        )
        runner.spinner = None  # no terminal escape codes in logs
        try:
            with tuned_for_consuming():
                runner.execute_from_commandline()
        except SystemExit as done:
            return int(done.code or 0)
        return 0
    finally:
        worker.cleanup()

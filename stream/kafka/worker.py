"""The stream worker's live path: the partitions of `runwatch.events` it holds, fed batch by
batch to their `LiveDriver`s, ticked by the wall clock, their output published.

The consuming loop (`consume.py`) hands `handle` one partition's batch at a time; decoding,
clock correction and the rules run in `LiveDriver.feed`; what a driver makes goes out through
its partition's publisher (`publish.py`), in a transaction committed after each poll (`turn`),
whose producer fences whoever held the partition before; the wall clock reaches the silence
rules only as far as the worker has read (`horizon.py`). Split off by concern:
`checkpointing.py`, `handover.py`, `ownership.py` and `takeover.py`, and what Faust hosts,
`host.py`. Its Kafka clients come from outside (`kafka`): the settings' cluster in `runwatch
worker`, an in-memory broker's in the unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from itertools import groupby
from typing import Any

from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.checkpointer import Checkpointer
from runwatch.stream.fleet.feed import FleetFeed
from runwatch.stream.fleet.members import Membership
from runwatch.stream.kafka import clients, consume
from runwatch.stream.kafka.checkpointing import Checkpointing
from runwatch.stream.kafka.checkpoints import HANDOVER_S, MAX_BYTES, KafkaCheckpoints
from runwatch.stream.kafka.consume import TP, ConsumingLoop, Group, Handler, Record, refused
from runwatch.stream.kafka.handover import Handover
from runwatch.stream.kafka.held import LoopHolds
from runwatch.stream.kafka.horizon import Horizon
from runwatch.stream.kafka.ownership import Ownership
from runwatch.stream.kafka.publish import Publisher, TxnProducer
from runwatch.stream.kafka.read import output_ends
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.kafka.takeover import Takeover, fed
from runwatch.stream.live import LiveDriver
from runwatch.stream.metrics.exporter import Limits
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.refused import Refused
from runwatch.stream.rules.shared_cause import judged

log = logging.getLogger("runwatch.stream.worker")

#: How often finished and long-silent runs are let go (`LiveDriver.evict`).
EVICT_EVERY_S = 10.0


class StreamWorker(Handler):
    """Owns the drivers of the partitions this worker holds; the consuming loop's handler
    for `runwatch.events`."""

    def __init__(self, settings: WorkerSettings, *, kafka: clients.Connects | None = None) -> None:
        """`kafka`: where its consumers and producers come from (default: the settings'
        cluster); a unit test gives it an in-memory broker's."""
        s = self.settings = settings
        self.say: Callable[[str], None] = s.say or _stderr  # status lines
        self.kafka = kafka or clients.Connection(s.bootstrap, s.security)
        self.app: Any = None  # the Faust app hosting it (`host.build_app`)
        self.topics = Topics(s.topic_prefix)
        self.drivers: dict[int, LiveDriver] = {}  # partitions that are live
        #: what each partition tells the fleet stage (none: fleet incidents are off)
        self.feeds: dict[int, FleetFeed] = {}
        #: the fleet stage's decisions, stamped on the transitions (`fleet_members.py`)
        self.membership = Membership()
        self.rebuilding: set[int] = set()
        self.assigned_once = False  # the consumer group has given this worker its share
        self.loop: ConsumingLoop | None = None
        self.horizon = Horizon(lambda: self.loop, self.topics.events, s.session_timeout)
        self.ownership = Ownership(self)  # takeovers, and partitions lost to fencing
        self._dead: list[Refused] = []  # records the loop isolated, to publish
        self._warned_create_time = False
        self._evict_at = 0.0
        #: held while a driver's output is made and handed to the producer, so that a
        #: checkpoint never covers a transition the producer has not been given
        self._making = asyncio.Lock()
        #: Which worker published an alert (a record header, outside the contract's body).
        self.name = f"{socket.gethostname()}/{os.getpid()}"
        self.holds = LoopHolds()  # the longest its loop went without a turn: no heartbeat
        self.metrics: WorkerMetrics | None = None
        if s.metrics_port is not None:
            limits = Limits(detailed_runs=s.metrics_detailed_runs)
            self.metrics = WorkerMetrics(self.drivers.values, s.metrics_port, s.metrics_host,
                                         ready=self.readiness, limits=limits,
                                         held=lambda: self.holds.longest)  # fmt: skip
        self.publisher = Publisher(self._producer, self.topics, s.app_id, self.name,
                                   self.metrics, lost=self.ownership.lost,
                                   stamp=self.membership.stamp)  # fmt: skip
        store = KafkaCheckpoints(self.kafka, self.topics, s.app_id, self.publisher.of)
        self.checkpointing = Checkpointing(
            Checkpointer(s.checkpoint_every_s, s.checkpoint_every_events), store, self.drivers,
            self._making, fork=s.checkpoint_fork,
            ends=lambda: output_ends(self.kafka, self.topics), prune=self._prune,
            metrics=self.metrics,
        )  # fmt: skip
        self.handover = Handover(self.checkpointing, store, self.publisher)
        self.takeover = Takeover(self.kafka, self.topics, store, self._driver, self.say,
                                 self.checkpointing.rereading_due, self.checkpointing.store_one,
                                 self.rebuilding.__contains__)  # fmt: skip

    def readiness(self) -> tuple[bool, str]:
        """/readyz: in the consumer group (an assignment came, even an empty one: more
        workers than partitions leaves some idle) and every assigned partition rebuilt and
        live, i.e. caught up with its topic as of the takeover."""
        if not self.assigned_once:
            return False, "waiting for a partition assignment from the consumer group"
        if self.rebuilding:
            return False, f"rebuilding partitions {sorted(self.rebuilding)}"
        return True, f"live on partitions {sorted(self.drivers)}"

    def _producer(self, transactional_id: str) -> TxnProducer:
        """A transactional producer (one per input partition, `publish.py`), whose requests
        take a checkpoint in one record."""
        made: TxnProducer = self.kafka.producer(
            transactional_id, max_request_size=MAX_BYTES + (1 << 20)
        )
        return made

    async def consume(self) -> None:
        """The consuming loop, as a member of the group, until cancelled."""
        s = self.settings
        tuning = clients.group_settings(s.session_timeout, s.fetch_wait_s, HANDOVER_S)
        consumer = self.kafka.consumer(group=s.app_id, **tuning)
        self.loop = ConsumingLoop(consumer, Group((self.topics.events,)), self, name="worker",
                                  max_records=s.batch_max)  # fmt: skip
        watch = asyncio.ensure_future(self.holds.watch())
        try:
            await self.loop.run()
        finally:
            self.loop = None
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    # -- the live path (the loop's handler) --------------------------------------------------

    async def handle(self, records: list[Record]) -> None:
        """One partition's batch: feed its driver, publish what it made."""
        partition = records[0].partition
        driver = self.drivers.get(partition)
        if driver is None:
            return  # being rebuilt: re-fetched from where the rebuild stops
        if records[-1].timestamp_type != consume.LOG_APPEND_TIME and not self._warned_create_time:
            self._warned_create_time = True
            log.warning("%s records carry the producer's time, not the broker's: clock skew "
                        "correction is off (set message.timestamp.type=LogAppendTime on the "
                        "topic)", self.topics.events)  # fmt: skip
        self.horizon.observe(partition, driver)  # a gap before these records holds silence
        async with self._making:
            alerts, dead = await fed(driver, records)  # in slices: a takeover's reads go on
            if self.metrics is not None:
                self.metrics.batch(records[-1].timestamp / 1000.0, len(dead))
            views = driver.engine.take_run_views()
            fleet = self.fleet_records(partition, driver, alerts)
            if alerts or dead or views or fleet:
                await self.publisher.of(partition).publish(alerts, dead, views, fleet)

    def dead(self, record: Record, reason: str) -> None:
        """A record that failed in the worker itself (not as invalid input): to the DLQ."""
        self._dead.append(refused(record, reason))

    async def turn(self) -> None:
        """Between polls: dead letters of isolated records, the partitions' transactions
        committed, lost partitions looked into, due checkpoints, the group's offsets."""
        if self._dead:
            dead, self._dead = self._dead, []
            for p, letters in groupby(dead, key=lambda d: d.partition or 0):
                await self.publisher.of(p).publish([], list(letters))
        await self.publisher.commit()
        if self.ownership.lost_ones:
            await self.ownership.look_into_lost()
        await self.checkpointing.turn(time.time())
        if self.loop is not None:  # for Kafka's lag tools; the recovery never reads them
            await self.loop.commit_read([TP(self.topics.events, p) for p in self.drivers])

    async def tick(self, now: float) -> None:
        """Wall-clock time for conditions that ripen in silence -- but only as far as the
        worker knows it has read (`horizon.py`): a pause of its own, a stall or a broker
        outage holds time, it does not make silence."""
        evict = now >= self._evict_at  # bounded state: finished and long-silent runs leave
        if evict:
            self._evict_at = now + EVICT_EVERY_S
        async with self._making:
            for p, driver in list(self.drivers.items()):
                if not self.horizon.owns(p, now):
                    continue  # judged by whoever holds it; by this worker once it knows
                horizon, caught_up = self.horizon.of(p, driver, now)
                out = driver.tick(horizon)
                views = driver.engine.take_run_views()
                if evict and caught_up:
                    _evict(p, driver, now)
                fleet = self.fleet_records(p, driver, out)
                if out or views or fleet:
                    await self.publisher.of(p).publish(out, [], views, fleet)

    def _prune(self, partition: int, driver: LiveDriver, now: float) -> None:
        """Before a checkpoint: finished and silent runs leave, where all is read (so that
        it holds the live runs only)."""
        if self.horizon.of(partition, driver, now)[1]:
            _evict(partition, driver, now)

    # -- rebalances and restarts -------------------------------------------------------------

    async def revoked(self, partitions: set[TP]) -> None:
        """Partitions may be about to move: what we published must be committed before a
        new owner reads it, and it is promised a checkpoint (`Handover.promise`)."""
        started = time.perf_counter()
        with contextlib.suppress(Exception):
            await self.publisher.commit()
        await self.handover.promise()
        numbers = sorted(tp.partition for tp in partitions if tp.topic == self.topics.events)
        if numbers:  # (the group's first join revokes nothing)
            self.say(f"rebalance: partitions {numbers} revoked, their output committed and "
                     f"handovers promised in {time.perf_counter() - started:.2f}s")  # fmt: skip

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        """The consumer group gave this worker `partitions`: keep the drivers of those it
        already had (the loop goes on where it read up to) and the rebuilds still under way
        of those it keeps, drop the others, rebuild the new ones in the background while the
        loop holds them paused."""
        numbers = {tp.partition for tp in partitions if tp.topic == self.topics.events}
        self.say(f"assigned partitions {sorted(numbers)}")
        self.assigned_once = True
        handing = set(self.handover.promised) - numbers  # their checkpoints go out still
        self.handover.assigned(numbers)
        self.publisher.keep(numbers, handing)
        self.ownership.lost_ones.clear()  # the group has said: those still ours are rebuilt
        for p in list(self.drivers):
            if p not in numbers:
                del self.drivers[p]
                self.feeds.pop(p, None)
                self.checkpointing.schedule.forget(p)
        self.rebuilding &= numbers  # a rebuild of one given away is dropped when it ends
        new = sorted(p for p in numbers if p not in self.drivers and p not in self.rebuilding)
        if self.loop is not None and (self.rebuilding or new):
            # an assignment starts every partition unpaused: those still rebuilding too
            self.loop.pause([TP(self.topics.events, p) for p in sorted(self.rebuilding | set(new))])
        if new:
            self.rebuilding.update(new)
            self.ownership.take(new)
        return {}

    def _driver(self, partition: int) -> LiveDriver:
        """A new driver of `partition`, whose engine notes the run views to publish."""
        s = self.settings
        driver = LiveDriver(s.config, topic=self.topics.events, partition=partition,
                            grace=s.grace, arrival_gaps=True)  # fmt: skip
        driver.engine.views_changed = set()
        if s.fleet_feed and judged(s.config):
            self.feeds[partition] = FleetFeed(partition)
        return driver

    def fleet_records(self, partition: int, driver: LiveDriver, alerts: list[Alert]) -> list[Any]:
        """What goes to the fleet stage with `alerts` (`runwatch.stream.fleet.feed`)."""
        feed = self.feeds.get(partition)
        return [] if feed is None else feed.records(alerts, driver.engine)

    async def shutdown(self) -> None:
        """Stopping (a rolling restart, a scale-down): rebuilds under way are dropped, and
        the partitions handed over (`Handover.stop`) before it leaves the group."""
        await self.ownership.cancel()
        await self.handover.stop()
        with contextlib.suppress(Exception):  # the broker may be away
            await self.publisher.close()
        if self.metrics is not None:
            await self.metrics.close()


def _stderr(message: str) -> None:
    print(f"runwatch worker: {message}", file=sys.stderr, flush=True)


def _evict(partition: int, driver: LiveDriver, now: float) -> None:
    finished, silent = driver.evict(now)
    if finished or silent:
        log.info("partition %d: %d finished and %d silent runs left the rules",
                 partition, len(finished), len(silent))  # fmt: skip

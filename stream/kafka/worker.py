"""The stream worker: a thin faust-streaming app around `LiveDriver`s.

Faust hosts the worker -- its life cycle and signals (`faust.Worker`), the wall-clock timer,
the producer that publishes alerts and dead letters -- and nothing on the per-event path.
Events are fetched in batches by a plain aiokafka consumer in the worker's consumer group
(`consumer="direct"`, the default): bench/worker.py measured Faust's own stream path
(`agent` + `stream.take_events`, kept as `consumer="faust"`) at ~12k events/s on one core
with over 90% of the time in Faust's per-message machinery (thread hand-off, queues,
per-event acks and sensors) and ~7% in runwatch's decode + rules. Either way, decoding,
clock correction and the rules run in `LiveDriver.feed` over plain (bytes, append time,
offset) tuples.

State is not kept in Faust tables. A partition the worker takes over (at start, or in a
rebalance) is rebuilt by re-reading it from the start with a second, group-less consumer
(`kafka_io.read_to_end`) while the live consumer holds it paused; the alerts this makes are
held back, `runwatch.alerts` is read to learn what was already published, and only the
missing transitions go out. The live consumer then seeks to where the rebuild stopped.
Offsets are never committed: the rebuild is the recovery. Why not changelog tables: the
state is a deterministic fold of the partition, one re-read costs a pass at ~75k events/s,
and Faust's table recovery is one of its known weak spots.
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import faust
import orjson
from aiokafka.abc import ConsumerRebalanceListener

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka.io import (
    ensure_topics,
    faust_credentials,
    group_consumer,
    read_published,
    read_to_end,
)
from runwatch.stream.live import DEFAULT_GRACE, DeadLetter, LiveDriver, Record
from runwatch.stream.metrics.worker import WorkerMetrics

log = logging.getLogger("runwatch.stream.worker")

LOG_APPEND_TIME = 1  # Kafka's timestamp type for broker-stamped records


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
    batch_within: float = 0.02
    #: "direct": batches from a plain aiokafka group consumer; "faust": Faust's agent
    #: stream with `take_events` (slower; kept for comparison).
    consumer: str = "direct"
    #: A worker that died is noticed by the group after this long (a restart waits for it).
    session_timeout: float = 10.0
    say: Any = None  # callable(str) for status lines; default: stderr
    #: Serve Prometheus /metrics on this port (None: off; 0: a free port).
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    #: TLS / SASL for every client: the Faust app's, the live and the rebuild consumers'.
    security: KafkaSecurity = PLAINTEXT


class StreamWorker:
    """Owns the drivers of the partitions this worker holds, and the Faust app driving them."""

    def __init__(self, settings: WorkerSettings) -> None:
        if settings.consumer not in ("direct", "faust"):
            raise ValueError(f"consumer must be 'direct' or 'faust', not {settings.consumer!r}")
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.drivers: dict[int, LiveDriver] = {}  # partitions that are live
        self.resume_at: dict[int, int] = {}  # first offset the live path applies
        self.rebuilding: set[int] = set()
        self.assigned_once = False  # the consumer group has given this worker its share
        self._rebuild_task: asyncio.Task[None] | None = None
        self._direct: Any = None  # the aiokafka consumer in direct mode
        self._warned_create_time = False
        self.published = 0
        self.dead_letters = 0
        self._datadir = tempfile.mkdtemp(prefix="runwatch-worker-")
        #: Which worker published an alert (a record header, outside the contract's body).
        self.name = f"{socket.gethostname()}/{os.getpid()}"
        self._headers = [("runwatch-worker", self.name.encode())]
        self.metrics: WorkerMetrics | None = None
        if settings.metrics_port is not None:
            self.metrics = WorkerMetrics(
                self.drivers.values,
                settings.metrics_port,
                settings.metrics_host,
                ready=self.readiness,
            )
        self.app = self._build_app()

    def readiness(self) -> tuple[bool, str]:
        """/readyz: in the consumer group (an assignment came, even an empty one: more
        workers than partitions leaves some idle) and every assigned partition rebuilt and
        live, i.e. caught up with its topic as of the takeover."""
        if not self.assigned_once:
            return False, "waiting for a partition assignment from the consumer group"
        if self.rebuilding:
            return False, f"rebuilding partitions {sorted(self.rebuilding)}"
        return True, f"live on partitions {sorted(self.drivers)}"

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
            broker_credentials=faust_credentials(s.security),
            value_serializer="raw",
            key_serializer="raw",
            web_enabled=False,
            datadir=self._datadir,
            topic_partitions=s.partitions,
            topic_disable_leader=True,
            consumer_auto_offset_reset="earliest",
            stream_buffer_maxsize=max(4 * s.batch_max, 4096),
            producer_linger_ms=1,
            producer_acks=-1,
            broker_session_timeout=s.session_timeout,
            broker_heartbeat_interval=max(0.5, s.session_timeout / 5),
        )
        if s.consumer == "faust":
            events = app.topic(self.topics.events, key_type=bytes, value_type=bytes,
                               key_serializer="raw", value_serializer="raw")  # fmt: skip

            async def consume(stream: Any) -> None:
                async for batch in stream.take_events(s.batch_max, within=s.batch_within):
                    ts_type = batch[-1].message.timestamp_type
                    await self.process([_faust_record(e.message) for e in batch], ts_type)

            app.agent(events, name="runwatch-events")(consume)

            async def on_assigned(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
                assigned: Iterable[Any] = args[0] if args else kw.get("assigned", ())
                self.assign({tp.partition for tp in assigned if tp.topic == self.topics.events})

            app.on_partitions_assigned.connect(on_assigned)
        else:
            # No Faust consumer at all: it would subscribe to nothing and crash.
            app.boot_strategy.enable_kafka_consumer = False
            app.task(self._consume_direct)

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
        if self.metrics is not None:
            await self.metrics.start()
            self.say(f"serving /metrics on port {self.metrics.server.port}")
        self.say(
            f"consuming {self.topics.events} ({counts.get(self.topics.events)} partitions) "
            f"as group {s.app_id}; alerts to {self.topics.alerts}"
        )

    # -- the direct consumer ---------------------------------------------------------------

    async def _consume_direct(self) -> None:
        s = self.settings
        consumer = self._direct = group_consumer(
            s.bootstrap, s.app_id, s.session_timeout, s.security
        )
        await consumer.start()
        try:
            consumer.subscribe([self.topics.events], listener=_Listener(self))
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=s.batch_max)
                out: list[tuple[int, bytes | None, float, int]] = []
                ts_type = LOG_APPEND_TIME
                for tp, records in batch.items():
                    p = tp.partition
                    out += [(p, r.value, r.timestamp / 1000.0, r.offset) for r in records]
                    ts_type = records[-1].timestamp_type
                if out:
                    await self.process(out, ts_type)
        finally:
            self._direct = None
            await consumer.stop()

    # -- live path -------------------------------------------------------------------------

    async def process(
        self, records: Sequence[tuple[int, bytes | None, float, int]], ts_type: int = 1
    ) -> None:
        """One batch: split by partition, skip what the rebuild covered, feed the drivers."""
        if ts_type != LOG_APPEND_TIME and not self._warned_create_time:
            self._warned_create_time = True
            log.warning(
                "%s records carry the producer's time, not the broker's: clock skew "
                "correction is off (set message.timestamp.type=LogAppendTime on the topic)",
                self.topics.events,
            )
        parts: dict[int, list[Record]] = {}
        for p, value, ts, offset in records:
            mine = parts.get(p)
            if mine is None:
                mine = parts[p] = []
            mine.append((value, ts, offset))
        alerts: list[Alert] = []
        dead: list[DeadLetter] = []
        for p, mine in parts.items():
            driver = self.drivers.get(p)
            if driver is None:
                continue  # not ours, or being rebuilt: re-fetched from resume_at after it
            start = self.resume_at[p]
            if mine[0][2] < start:
                mine = [r for r in mine if r[2] >= start]
                if not mine:
                    continue
            self.resume_at[p] = mine[-1][2] + 1
            got, letters = driver.feed(mine)
            alerts += got
            dead += letters
        if self.metrics is not None:
            self.metrics.batch(records, len(dead))
        if alerts or dead:
            await self._publish(alerts, dead)

    async def tick(self, now: float) -> None:
        """Wall-clock time for conditions that ripen in silence; a partition the worker is
        behind on only advances to the broker time of the last record it applied."""
        out: list[Alert] = []
        for p, driver in list(self.drivers.items()):
            high = self._highwater(p)
            behind = high is not None and high > self.resume_at.get(p, 0)
            out += driver.tick(min(now, driver.arrival + driver.grace) if behind else now)
        if out:
            await self._publish(out, [])

    def _highwater(self, partition: int) -> int | None:
        try:
            if self._direct is not None:
                high = self._direct.highwater(_aio_tp(self.topics.events, partition))
            elif self.settings.consumer == "faust":
                high = self.app.consumer.highwater(_tp(self.topics.events, partition))
            else:
                return None
        except Exception:  # not assigned any more, or not fetched yet
            return None
        return cast(int | None, high)

    async def _publish(self, alerts: list[Alert], dead: list[DeadLetter]) -> None:
        producer = self.app.producer
        headers = self._headers
        for alert in alerts:
            value = orjson.dumps(alert.to_dict())
            await producer.send(self.topics.alerts, alert.run.encode(), value, None, None, headers)
        for letter in dead:
            key = f"{letter.topic}:{letter.partition}:{letter.offset}".encode()
            await producer.send(self.topics.dlq, key, letter.to_json(), None, None, None)
        self.published += len(alerts)
        if self.metrics is not None:
            self.metrics.published(alerts)
        self.dead_letters += len(dead)

    # -- rebalances and restarts -----------------------------------------------------------

    async def revoked(self) -> None:
        """Partitions are about to go to another worker: what we published must be on the
        topic before it reads the topic to learn what was published."""
        with contextlib.suppress(Exception):
            await self.app.producer.flush()

    def assign(self, partitions: set[int]) -> None:
        """The consumer group gave this worker `partitions`: keep the drivers of those it
        already had, drop the others, rebuild the new ones in the background."""
        self.say(f"assigned partitions {sorted(partitions)}")
        self.assigned_once = True
        if self._rebuild_task is not None and not self._rebuild_task.done():
            self._rebuild_task.cancel()  # what it was rebuilding starts over below
        self.rebuilding.clear()
        for p in list(self.drivers):
            if p not in partitions:
                del self.drivers[p], self.resume_at[p]
            elif self._direct is not None:  # a rebalance resets positions: go on from ours
                self._direct.seek(_aio_tp(self.topics.events, p), self.resume_at[p])
        new = sorted(p for p in partitions if p not in self.drivers)
        if new:
            self.rebuilding.update(new)
            if self._direct is not None:
                self._direct.pause(*(_aio_tp(self.topics.events, p) for p in new))
            self._rebuild_task = asyncio.ensure_future(self._rebuild(new))

    async def _rebuild(self, partitions: list[int]) -> None:
        s = self.settings
        started = time.perf_counter()
        drivers = {
            p: LiveDriver(s.config, topic=self.topics.events, partition=p, grace=s.grace)
            for p in partitions
        }
        for d in drivers.values():
            d.start_replay()
        published, dead_upto = await read_published(s.bootstrap, self.topics, s.security)
        resume = dict.fromkeys(partitions, 0)
        count = 0
        async for p, records in read_to_end(
            s.bootstrap, self.topics.events, partitions, follow=True, security=s.security
        ):
            drivers[p].feed([(r.value, r.timestamp / 1000.0, r.offset) for r in records])
            resume[p] = records[-1].offset + 1
            count += len(records)
        read_s = time.perf_counter() - started
        out: list[Alert] = []
        dead: list[DeadLetter] = []
        now = time.time()
        for p, d in drivers.items():
            alerts, letters = d.finish_replay(published, now, dead_after=dead_upto.get(p, -1))
            out += alerts
            dead += letters
        await self._publish(out, dead)
        for p, d in drivers.items():
            self.drivers[p] = d
            self.resume_at[p] = resume[p]
            self.rebuilding.discard(p)
            if self.metrics is not None:
                self.metrics.live(d)
            await self._seek(p, resume[p])
        rate = count / read_s if read_s > 0 else 0.0
        self.say(
            f"live on partitions {partitions}: rebuilt from {count} events in {read_s:.2f}s "
            f"({rate:,.0f} events/s), {len(out)} missing alert transitions published"
        )

    async def _seek(self, partition: int, offset: int) -> None:
        """The live consumer goes on from where the rebuild stopped."""
        try:
            if self._direct is not None:
                tp = _aio_tp(self.topics.events, partition)
                self._direct.seek(tp, offset)
                self._direct.resume(tp)
            elif self.settings.consumer == "faust" and offset:
                await self.app.consumer.seek(_tp(self.topics.events, partition), offset)
        except Exception as err:  # taken away meanwhile: the next assignment sorts it out
            log.info("seek %s/%d: %r", self.topics.events, partition, err)

    async def shutdown(self) -> None:
        if self._rebuild_task is not None and not self._rebuild_task.done():
            self._rebuild_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._rebuild_task
        with contextlib.suppress(Exception):  # the producer may be stopped already
            await self.app.producer.flush()
        if self.metrics is not None:
            await self.metrics.close()

    def cleanup(self) -> None:
        shutil.rmtree(self._datadir, ignore_errors=True)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """aiokafka's rebalance callbacks, forwarded to the worker."""

    def __init__(self, worker: StreamWorker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.worker.revoked()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        topic = self.worker.topics.events
        self.worker.assign({tp.partition for tp in assigned if tp.topic == topic})


def _faust_record(m: Any) -> tuple[int, bytes | None, float, int]:
    return (m.partition, m.value, m.timestamp, m.offset)


def _tp(topic: str, partition: int) -> Any:
    from faust.types import TP

    return TP(topic, partition)


def _aio_tp(topic: str, partition: int) -> Any:
    from aiokafka import TopicPartition

    return TopicPartition(topic, partition)

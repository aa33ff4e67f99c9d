"""The stream worker: a thin faust-streaming app around `LiveDriver`s.

Faust does what it is good at -- the consumer group (which worker owns which partitions of
`runwatch.events`), fetching, the producer, timers, signals -- and nothing on the per-event
path but handing over batches (`stream.take_events`): decoding, clock correction and the
rules run in `LiveDriver.feed` over plain (bytes, append time, offset) tuples.

State is not kept in Faust tables. A partition the worker takes over (at start, or in a
rebalance) is rebuilt by re-reading it from the start with a plain aiokafka consumer
(`kafka_io.read_to_end`), with the alerts it makes held back; `runwatch.alerts` is read to
learn what was already published, and only the missing transitions go out. Live records
below the offset the rebuild reached are skipped. Why not changelog tables: the state is a
fold of the partition, deterministic to re-read, and re-reading costs one pass at the
engine's replay rate (bench/worker.py measures it) without Faust's recovery machinery.
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
from typing import Any

import faust
import orjson

from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka_io import Topics, ensure_topics, read_to_end
from runwatch.stream.live import DEFAULT_GRACE, DeadLetter, LiveDriver, PublishedAlerts, Record

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
    #: A worker that died is noticed by the group after this long (a restart waits for it).
    session_timeout: float = 10.0
    say: Any = None  # callable(str) for status lines; default: stderr


class StreamWorker:
    """Owns the drivers of the partitions this worker holds, and the Faust app driving them."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.drivers: dict[int, LiveDriver] = {}
        self.resume_at: dict[int, int] = {}  # first offset the live path applies
        self.ready: dict[int, asyncio.Event] = {}
        self._rebuilding: asyncio.Task[None] | None = None
        self._warned_create_time = False
        self.published = 0
        self.dead_letters = 0
        self._datadir = tempfile.mkdtemp(prefix="runwatch-worker-")
        #: Which worker published an alert (a record header, outside the contract's body).
        self.name = f"{socket.gethostname()}/{os.getpid()}"
        self._headers = [("runwatch-worker", self.name.encode())]
        self.app = self._build_app()

    # -- status ----------------------------------------------------------------------------

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
            value_serializer="raw",
            key_serializer="raw",
            web_enabled=False,
            datadir=self._datadir,
            topic_partitions=s.partitions,
            topic_disable_leader=True,
            consumer_auto_offset_reset="earliest",
            stream_buffer_maxsize=max(4 * s.batch_max, 4096),
            broker_commit_every=10_000,
            broker_commit_interval=2.0,
            producer_linger_ms=1,
            producer_acks=-1,
            broker_session_timeout=s.session_timeout,
            broker_heartbeat_interval=max(0.5, s.session_timeout / 5),
        )
        events = app.topic(
            self.topics.events,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=s.partitions,
            config={"message.timestamp.type": "LogAppendTime"},
        )

        async def consume(stream: Any) -> None:
            async for batch in stream.take_events(s.batch_max, within=s.batch_within):
                await self.process([e.message for e in batch])

        app.agent(events, name="runwatch-events")(consume)

        async def tick() -> None:
            await self.tick(time.time())

        app.timer(s.tick_s, on_leader=False)(tick)

        async def on_assigned(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
            assigned: Iterable[Any] = args[0] if args else kw.get("assigned", ())
            self.assign({tp.partition for tp in assigned if tp.topic == self.topics.events})

        async def on_shutdown(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
            await self.shutdown()

        async def on_startup(sender: Any, **_: Any) -> None:
            counts = await ensure_topics(s.bootstrap, self.topics, s.partitions)
            self.say(
                f"consuming {self.topics.events} ({counts.get(self.topics.events)} partitions) "
                f"as group {s.app_id}; alerts to {self.topics.alerts}"
            )

        app.on_partitions_assigned.connect(on_assigned)
        app.on_before_shutdown.connect(on_shutdown)
        self._on_startup = on_startup
        return app

    async def prepare(self) -> None:
        """Create the topics before Faust subscribes (so they get our settings)."""
        await self._on_startup(self.app)

    # -- live path -------------------------------------------------------------------------

    async def process(self, messages: Sequence[Any]) -> None:
        """One batch from Faust: split by partition, skip what the rebuild covered, feed."""
        parts: dict[int, list[Record]] = {}
        for m in messages:
            records = parts.get(m.partition)
            if records is None:
                records = parts[m.partition] = []
            records.append((m.value, m.timestamp, m.offset))
        if not self._warned_create_time and messages[0].timestamp_type != LOG_APPEND_TIME:
            self._warned_create_time = True
            log.warning(
                "%s records carry the producer's time, not the broker's: clock skew "
                "correction is off (set message.timestamp.type=LogAppendTime on the topic)",
                self.topics.events,
            )
        for partition, records in parts.items():
            ready = self.ready.get(partition)
            if ready is not None and not ready.is_set():
                await ready.wait()
            driver = self.drivers.get(partition)
            if driver is None or self.ready.get(partition) is not ready:
                continue  # not ours any more (a rebalance happened meanwhile)
            start = self.resume_at.get(partition, 0)
            if records[0][2] < start:
                records = [r for r in records if r[2] >= start]
                if not records:
                    continue
            self.resume_at[partition] = records[-1][2] + 1
            alerts, dead = driver.feed(records)
            await self._publish(alerts, dead)

    async def tick(self, now: float) -> None:
        """Wall-clock time for conditions that ripen in silence; a partition the worker is
        behind on only advances to the broker time of the last record it applied."""
        consumer = self.app.consumer
        out: list[Alert] = []
        for partition, driver in list(self.drivers.items()):
            ready = self.ready.get(partition)
            if ready is None or not ready.is_set():
                continue
            at = now
            try:
                high = consumer.highwater(_tp(self.topics.events, partition))
            except Exception:  # not assigned in the consumer any more
                high = None
            if high is not None and high > self.resume_at.get(partition, 0):
                at = min(now, driver.arrival + driver.grace)
            out += driver.tick(at)
        await self._publish(out, [])

    async def _publish(self, alerts: list[Alert], dead: list[DeadLetter]) -> None:
        producer = self.app.producer
        headers = self._headers
        for alert in alerts:
            await producer.send(
                self.topics.alerts,
                alert.run.encode(),
                orjson.dumps(alert.to_dict()),
                None,
                None,
                headers,
            )
        for letter in dead:
            await producer.send(
                self.topics.dlq,
                f"{letter.topic}:{letter.partition}:{letter.offset}".encode(),
                letter.to_json(),
                None,
                None,
                None,
            )
        self.published += len(alerts)
        self.dead_letters += len(dead)

    # -- rebalances and restarts -----------------------------------------------------------

    def assign(self, partitions: set[int]) -> None:
        """The consumer group gave this worker `partitions`: keep the drivers of those it
        already had, drop the others, rebuild the new ones in the background."""
        self.say(f"assigned partitions {sorted(partitions)}")
        if self._rebuilding is not None and not self._rebuilding.done():
            self._rebuilding.cancel()
        for p in list(self.ready):
            if p not in partitions or not self.ready[p].is_set():
                # lost, or its rebuild was cut short (it starts over below)
                self.drivers.pop(p, None)
                self.resume_at.pop(p, None)
                self.ready.pop(p).set()  # wake a waiting agent; it sees the driver is gone
        new = sorted(p for p in partitions if p not in self.drivers)
        if not new:
            return
        for p in new:
            self.ready[p] = asyncio.Event()
        self._rebuilding = asyncio.ensure_future(self._rebuild(new))

    async def _rebuild(self, partitions: list[int]) -> None:
        s = self.settings
        started = time.perf_counter()
        drivers = {
            p: LiveDriver(s.config, topic=self.topics.events, partition=p, grace=s.grace)
            for p in partitions
        }
        for d in drivers.values():
            d.start_replay()
        published = PublishedAlerts()
        async for _, records in read_to_end(s.bootstrap, self.topics.alerts):
            for r in records:
                if r.value:
                    try:
                        published.add(orjson.loads(r.value))
                    except orjson.JSONDecodeError:
                        continue
        dead_upto: dict[int, int] = {}
        async for _, records in read_to_end(s.bootstrap, self.topics.dlq):
            for r in records:
                try:
                    letter = orjson.loads(r.value or b"")
                    if letter.get("topic") == self.topics.events:
                        p, off = int(letter["partition"]), int(letter["offset"])
                        dead_upto[p] = max(dead_upto.get(p, -1), off)
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                    continue
        resume = {p: 0 for p in partitions}
        count = 0
        async for p, records in read_to_end(
            s.bootstrap, self.topics.events, partitions, follow=True
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
            if resume[p]:
                try:  # Faust need not fetch what the rebuild read (it would be skipped)
                    await self.app.consumer.seek(_tp(self.topics.events, p), resume[p])
                except Exception as err:  # the partition was taken away meanwhile
                    log.info("seek %s/%d: %r", self.topics.events, p, err)
            self.ready[p].set()
        rate = count / read_s if read_s > 0 else 0.0
        self.say(
            f"live on partitions {partitions}: rebuilt from {count} events in {read_s:.2f}s "
            f"({rate:,.0f} events/s), {len(out)} missing alert transitions published"
        )

    async def shutdown(self) -> None:
        if self._rebuilding is not None and not self._rebuilding.done():
            self._rebuilding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._rebuilding
        for ready in self.ready.values():
            ready.set()
        with contextlib.suppress(Exception):  # the producer may be stopped already
            await self.app.producer.flush()

    def cleanup(self) -> None:
        shutil.rmtree(self._datadir, ignore_errors=True)


def _tp(topic: str, partition: int) -> Any:
    from faust.types import TP

    return TP(topic, partition)

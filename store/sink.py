"""The Kafka sink: runwatch.events and runwatch.alerts into the history, exactly once.

Its own consumer group; no offsets are committed to Kafka. The position of every partition
lives in the DuckDB file, written in the same transaction as the rows it covers
(`BatchWriter.flush`), and on every assignment the consumer seeks to the stored position (to
the beginning where none is stored). A crash at any point -- mid-batch, mid-commit -- leaves
rows and positions consistent, so the restarted sink neither loses nor duplicates a row; the
writer also leaves out events that emitters sent twice (by id, `Store.write_events`). Flushes
run on the writer's thread while the next batch is decoded (`BatchWriter(background=True)`).

The consumer is aiokafka's: its record parsing is C code, about 2 us per event against
kafka-python's 7 (measured on one broker, gzip batches), and at 200k events/s that is the
difference between the sink keeping up and not.

With `health_port` it serves /healthz, /readyz and /metrics on its own loop
(store/sink_health.py); the loop reports a turn once per `getmany`, never per record.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.store.writer import BATCH_SIZE, BatchWriter, Flushed
from runwatch.stream.alerts import Alert
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import InvalidAlert, InvalidEvent
from runwatch.stream.kafka.health import ConsumerHealth

log = logging.getLogger("runwatch.sink")

DEFAULT_GROUP = "runwatch-sink"
#: /healthz fails when the consuming loop has not turned for this long (and is not waiting
#: on a flush, which has its own deadline: `SinkConfig.wait`)
STALL_SECONDS = 30.0
#: /readyz fails for a partition whose last fetch Kafka answered longer ago than this
FETCHED_WITHIN_MS = 30_000


@dataclass(frozen=True)
class SinkConfig:
    bootstrap: str
    db: Path
    group: str = DEFAULT_GROUP
    events_topic: str = Topics().events
    alerts_topic: str = Topics().alerts
    batch_size: int = BATCH_SIZE
    flush_interval: float = 1.0
    #: seconds to wait for readers to let go of the file before giving up on a flush
    wait: float = 600.0
    #: TLS / SASL for the consumer
    security: KafkaSecurity = PLAINTEXT
    #: serve /healthz, /readyz and /metrics on this port (None: off; 0: any free one)
    health_port: int | None = None
    health_host: str = "0.0.0.0"


class Sink:
    """Consumes until `stop` is set; flushes every `batch_size` records or `flush_interval`."""

    def __init__(
        self,
        config: SinkConfig,
        *,
        stop: threading.Event | None = None,
        on_flush: Callable[[Flushed], None] | None = None,
    ) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.next_offsets: dict[tuple[str, int], int] = {}
        self._flushing = asyncio.Lock()
        self._consumer_now: Any = None
        # ready: caught up to within one batch of the end of every partition
        self.health = ConsumerHealth(self.lag, stall=STALL_SECONDS, behind_ok=config.batch_size)
        self.endpoints: Any = None
        if config.health_port is not None:
            from runwatch.store.sink_health import SinkEndpoints

            self.endpoints = SinkEndpoints(self, config.health_port, config.health_host, on_flush)
            on_flush = self.endpoints.flushed
        # background: the next batch is decoded while this one is written (two cores)
        self.writer = BatchWriter(
            config.db, consumer=config.group, wait=config.wait, background=True, on_flush=on_flush
        )

    def _consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        cfg = self.config
        return AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap,
            group_id=cfg.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=cfg.batch_size,
            fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            # a flush may wait `wait` seconds for readers to let go of the file
            max_poll_interval_ms=int((cfg.wait + 60) * 1000),
            client_id="runwatch-sink",
            **cfg.security.aiokafka(),
        )

    async def _flush(self, *, wait: bool = True) -> None:
        """Write what is buffered. The waiting (for the flush before, and with `wait` for this
        one) happens off the event loop, so the consumer's heartbeats go on; the buffer swap
        happens on it, so records that arrive meanwhile go to the next batch. One flush at a
        time: the loop and a rebalance may both ask."""
        async with self._flushing:
            self.health.beat(grace=self.config.wait + 60)  # the writer's own deadline
            await asyncio.to_thread(self.writer.settle)
            self.writer.flush(wait=False)  # nothing in flight: hands the batch over at once
            if wait:
                await asyncio.to_thread(self.writer.settle)

    def _listener(self, consumer: Any) -> Any:
        from aiokafka import ConsumerRebalanceListener

        sink = self

        class Seek(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await sink._flush()  # what was read so far is written with its positions

            def on_partitions_assigned(self, assigned: Any) -> None:
                # Synchronous on purpose: aiokafka starts fetching the new partitions at the
                # first await, so a seek after one came too late -- records already handed
                # out were read again from the start. Offset 0 where nothing is stored: past
                # retention, auto_offset_reset ("earliest") moves it to the oldest record.
                for tp in assigned:
                    consumer.seek(tp, sink.next_offsets.get((tp.topic, tp.partition), 0))

        return Seek()

    def run(self) -> dict[str, int]:
        """Consume until stopped; returns the totals written."""
        try:
            with tuned_for_consuming():
                asyncio.run(self._run())
        finally:
            self.writer.close()
        return dict(self.writer.totals)

    def lag(self) -> dict[tuple[str, int], int | None] | None:
        """Per assigned partition, the records between what was read and the end as of the
        last fetch; None where Kafka answered none lately. None before the consumer runs.
        On the loop only."""
        consumer = self._consumer_now
        if consumer is None:
            return None
        out: dict[tuple[str, int], int | None] = {}
        now_ms = time.time() * 1000
        for tp in consumer.assignment():
            end, at = consumer.highwater(tp), consumer.last_poll_timestamp(tp)
            if end is None or at is None or now_ms - at > FETCHED_WITHIN_MS:
                out[(tp.topic, tp.partition)] = None
            else:
                read = self.next_offsets.get((tp.topic, tp.partition), 0)
                out[(tp.topic, tp.partition)] = max(0, end - read)
        return out

    async def _run(self) -> None:
        if self.endpoints is not None:
            await self.endpoints.start()  # a taken port fails here, before any Kafka
        try:
            await self._consume()
        finally:
            if self.endpoints is not None:
                await self.endpoints.close()

    async def _consume(self) -> None:
        cfg = self.config
        # Where to go on in each partition: the stored positions, then what this sink read.
        # Every revoke flushes, so at an assignment these equal the stored ones again.
        self.health.beat(grace=cfg.wait + 60)
        self.next_offsets = await asyncio.to_thread(self.writer.positions)
        consumer = self._consumer()
        consumer.subscribe([cfg.events_topic, cfg.alerts_topic], listener=self._listener(consumer))
        await consumer.start()
        self._consumer_now = consumer
        try:
            writer, beat = self.writer, self.health.beat
            while not self.stop.is_set():
                beat()
                batch = await consumer.getmany(timeout_ms=200, max_records=cfg.batch_size)
                for tp, records in batch.items():
                    if not records:
                        continue
                    if tp.topic == cfg.alerts_topic:
                        self._alerts(records)
                    else:
                        self._events(records, tp.topic)
                    next_offset = records[-1].offset + 1
                    writer.advance(tp.topic, tp.partition, next_offset)
                    self.next_offsets[(tp.topic, tp.partition)] = next_offset
                if writer.due(cfg.batch_size, cfg.flush_interval):
                    await self._flush(wait=False)
                elif not self._flushing.locked():
                    writer.collect()  # report a finished flush now, not at the next batch
            await self._flush()
        finally:
            self._consumer_now = None
            await consumer.stop()

    def _events(self, records: list[Any], topic: str) -> None:
        add, bad = self.writer.add_event, self.writer.add_invalid
        for rec in records:
            value = rec.value
            if value is None:
                continue
            try:
                add(value, decode(value))
            except InvalidEvent as err:
                bad(f"{topic}:{rec.partition}:{rec.offset}", err.reason, value)

    def _alerts(self, records: list[Any]) -> None:
        for rec in records:
            if rec.value is None:
                continue
            try:
                self.writer.add_alert(Alert.from_json(rec.value))
            except InvalidAlert as err:
                self.writer.add_invalid(
                    f"{self.config.alerts_topic}:{rec.partition}:{rec.offset}",
                    err.reason,
                    rec.value,
                )

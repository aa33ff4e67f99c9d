"""The Kafka sink: runwatch.events and runwatch.alerts into the history, exactly once.

Its own consumer group; no offsets are committed to Kafka. The position of every partition
lives in the DuckDB file, written in the same transaction as the rows it covers
(`BatchWriter.flush`), and on every assignment the consumer seeks to the stored position (to
the beginning where none is stored). A crash at any point -- mid-batch, mid-commit -- leaves
rows and positions consistent, so the restarted sink neither loses nor duplicates a row; the
writer also leaves out events that emitters sent twice (by id, `Store.write_events`). Flushes
run on the writer's thread while the next batch is decoded (`BatchWriter(background=True)`).

The consumer is aiokafka's, driven by the one consuming loop (`runwatch.stream.kafka.consume`):
its record parsing is C code, several times cheaper per record than kafka-python's
(`bench/decode.py`; figures in bench/RESULTS.md), which at the sink's rates decides whether
it keeps up. A record the sink itself fails on is kept in `invalid_events` with the reason.

With `health_port` it serves /healthz, /readyz and /metrics on its own loop
(`runwatch.stream.metrics.roles.SinkEndpoints`); the loop reports a turn once per `getmany`,
never per record.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.store.writer import (
    BATCH_SIZE,
    NOT_A_ROW,
    BatchWriter,
    BeforeCommit,
    Flushed,
    WriteHealth,
)
from runwatch.stream.alerts import Alert
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.decode import admit
from runwatch.stream.exceptions import InvalidAlert, InvalidEvent
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.consume import (
    LOG_APPEND_TIME,
    TP,
    ConsumingLoop,
    Group,
    Handler,
    Record,
    refused,
)
from runwatch.stream.kafka.health import ConsumerHealth
from runwatch.stream.records import is_batch, record_events
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.sink")

DEFAULT_GROUP = "runwatch-sink"
#: /healthz fails when the consuming loop has not turned for this long (and is not waiting
#: on a flush, which has its own deadline: `SinkSettings.wait`)
STALL_SECONDS = 30.0


@dataclass(frozen=True)
class SinkSettings:
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


class Sink(Handler):
    """Consumes until `stop` is set; flushes every `batch_size` records or `flush_interval`.
    The consuming loop's handler: positions from the history on assignment, a flush on
    revocation and when due."""

    def __init__(
        self,
        config: SinkSettings,
        *,
        stop: threading.Event | None = None,
        on_flush: Callable[[Flushed], None] | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.next_offsets: dict[tuple[str, int], int] = {}
        self._flushing = asyncio.Lock()
        self.loop: ConsumingLoop | None = None
        self.history = WriteHealth(config.db, log)
        self.committed: dict[tuple[str, int], int] = {}  # positions last read from the history
        self._backoff = 0.0
        self._retry_at: float | None = None
        # ready: caught up to within one batch of the end of every partition
        self.health = ConsumerHealth(self.lag, stall=STALL_SECONDS, behind_ok=config.batch_size)
        self.endpoints: Any = None
        if config.health_port is not None:
            from runwatch.stream.metrics.roles import SinkEndpoints

            self.endpoints = SinkEndpoints(
                self.lag, self.health, config.health_port, config.health_host, on_flush,
                ready=self.ready, failures=lambda: self.history.failures,
            )  # fmt: skip
            on_flush = self.endpoints.flushed
        # background: the next batch is decoded while this one is written (two cores)
        self.writer = BatchWriter(
            config.db, consumer=config.group, wait=config.wait, background=True,
            on_flush=on_flush, before_commit=before_commit,
        )  # fmt: skip

    def _consumer(self) -> Any:
        cfg = self.config
        return clients.consumer(
            cfg.bootstrap,
            cfg.security,
            group=cfg.group,
            max_poll_records=cfg.batch_size,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            # a flush may wait `wait` seconds for readers to let go of the file
            max_poll_interval_ms=int((cfg.wait + 60) * 1000),
            client_id="runwatch-sink",
        )

    async def _flush(self, *, wait: bool = True) -> None:
        """Write what is buffered. The waiting (for the flush before, and with `wait` for this
        one) happens off the event loop, so the consumer's heartbeats go on; the buffer swap
        happens on it, so records that arrive meanwhile go to the next batch. One flush at a
        time: the loop and a rebalance may both ask."""
        async with self._flushing:
            self.health.beat(grace=self.config.wait + 60)  # the writer's own deadline
            try:
                done = await asyncio.to_thread(self.writer.settle)
                self.writer.flush(wait=False)  # nothing in flight: hands the batch over
                if wait:
                    done = await asyncio.to_thread(self.writer.settle) or done
            except NOT_A_ROW as err:
                await self._rewind(err)
                return
            if done is not None:  # a batch got in
                self._written()

    def _written(self) -> None:
        self.history.written()
        self._backoff = 0.0

    async def _rewind(self, err: BaseException) -> None:
        """The history could not be written (the file locked for too long, unreadable, the
        disk full): nothing of the batch is stored, so drop what is buffered, go back in
        every partition to what the history holds, and wait a while before reading it again
        -- Kafka keeps it meanwhile. Said once per change of state; /readyz says it until
        the history is written again."""
        self.history.failed(err)
        self.writer.discard()
        self._backoff = min(60.0, max(1.0, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        try:
            stored = self.committed = await asyncio.to_thread(self.writer.positions)
        except NOT_A_ROW:  # not even readable: from the last positions known, at worst
            stored = self.committed  # earlier ones (ids keep a re-read from doubling)
        self.next_offsets = dict(stored)
        loop = self.loop
        if loop is not None:
            held = loop.consumer.assignment()
            for tp in held:
                loop.seek(tp, self.next_offsets.get((tp.topic, tp.partition), 0))
            loop.pause(sorted(held))

    def ready(self) -> tuple[bool, str]:
        """/readyz: the loop's readiness, and the history being written."""
        problem = self.history.problem()
        return (False, problem) if problem is not None else self.health.ready()

    def run(self) -> dict[str, int]:
        """Consume until stopped; returns the totals written."""
        try:
            with tuned_for_consuming():
                asyncio.run(self._run())
        finally:
            try:
                self.writer.close()
            except NOT_A_ROW as err:  # the last batch is not stored: read again next time
                log.error("the last batch was not written (%s): it is read again at start", err)
        return dict(self.writer.totals)

    def lag(self) -> dict[tuple[str, int], int | None] | None:
        """Per assigned partition, the records between what was read and the end as of the
        last fetch; None where Kafka answered none lately. None before the consumer runs.
        On the loop only."""
        return self.loop.lag() if self.loop is not None else None

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
        self.committed = dict(self.next_offsets)
        source = Group((cfg.events_topic, cfg.alerts_topic))
        self.loop = ConsumingLoop(self._consumer(), source, self, stop=self.stop.is_set,
                                  max_records=cfg.batch_size, health=self.health,
                                  name="sink")  # fmt: skip
        try:
            await self.loop.run()
            await self._flush()
        finally:
            self.loop = None

    # -- the loop's handler ----------------------------------------------------------------

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        # Offset 0 where nothing is stored: past retention, auto_offset_reset ("earliest")
        # moves it to the oldest record.
        return {tp: self.next_offsets.get((tp.topic, tp.partition), 0) for tp in partitions}

    async def revoked(self, partitions: set[TP]) -> None:
        await self._flush()  # what was read so far is written with its positions

    async def handle(self, records: list[Record]) -> None:
        first = records[0]
        if first.topic == self.config.alerts_topic:
            self._alerts(records)
        else:
            self._events(records, first.topic)
        next_offset = records[-1].offset + 1
        self.writer.advance(first.topic, first.partition, next_offset)
        self.next_offsets[(first.topic, first.partition)] = next_offset

    async def turn(self) -> None:
        if self._retry_at is not None:  # after a failed write: read again once it is time
            if time.monotonic() < self._retry_at or self.loop is None:
                return
            self._retry_at = None
            self.loop.resume(sorted(self.loop.consumer.assignment()))
        cfg = self.config
        if self.writer.due(cfg.batch_size, cfg.flush_interval):
            await self._flush(wait=False)
        elif not self._flushing.locked():
            try:
                done = self.writer.collect()  # report a finished flush now, not at the next
            except NOT_A_ROW as err:
                await self._rewind(err)
                return
            if done is not None:
                self._written()

    def dead(self, record: Record, reason: str) -> None:
        self.writer.add_invalid(refused(record, reason))
        self.writer.advance(record.topic, record.partition, record.offset + 1)
        self.next_offsets[(record.topic, record.partition)] = record.offset + 1

    def _events(self, records: list[Any], topic: str) -> None:
        add, bad = self.writer.add_event, self.writer.add_invalid
        for rec in records:
            value = rec.value
            if value is None:
                continue
            # the broker's append time, where the topic has it: how far ahead a ts may be
            received = rec.timestamp / 1000.0 if rec.timestamp_type == LOG_APPEND_TIME else None
            # one event, or with the batch header several of one run, a line each
            batch = bool(rec.headers) and is_batch(rec.headers)
            for line, got in record_events(value, batch, partial(admit, received=received)):
                if isinstance(got, InvalidEvent):
                    bad(Refused(got.reason, line, topic, rec.partition, rec.offset, got.kind))
                else:
                    add(line, got)

    def _alerts(self, records: list[Any]) -> None:
        for rec in records:
            if rec.value is None:
                continue
            try:
                self.writer.add_alert(Alert.from_json(rec.value))
            except InvalidAlert as err:
                self.writer.add_invalid(refused(rec, err.reason))

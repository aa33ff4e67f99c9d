"""The Kafka sink: runwatch.events and runwatch.alerts into the history, exactly once.

Its own consumer group; no offsets are committed to Kafka. The position of every partition
lives in the DuckDB file, written in the same transaction as the rows it covers
(`BatchWriter.flush`), and on every assignment the consumer seeks to the stored position (to
the beginning where none is stored). A crash at any point -- mid-batch, mid-commit -- leaves
rows and positions consistent, so the restarted sink neither loses nor duplicates a row; the
writer also leaves out events that emitters sent twice (by id, `Store.write_events`). Flushes
run on the writer's thread while the next batch is decoded (`BatchWriter(background=True)`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.store.writer import BATCH_SIZE, BatchWriter, Flushed
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import InvalidEvent

log = logging.getLogger("runwatch.sink")

EVENTS_TOPIC = "runwatch.events"
ALERTS_TOPIC = "runwatch.alerts"
DEFAULT_GROUP = "runwatch-sink"

_ALERT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "ts": (int, float),
    "rule": str,
    "run": str,
    "state": str,
    "severity": str,
    "key": str,
    "since": (int, float),
    "summary": str,
}


@dataclass(frozen=True)
class SinkConfig:
    bootstrap: str
    db: Path
    group: str = DEFAULT_GROUP
    events_topic: str = EVENTS_TOPIC
    alerts_topic: str = ALERTS_TOPIC
    batch_size: int = BATCH_SIZE
    flush_interval: float = 1.0
    #: seconds to wait for readers to let go of the file before giving up on a flush
    wait: float = 600.0
    #: TLS / SASL for the consumer
    security: KafkaSecurity = PLAINTEXT


def parse_alert(raw: bytes) -> dict[str, Any]:
    """An alert transition from runwatch.alerts (contract §3); raises InvalidEvent."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidEvent(f"not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InvalidEvent("an alert must be a JSON object")
    for name, types in _ALERT_FIELDS.items():
        if not isinstance(obj.get(name), types):
            raise InvalidEvent(f"alert field {name!r} missing or of the wrong type")
    if obj["state"] not in ("firing", "resolved"):
        raise InvalidEvent("alert state must be firing or resolved")
    return obj


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
        # background: the next batch is decoded while this one is written (two cores)
        self.writer = BatchWriter(
            config.db, consumer=config.group, wait=config.wait, background=True, on_flush=on_flush
        )

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            bootstrap_servers=self.config.bootstrap,
            group_id=self.config.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.config.batch_size,
            fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            client_id="runwatch-sink",
            **self.config.security.kafka_python(),
        )

    def _flush(self, *, wait: bool = True) -> None:
        self.writer.flush(wait=wait)  # the writer calls on_flush

    def _listener(self, consumer: Any) -> Any:
        from kafka import ConsumerRebalanceListener

        sink = self

        class Seek(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                sink._flush()  # what was read so far is written with its positions

            def on_partitions_assigned(self, assigned: Any) -> None:
                stored = sink.writer.positions()
                for tp in assigned:
                    offset = stored.get((tp.topic, tp.partition))
                    if offset is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, offset)

        return Seek()

    def run(self) -> dict[str, int]:
        """Consume until stopped; returns the totals written."""
        cfg = self.config
        consumer = self._consumer()
        try:
            consumer.subscribe(
                [cfg.events_topic, cfg.alerts_topic], listener=self._listener(consumer)
            )
            writer = self.writer
            while not self.stop.is_set():
                batch = consumer.poll(timeout_ms=200, max_records=cfg.batch_size)
                for tp, records in batch.items():
                    if not records:
                        continue
                    if tp.topic == cfg.alerts_topic:
                        self._alerts(records)
                    else:
                        self._events(records, tp.topic)
                    writer.advance(tp.topic, tp.partition, records[-1].offset + 1)
                if writer.due(cfg.batch_size, cfg.flush_interval):
                    self._flush(wait=False)
            self._flush()
        finally:
            consumer.close(autocommit=False)
            self.writer.close()
        return dict(self.writer.totals)

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
                self.writer.add_alert(parse_alert(rec.value))
            except InvalidEvent as err:
                self.writer.add_invalid(
                    f"{self.config.alerts_topic}:{rec.partition}:{rec.offset}",
                    err.reason,
                    rec.value,
                )

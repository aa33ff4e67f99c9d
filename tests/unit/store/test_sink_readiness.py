"""What the sink's /readyz sees of its consumer: lag from the last fetch, and a partition
whose fetches Kafka stopped answering counts as not known (no broker: a stand-in consumer)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from runwatch.store.sink import Sink, SinkSettings
from runwatch.stream.kafka.consume import TP, ConsumingLoop, Group


class Consumer:
    """aiokafka's assignment / highwater / last_poll_timestamp, nothing else."""

    def __init__(self, parts: dict[TP, tuple[int | None, float | None]]) -> None:
        self.parts = parts

    def assignment(self) -> set[TP]:
        return set(self.parts)

    def highwater(self, tp: TP) -> int | None:
        return self.parts[tp][0]

    def last_poll_timestamp(self, tp: TP) -> float | None:
        return self.parts[tp][1]


def test_lag_from_the_last_fetch_and_unknown_where_kafka_went_quiet(tmp_path: Path) -> None:
    sink = Sink(SinkSettings(bootstrap="unused:9092", db=tmp_path / "h.duckdb", batch_size=100))
    try:
        assert sink.lag() is None
        assert sink.health.ready() == (False, "no partitions assigned yet")
        now = time.time() * 1000
        consumer = Consumer({
            TP("ev", 0): (1000, now - 200),  # fetched just now
            TP("ev", 1): (50, now - 200),
            TP("al", 0): (None, None),  # never fetched
        })  # fmt: skip
        loop: Any = ConsumingLoop(consumer, Group(("ev", "al")), sink)  # type: ignore[arg-type]
        loop.running = True  # as if consuming; what it read up to:
        loop.read = {TP("ev", 0): 700, TP("ev", 1): 50}
        sink.loop = loop
        assert sink.lag() == {("ev", 0): 300, ("ev", 1): 0, ("al", 0): None}
        consumer.parts[TP("al", 0)] = (3, now - 200)
        assert sink.health.ready() == (False, "catching up: 303 records behind")
        loop.read[TP("ev", 0)] = 950
        assert sink.health.ready() == (True, "caught up on 3 partitions (53 records behind)")
        consumer.parts[TP("ev", 1)] = (50, now - 60_000)  # Kafka went quiet
        assert sink.health.ready() == (False, "waiting for Kafka to answer a fetch of ev:1")
    finally:
        sink.writer.close()

"""The sink reads a batch record of runwatch.events (contract section 8) as its events: each
line stored as an event of its own, a bad line alone in `invalid_events` with its reason,
the same history as the events sent one per record."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import encode, make_event

from runwatch.emitters.topics import BATCH_HEADER
from runwatch.store import Store
from runwatch.store.sink import Sink, SinkSettings
from runwatch.stream.kafka.consume import LOG_APPEND_TIME

EVENTS = "runwatch.events"


@dataclass(frozen=True)
class Record:
    """A consumer's record, as the sink reads it."""

    value: bytes | None
    offset: int
    headers: tuple[tuple[str, bytes], ...] = ()
    topic: str = EVENTS
    partition: int = 0
    timestamp: int = 0
    timestamp_type: int = LOG_APPEND_TIME
    key: bytes | None = b"r1"


def history(tmp_path: Path, records: list[Record]) -> tuple[list[bytes], list[tuple[str, str]]]:
    """(raw events stored, in order; (source, reason) of each invalid row) once the sink
    has handled `records` and flushed."""
    db = tmp_path / f"h{len(list(tmp_path.iterdir()))}.duckdb"
    sink = Sink(SinkSettings(bootstrap="unused:9092", db=db, batch_size=100))
    stamped = [Record(r.value, r.offset, r.headers, timestamp=int(time.time() * 1000))
               for r in records]  # fmt: skip
    try:
        asyncio.run(sink.handle(stamped))  # type: ignore[arg-type]
        sink.writer.flush(wait=True)
    finally:
        sink.writer.close()
    with Store.reader(db, wait=30) as store:
        raws = [r[0] for r in store.con.execute("SELECT raw FROM events ORDER BY seq").fetchall()]
        bad = store.con.execute("SELECT source, reason FROM invalid_events").fetchall()
    return [r.encode() if isinstance(r, str) else r for r in raws], bad


def test_a_batch_is_stored_as_its_events_and_a_bad_line_alone_is_invalid(
    tmp_path: Path,
) -> None:
    t0 = time.time() - 60
    events = [encode(make_event("reward", t0 + s, step=s, mean=0.5)) for s in range(1, 5)]
    single = [Record(raw, offset) for offset, raw in enumerate(events)]
    value = b"\n".join([*events[:2], b'{"v": 1}', *events[2:]]) + b"\n"
    batch = [Record(value, 0, (BATCH_HEADER,))]
    one_by_one, none = history(tmp_path, single)
    batched, bad = history(tmp_path, batch)
    assert batched == one_by_one == events
    assert none == []
    ((source, reason),) = bad
    assert source == f"{EVENTS}:0:0"
    assert reason.startswith("line 3 of 5 of a batch: ")

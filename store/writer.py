"""`BatchWriter`: what every writer of the history shares (the Kafka sink, `runwatch ingest`,
and the embedded service).

It buffers events, alert transitions, invalid input and consumer positions, and `flush()`
writes all of them in one DuckDB transaction. The file is opened for the flush and closed
after it (by default), so between batches other processes can open the history read-only:
that is how `runwatch sql` reads while the sink writes (DuckDB allows one writing process and
no readers beside it). The open and close are part of every flush `bench/store.py` times.

With `background=True` (the sink) a flush runs on a writer thread while the caller goes on
decoding the next batch: DuckDB releases the GIL, so decoding and writing overlap on two
cores. At most one flush is in flight; the next flush, `positions()` and `close()` wait for
it, and an error it raised comes out of the next of them. What a flush commits -- rows and
positions in one transaction -- is the same either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from runwatch.emitters.events import Event
from runwatch.store.batch import EventBatch, RawEvent
from runwatch.store.exceptions import StoreError
from runwatch.store.store import Store
from runwatch.stream.alerts import Alert
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.store")

#: Errors of the file, not of a row: locked, unreadable, out of disk. No row is to blame.
NOT_A_ROW = (StoreError, OSError, duckdb.IOException)

#: Records per batch by default: two DuckDB row groups (2 x 122,880 rows). A batch of at least
#: a row group is written to the file directly (compressed once) instead of through the
#: write-ahead log and a checkpoint (~40% less work per event than batches of 50,000), and
#: DuckDB types and compresses each row group on its own thread: with two, both cores work
#: (bench/store.py: 225k events/s against 123k for batches of 150,000).
ROW_GROUP = 122_880
BATCH_SIZE = 2 * ROW_GROUP

#: Called inside a flush's transaction, its rows written and not yet committed, with the
#: number of the flush (1 for the first): where a fault is injected to kill a writer
#: mid-batch (tests/integration/held_sink.py).
BeforeCommit = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Flushed:
    """What one flush wrote."""

    events: int  # events received in the batch
    new_events: int  # of them, not stored before (by id)
    alerts: int
    invalid: int
    seconds: float


class BatchWriter:
    """Buffers writes and commits them, with consumer positions, in one transaction."""

    def __init__(
        self,
        path: str | Path,
        *,
        consumer: str | None = None,
        wait: float = 600.0,
        hold_open: bool = False,
        background: bool = False,
        on_flush: Callable[[Flushed], None] | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        self.path = Path(path)
        self.before_commit = before_commit
        self.consumer = consumer
        self.wait = wait
        self.hold_open = hold_open
        self.on_flush = on_flush
        self._store: Store | None = None
        self._thread = ThreadPoolExecutor(1, "runwatch-writer") if background else None
        self._in_flight: Future[Flushed] | None = None
        self.events = EventBatch()
        self.alerts: list[Alert | Mapping[str, Any]] = []
        self.invalid: list[Refused] = []
        self.moved: dict[tuple[str, int], int] = {}
        self.first_added: float | None = None
        self.totals = {"events": 0, "new_events": 0, "alerts": 0, "invalid": 0, "flushes": 0}
        self.refused = 0  # rows the history refused, kept in invalid_events instead

    # -- buffering -------------------------------------------------------------------------

    def _touch(self) -> None:
        if self.first_added is None:
            self.first_added = time.monotonic()

    def add_event(self, raw: RawEvent, event: Event | None = None) -> None:
        """Buffer one event; without `event` it is validated here (raises InvalidEvent)."""
        self._touch()
        self.events.add(raw, event)

    def add_alert(self, alert: Alert | Mapping[str, Any]) -> None:
        self._touch()
        self.alerts.append(alert)

    def add_invalid(self, refused: Refused) -> None:
        self._touch()
        self.invalid.append(refused)

    def advance(self, topic: str, partition: int, next_offset: int) -> None:
        """Record that everything before `next_offset` of this partition is in the buffer."""
        self._touch()
        self.moved[(topic, partition)] = next_offset

    @property
    def pending(self) -> int:
        return len(self.events) + len(self.alerts) + len(self.invalid)

    def due(self, batch_size: int, interval: float) -> bool:
        """Whether the buffer should be written now: full, or held for `interval` seconds."""
        if self.first_added is None:
            return False
        return self.pending >= batch_size or time.monotonic() - self.first_added >= interval

    # -- writing ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open the file now (waiting for its lock), to be written by the next flush and
        closed after it: a caller that must not prepare a batch the file cannot take yet."""
        self._open()

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store.writer(self.path, wait=self.wait)
        return self._store

    def close(self) -> None:
        try:
            self.settle()
        finally:
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None
            self._close_store()

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def positions(self) -> dict[tuple[str, int], int]:
        """The stored positions of this writer's consumer, including what is buffered."""
        if self.consumer is None:
            return {}
        self.settle()
        store = self._open()
        try:
            return {**store.positions(self.consumer), **self.moved}
        finally:
            if not self.hold_open:
                self._close_store()

    def flush(self, *, wait: bool = True) -> Flushed | None:
        """Write everything buffered in one transaction; None when there was nothing.

        In the background mode, `wait=False` hands the batch to the writer thread and returns
        None at once (after the previous flush, if still running, has finished).
        """
        done = self.settle()
        if self.first_added is None:
            return done
        batch = (self.events, self.alerts, self.invalid, self.moved)
        if self._thread is None:
            done = self._write(*batch)  # on an error the buffer stays as it was
            self._clear()
            return self._done(done)
        self._clear()
        self._in_flight = self._thread.submit(self._write, *batch)
        return self.settle() if wait else None

    def collect(self) -> Flushed | None:
        """Report a background flush that has finished (`on_flush`), without waiting; so the
        last batch before a quiet spell is reported when written, not at the next one."""
        if self._in_flight is not None and self._in_flight.done():
            return self.settle()
        return None

    def discard(self) -> None:
        """Drop everything buffered (the caller reads it again from where the history is)."""
        self._clear()

    def _clear(self) -> None:
        self.events, self.alerts, self.invalid = EventBatch(), [], []
        self.moved = {}
        self.first_added = None

    def settle(self) -> Flushed | None:
        """Wait for the flush in flight, if any (and report it); re-raises what it raised."""
        job, self._in_flight = self._in_flight, None
        return None if job is None else self._done(job.result())

    def _done(self, done: Flushed) -> Flushed:
        for key in ("events", "new_events", "alerts", "invalid"):
            self.totals[key] += getattr(done, key)
        self.totals["flushes"] += 1
        if self.on_flush is not None:
            self.on_flush(done)
        return done

    def _write(
        self,
        events: EventBatch,
        alerts: list[Alert | Mapping[str, Any]],
        invalid: list[Refused],
        moved: dict[tuple[str, int], int],
    ) -> Flushed:
        started = time.perf_counter()
        store = self._open()
        try:
            try:
                with store.transaction():
                    new = store.write_events(events)
                    store.write_alerts(alerts)
                    store.write_invalid(invalid)
                    if self.consumer is not None:
                        store.set_positions(self.consumer, moved)
                    if self.before_commit is not None:
                        self.before_commit(self.totals["flushes"] + 1)
            except NOT_A_ROW:
                raise  # the file (locked, unreadable, the disk full): the caller retries
            except Exception as err:  # some row the history refuses: find it, write the rest
                log.warning("writing a batch failed (%s); writing it row by row", _line(err))
                new = self._isolate(store, events, alerts, invalid, moved)
        finally:
            if not self.hold_open:
                self._close_store()
        return Flushed(len(events), new, len(alerts), len(invalid), time.perf_counter() - started)

    def _isolate(
        self,
        store: Store,
        events: EventBatch,
        alerts: list[Alert | Mapping[str, Any]],
        invalid: list[Refused],
        moved: dict[tuple[str, int], int],
    ) -> int:
        """Write what the history takes, halving the events until the ones it refuses stand
        alone; those go to `invalid_events` with the reason, as do refused alerts. Then the
        positions, so the refused rows are not read again. Each part commits on its own: a
        crash in between rewrites the rest, and ids keep what was written from doubling."""
        refused: list[Refused] = []
        new = 0
        parts = [events]
        while parts:
            part = parts.pop()
            if not part.raws:
                continue
            try:
                with store.transaction():
                    new += store.write_events(part)
            except NOT_A_ROW:
                raise
            except Exception as err:
                if len(part.raws) > 1:
                    parts += part.halves()
                else:
                    why = f"the history refused it: {_line(err)}"
                    refused.append(Refused(why, part.raws[0], "store"))
        for alert in alerts:
            try:
                with store.transaction():
                    store.write_alerts([alert])
            except NOT_A_ROW:
                raise
            except Exception as err:
                raw = alert.to_json() if isinstance(alert, Alert) else repr(alert).encode()
                why = f"the history refused this alert: {_line(err)}"
                refused.append(Refused(why, raw, "store"))
        self.refused += len(refused)
        with store.transaction():
            store.write_invalid([*invalid, *refused])
            if self.consumer is not None:
                store.set_positions(self.consumer, moved)
        return new


def _line(err: BaseException) -> str:
    """An error as one short line (DuckDB's messages quote the statement over several)."""
    first = (str(err).splitlines() or [type(err).__name__])[0]
    return first if len(first) <= 300 else first[:299] + "…"


class WriteHealth:
    """Whether a role can write a file it must (the history, an event log). A failure is
    kept until a write gets in again, said once per change of state (not per try), counted,
    and shown by /readyz."""

    def __init__(self, path: Path | str, logger: logging.Logger, what: str = "the history") -> None:
        self.path, self.log, self.what = path, logger, what
        self.error: str | None = None  # why the last write failed, until one gets in
        self.failures = 0

    def failed(self, err: BaseException) -> None:
        self.failures += 1
        why = f"{type(err).__name__}: {_line(err)}"
        if why != self.error:
            self.log.error("cannot write %s %s (trying again): %s", self.what, self.path, why)
        self.error = why

    def written(self) -> None:
        if self.error is not None:
            self.log.warning("%s %s is written again", self.what, self.path)
            self.error = None

    def problem(self) -> str | None:
        """/readyz's reason while the file cannot be written."""
        return None if self.error is None else f"cannot write {self.what}: {self.error}"

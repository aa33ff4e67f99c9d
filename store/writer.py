"""`BatchWriter`: what every writer of the history shares (the Kafka sink, `runwatch ingest`,
and the embedded service).

It buffers events, alert transitions, invalid input and consumer positions, and `flush()`
writes all of them in one DuckDB transaction. The file is opened for the flush and closed
after it (by default), so between batches other processes can open the history read-only:
that is how `runwatch sql` reads while the sink writes (DuckDB allows one writing process and
no readers beside it). Opening and closing cost ~10-30 ms per batch (bench/store.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters.events import Event
from runwatch.store.store import RawEvent, Store
from runwatch.stream.alerts import Alert

#: Test hook: `PATH@K` makes the K-th flush of this process (default the first) create PATH
#: after writing its rows and before the commit, then wait -- so a test can kill -9 the
#: process in the middle of a batch.
HOLD_ENV = "RUNWATCH_TEST_HOLD_IN_FLUSH"


def _hold_here(flushes_done: int) -> None:
    hold = os.environ.get(HOLD_ENV)
    if not hold:
        return
    path, _, nth = hold.partition("@")
    if flushes_done + 1 == int(nth or 1):
        Path(path).touch()
        time.sleep(3600)


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
    ) -> None:
        self.path = Path(path)
        self.consumer = consumer
        self.wait = wait
        self.hold_open = hold_open
        self._store: Store | None = None
        self.events: list[tuple[RawEvent, Event | None]] = []
        self.alerts: list[Alert | Mapping[str, Any]] = []
        self.invalid: list[tuple[str, str, bytes]] = []
        self.moved: dict[tuple[str, int], int] = {}
        self.first_added: float | None = None
        self.totals = {"events": 0, "new_events": 0, "alerts": 0, "invalid": 0, "flushes": 0}

    # -- buffering -------------------------------------------------------------------------

    def _touch(self) -> None:
        if self.first_added is None:
            self.first_added = time.monotonic()

    def add_event(self, raw: RawEvent, event: Event | None = None) -> None:
        self._touch()
        self.events.append((raw, event))

    def add_alert(self, alert: Alert | Mapping[str, Any]) -> None:
        self._touch()
        self.alerts.append(alert)

    def add_invalid(self, source: str, reason: str, raw: bytes) -> None:
        self._touch()
        self.invalid.append((source, reason, raw))

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

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store.writer(self.path, wait=self.wait)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def positions(self) -> dict[tuple[str, int], int]:
        """The stored positions of this writer's consumer, including what is buffered."""
        if self.consumer is None:
            return {}
        store = self._open()
        try:
            return {**store.positions(self.consumer), **self.moved}
        finally:
            if not self.hold_open:
                self.close()

    def flush(self) -> Flushed | None:
        """Write everything buffered in one transaction; None when there was nothing."""
        if self.first_added is None:
            return None
        started = time.perf_counter()
        store = self._open()
        try:
            with store.transaction():
                new = store.write_events(self.events)
                store.write_alerts(self.alerts)
                store.write_invalid(self.invalid)
                if self.consumer is not None:
                    store.set_positions(self.consumer, self.moved)
                _hold_here(self.totals["flushes"])
        finally:
            if not self.hold_open:
                self.close()
        done = Flushed(
            len(self.events),
            new,
            len(self.alerts),
            len(self.invalid),
            time.perf_counter() - started,
        )
        for key in ("events", "new_events", "alerts", "invalid"):
            self.totals[key] += getattr(done, key)
        self.totals["flushes"] += 1
        self.events, self.alerts, self.invalid = [], [], []
        self.moved = {}
        self.first_added = None
        return done

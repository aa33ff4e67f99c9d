"""`HistoryFollower`: the embedded service's DuckDB history, written from its logs on a
thread of its own -- so that nothing the history does (a reader holding the file, a full
disk, a slow checkpoint) can delay an alert or an acknowledgment.

The event log is the source (as Kafka is for the sink): the follower reads what the log
gained since the position the history holds, writes it with that position in one
transaction, and goes on; the alert log is read the same way (the history keeps each
transition once). A batch that cannot be written is dropped and read again from the log
later, so memory stays bounded however long the history is unavailable. A file held by a
reader (`runwatch sql`) is waited for -- the history lags, shown by /metrics -- and a file
that cannot be written is said once, counted, and shown by /readyz.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runwatch.service.wal import ARRIVAL, DEAD, AlertLog, EventLog, parse_dead
from runwatch.store.exceptions import StoreLocked
from runwatch.store.writer import NOT_A_ROW, BatchWriter, WriteHealth
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.serve")

_RUNNING: weakref.WeakSet[HistoryFollower] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """At exit, let each running follower finish its batch (never killed inside DuckDB)."""
    for follower in list(_RUNNING):
        follower._stop.set()
        if follower._thread is not None:
            follower._thread.join(LOCK_WAIT + 10)


CONSUMER, TOPIC = "serve", "wal"
#: Lines per batch: bounded memory, a few hundred ms of DuckDB work at most.
BATCH_LINES = 50_000
#: How long one try waits for a reader to let go of the file (then the next try).
LOCK_WAIT = 2.0


class HistoryFollower:
    def __init__(
        self,
        db: Path,
        events: EventLog,
        alerts: AlertLog,
        *,
        interval: float = 1.0,
        on_failure: Callable[[], None] = lambda: None,
    ) -> None:
        self.db, self.events, self.alerts = db, events, alerts
        self.interval = interval
        self.on_failure = on_failure
        self.writer = BatchWriter(db, consumer=CONSUMER, wait=LOCK_WAIT)
        self.health = WriteHealth(db, log)
        self.pos: int | None = None  # of the event log, what the history holds (None: ask it)
        self.generation = -1
        self.alert_pos = 0  # of the alert log, this process has written (the history dedups)
        self.caught_up_at = time.monotonic()
        self.held: str | None = None  # who holds the file, while a reader does
        self._busy = threading.Lock()
        self._full = False  # the last batch stopped at BATCH_LINES: more is waiting
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        # a daemon, so a forgotten close() cannot hold the process; at exit it is stopped
        # first (_stop_all), so it never dies inside DuckDB
        self._thread = threading.Thread(target=self._run, name="runwatch-history", daemon=True)
        self._thread.start()
        _RUNNING.add(self)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.cycle()
            if not self._full:  # else more is waiting: the next batch at once
                self._stop.wait(self.interval)  # one transaction a flush interval, not a POST

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread after one last try; what is left is written at the next start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the history is still busy (%s); it catches up at the next start",
                            self.held or "writing")  # fmt: skip
                return  # a daemon: it cannot hold the process
        self._thread = None
        _RUNNING.discard(self)
        self.cycle()
        self.writer.close()

    # -- one batch -------------------------------------------------------------------------

    def cycle(self) -> bool:
        """Write one batch of what the logs gained; whether the history has all of it."""
        with self._busy:
            try:
                done = self._cycle()
            except StoreLocked as err:
                self.writer.discard()
                if self.held is None:
                    log.info("the history %s is held by another process; alerts go on, and the "
                             "history catches up when it is free (%s)", self.db, err)  # fmt: skip
                self.held = str(err)
                return False
            except NOT_A_ROW as err:
                self.writer.discard()
                self.on_failure()
                self.health.failed(err)
                return False
            if self.held is not None:
                log.info("the history %s is free again", self.db)
                self.held = None
            self.health.written()
            if done:
                self.caught_up_at = time.monotonic()
            return done

    def _cycle(self) -> bool:
        events = self.events
        if self.pos is None or self.generation != events.generation:
            self.generation = events.generation
            stored = self.writer.positions().get((TOPIC, self.generation), 0)
            self.pos = stored if stored <= events.size else 0  # else: write it all again
        stop, alert_stop = events.size, self.alerts.size
        if self.pos >= stop and self.alert_pos >= alert_stop:
            return True  # nothing new: the file is not even opened
        self.writer.open()  # the lock first: no batch is read while a reader holds the file
        end = self._read(self.pos, stop)
        for alert in self.alerts.read(self.alert_pos, alert_stop):
            self.writer.add_alert(alert)
        self.writer.advance(TOPIC, self.generation, end)
        self.writer.flush()
        self.pos = end
        self.alert_pos = alert_stop
        return end >= stop

    def _read(self, start: int, stop: int) -> int:
        """Buffer up to a batch of the log's records from `start`; where the batch ends."""
        end, n = start, 0
        for n, (line, after) in enumerate(self.events.scan(start, stop), 1):
            end = after
            if line.startswith(DEAD):
                dead = parse_dead(line)
                if dead is not None:
                    self.writer.add_invalid(dead)
            elif not line.startswith(ARRIVAL) and not line.startswith(b"#"):
                try:
                    self.writer.add_event(line, decode(line))
                except InvalidEvent as err:  # valid when logged: damage since
                    self.writer.add_invalid(Refused(err.reason, line, "wal"))
            if n >= BATCH_LINES:
                break
        self._full = n >= BATCH_LINES if end > start else False
        return end

    # -- what others need to know ----------------------------------------------------------

    @contextmanager
    def paused(self) -> Iterator[bool]:
        """Hold the follower between batches, if it is between batches now (never waits):
        whether it is held."""
        if not self._busy.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self._busy.release()

    def moved(self, size: int) -> None:
        """The log was rewritten (paused, caught up): the history holds all of it."""
        self.generation, self.pos = self.events.generation, size
        self.writer.advance(TOPIC, self.generation, size)

    def lag_bytes(self) -> int:
        """How much of the event log the history lacks (all of it until the first batch)."""
        return self.events.size - self.pos if self.pos is not None else self.events.size

    def lag_seconds(self) -> float:
        """How long the history has not had everything: 0 while it does."""
        if self.pos is not None and self.pos >= self.events.size:
            return 0.0
        return time.monotonic() - self.caught_up_at

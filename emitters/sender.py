"""The bounded in-memory queue between `emit()` and a destination, and the thread draining it.

`emit()` appends to a deque, nothing else on the caller's side, so it never waits for the
network; the sender takes what has gathered every `linger` seconds, or sooner when woken.
When the deque is full (the sender is stuck on a slow broker), the caller moves the deque's
contents and its own event to the spool itself, under the spool's lock — the same lock under
which the sender takes batches, so events reach the disk in the order they were emitted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from runwatch.emitters.transport import Destination

log = logging.getLogger("runwatch.emitters")

#: A queue entry is an encoded event, or an Event a `flush()` waits on.
Item = str | threading.Event


class Sender:
    """Owns the queue, the wake-up event and the thread; see the module docstring."""

    def __init__(
        self, destination: Destination, *, max_queue: int, name: str, linger: float = 0.05
    ) -> None:
        self.destination = destination
        self.queue: deque[Item] = deque()
        self.wake = threading.Event()
        self.max_queue = max_queue
        #: The sender looks at the queue this often by itself; emit() wakes it only once this
        #: many events wait. Waking a thread per event costs the caller a futex wake and a
        #: GIL hand-off (tens of µs on a small VM); batching also spares the broker.
        self.linger = linger
        self.wake_at = max(1, min(max_queue // 2, 1000))
        self.name = name
        #: held by the thread while it works (I/O, logging): a fork waits for it (`quiet`), so
        #: a child never inherits a lock of a stream or handler this thread held mid-write
        self.busy = threading.Lock()
        self.thread: threading.Thread | None = None
        self._stopping = False
        self._deadline = 0.0

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _take(self) -> tuple[list[str], list[threading.Event]]:
        """Everything queued now, in order (lock held)."""
        queue, lines, marks = self.queue, [], []
        for _ in range(len(queue)):
            item = queue.popleft()
            if isinstance(item, str):
                lines.append(item)
            else:
                marks.append(item)
        return lines, marks

    def spill(self, line: str | None) -> None:
        """From the caller, when the queue is full: queue and `line` to the spool, in order."""
        spool = self.destination.spool
        with spool.lock:
            lines, marks = self._take()
            if line is not None:
                lines.append(line)
            spool.append(lines)
        for mark in marks:
            mark.set()

    def _step(self) -> None:
        destination = self.destination
        spool = destination.spool
        with spool.lock:
            lines, marks = self._take()
            reserved = spool.reserve() if lines and destination.live() else -1
            if reserved < 0:
                spool.append(lines)
        if reserved >= 0:
            destination.send_live(lines, reserved)
        for mark in marks:
            mark.set()

    def _run(self) -> None:
        destination = self.destination
        while True:
            try:
                with self.busy:
                    destination.tick()
                self.wake.wait(min(destination.wait_s(), self.linger))
                self.wake.clear()
                stopping = self._stopping
                with self.busy:
                    self._step()
            except Exception:  # never die: a dead sender would leave events queued
                log.exception("runwatch: the event sender failed; retrying")
                time.sleep(0.5)
                continue
            if stopping and not self.queue:
                break
        try:
            destination.close(self._deadline)
        except Exception:
            log.exception("runwatch: closing the event destination failed")

    def quiet(self, timeout: float) -> bool:
        """Wait until the thread is between two pieces of work and keep it there (True), or
        give up after `timeout` (False); `release_quiet` lets it go on. For a fork."""
        return self.busy.acquire(timeout=timeout)

    def release_quiet(self) -> None:
        self.busy.release()

    def stop(self, timeout: float) -> bool:
        """Deliver what is queued, give the destination until `timeout` to finish, join.

        Returns whether the thread ended in time; if not, what is still queued goes to the
        spool from here, so nothing stays behind in memory.
        """
        thread = self.thread
        if thread is None:
            self.destination.close(time.monotonic())
            return True
        self._deadline = time.monotonic() + timeout
        self._stopping = True
        self.wake.set()
        thread.join(timeout + 1.0)
        if thread.is_alive():
            log.warning("runwatch: the event sender did not finish in %.1fs", timeout)
            self.spill(None)
            return False
        return True

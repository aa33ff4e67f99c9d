"""`BackgroundNotifier`: the Slack notifier off the caller's thread, for the embedded service.

Slack can hold a call for a minute (a 429's Retry-After, backoff on 5xx); the service's
event path must not wait for that. `submit(alert)` queues the transition and returns; one
thread sends in order, retrying a transition Slack did not take (`runwatch.notify.delivery`)
before the next, and posts reminders. It takes what is queued as one batch (at most
`BATCH`), so the longer Slack makes it wait, the more of a burst it folds into one message.
A transition queued but not sent when the process dies is not lost if the caller
re-submits what its alert log holds at start: the notifier's ledger drops the ones already
sent, and one in flight when the process died is looked for in the channel first
(`Delivery.recover`), so it is not sent twice.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from runwatch.exceptions import DeliveryStopped, SlackError
from runwatch.notify.delivery import Delivery
from runwatch.notify.notifier import Notifier
from runwatch.stream.alerts import Alert

log = logging.getLogger("runwatch.notify")

_STOP = object()
#: the most transitions handed to the notifier at once
BATCH = 500


class BackgroundNotifier:
    """Owns a `Notifier` and the thread that feeds it."""

    def __init__(
        self, notifier: Notifier, *, remind_every: float = 30.0, max_backoff: float = 60.0
    ) -> None:
        self.notifier = notifier
        self.remind_every = remind_every
        self.max_backoff = max_backoff
        self._queue: queue.Queue[Any] = queue.Queue()
        self._stopping = threading.Event()
        self.delivery = Delivery(notifier, stop=self._stopping, max_backoff=max_backoff)
        self._thread = threading.Thread(target=self._run, name="runwatch-notify", daemon=True)
        self._thread.start()

    def submit(self, alert: Alert) -> None:
        self._queue.put(alert)

    def pending(self) -> int:
        return self._queue.qsize()

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued (up to `timeout`), then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)
        self._stopping.set()
        self._thread.join(5)
        self.notifier.close()

    def _run(self) -> None:
        self.delivery.recover()  # before the first send: what a crash left in flight
        last_remind = 0.0
        while not self._stopping.is_set():
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                item = None
            if item is _STOP:
                self.delivery.tidy(wait=True)  # the roots as they stand, before stopping
                break
            batch, stop = self._more([] if item is None else [item])
            try:
                if batch:
                    self.delivery.deliver_many(batch)
            except DeliveryStopped:
                break
            except SlackError:  # the token was refused: logged once; the rest is dropped
                pass
            except Exception:  # never let one bad alert kill the thread
                log.exception("notifier failed on one transition; skipped")
            if stop:
                self.delivery.tidy(wait=True)
                break
            if item is None:  # idle: the roots catch up
                self.delivery.tidy()
            if time.monotonic() - last_remind >= self.remind_every:
                last_remind = time.monotonic()
                self.delivery.remind()

    def _more(self, batch: list[Alert]) -> tuple[list[Alert], bool]:
        """What else is queued now, up to BATCH; whether a stop was among it."""
        while batch and len(batch) < BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

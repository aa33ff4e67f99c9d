"""How a transition reaches Slack when Slack is unwell: the one retry policy of the notifier.

Two layers, each in one place. Inside one call, `runwatch.notify.slack.SlackPoster` waits out a
429's Retry-After and retries 5xx and network errors a few times. When a call still fails
retryably, `Delivery.deliver` keeps the transition and tries it again with backoff (1 s,
doubling to `max_backoff`), for as long as it takes or until told to stop: nothing is
skipped, nothing is recorded as sent before Slack said so, and the caller (the Kafka consumer
of `runwatch notify`, which commits only after; the background thread of `runwatch serve`)
goes on with the next transition only then. An error Slack will not get over by itself
(a refused token) is not retried: it is raised once for the caller to report.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from runwatch.exceptions import DeliveryStopped, SlackError
from runwatch.notify.notifier import Notifier
from runwatch.notify.outcome import Outcome
from runwatch.stream.alerts import Alert

log = logging.getLogger("runwatch.notify")


class Delivery:
    """Sends transitions through a `Notifier`, retrying what Slack may still take."""

    def __init__(
        self,
        notifier: Notifier,
        *,
        stop: threading.Event | None = None,
        max_backoff: float = 60.0,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.notifier = notifier
        self.stop = stop or threading.Event()
        self.max_backoff = max_backoff
        self.on_wait = on_wait or (lambda seconds: None)
        self.retries = 0

    def deliver(self, alert: Alert) -> Outcome:
        """The notifier's outcome for `alert` (sent, duplicate, silenced, ...), once Slack took
        it. Raises SlackError for what retrying cannot fix, DeliveryStopped when stopped."""
        (outcome,) = self.deliver_many([alert])
        return outcome

    def deliver_many(self, alerts: Sequence[Alert]) -> list[Outcome]:
        """`deliver` for a batch, in order (the notifier folds a burst into fewer messages);
        tried again whole after an outage -- what went out before is a duplicate then."""
        backoff = 1.0
        while True:
            try:
                return self.notifier.notify_many(alerts)
            except SlackError as err:
                if not err.retryable:
                    raise
                self._wait(backoff, err)
                backoff = min(self.max_backoff, backoff * 2)

    def recover(self) -> int:
        """After a crash, before anything is sent: the messages that reached Slack but not
        the ledger are found (`Notifier.recover`), so they are not sent twice."""
        try:
            return self.notifier.recover()
        except SlackError as err:
            log.warning("recovery check skipped: %s", err.error)
            return 0

    def remind(self) -> int:
        """Reminders due now; a Slack outage defers them to the next call."""
        try:
            return self.notifier.remind()
        except SlackError as err:
            log.warning("reminders deferred: %s", err.error)
            return 0

    def tidy(self, wait: bool = False) -> int:
        """Roots re-rendered as chat.update's budget allows (`Notifier.tidy`); a Slack
        outage defers them."""
        try:
            return self.notifier.tidy(wait)
        except SlackError as err:
            log.warning("root messages not re-rendered yet: %s", err.error)
            return 0

    def _wait(self, seconds: float, err: SlackError) -> None:
        if self.stop.is_set():
            raise DeliveryStopped(f"stopped while Slack was unreachable ({err.error})")
        self.retries += 1
        log.warning("Slack unreachable (%s): trying again in %.0fs", err.error, seconds)
        self.on_wait(seconds)
        if self.stop.wait(seconds):
            raise DeliveryStopped(f"stopped while Slack was unreachable ({err.error})")

"""Keeping under Slack's rate limits before Slack has to say so.

Slack's limits (https://docs.slack.dev/apis/web-api/rate-limits): chat.postMessage "generally
allows posting one message per second per channel" with short bursts tolerated (and a
workspace-wide limit it does not number); chat.update is Tier 3, "50+ per minute" per method
per workspace. Past them Slack answers 429 with a `Retry-After`, which `SlackPoster` waits out;
`Pace` keeps the notifier from getting there: each call reserves its slot on a GCRA schedule
(the leaky bucket as a meter: one call per `interval` on average, `burst` back to back) and
waits for it, so a storm goes out at the rate Slack takes. The notifier asks `ready` first and
folds a burst of replies into fewer messages rather than wait (`runwatch.notify.notifier`).

The bursts here are smaller than the local Slack's (`harness/slack_server.py`), so a paced
client is never refused there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Rate:
    """One call per `interval` seconds on average, `burst` of them back to back."""

    interval: float
    burst: int


#: chat.postMessage, per channel: one a second, three back to back
POST_RATE = Rate(1.0, 3)
#: chat.update, per workspace: Tier 3's 50 a minute, ten back to back
UPDATE_RATE = Rate(60 / 50, 10)


class Pace:
    """A GCRA meter of one `Rate` (thread-safe): `reserve` books the next slot and says how
    long to wait for it; `ready` only says."""

    def __init__(self, rate: Rate, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.clock = clock
        self._tat = float("-inf")  # the theoretical arrival time of the next call
        self._lock = threading.Lock()

    @property
    def _slack(self) -> float:
        return (self.rate.burst - 1) * self.rate.interval

    def ready(self, spare: int = 0) -> float:
        """Seconds until a call would go out without waiting (0: now) -- with `spare` more
        slots left after it."""
        with self._lock:
            ahead = self._tat + spare * self.rate.interval
            return max(0.0, ahead - self._slack - self.clock())

    def reserve(self) -> float:
        """Book the next slot; the seconds to wait before using it."""
        with self._lock:
            now = self.clock()
            wait = max(0.0, self._tat - self._slack - now)
            self._tat = max(self._tat, now) + self.rate.interval
            return wait

    def hold(self, seconds: float) -> None:
        """Slack said wait (a 429's Retry-After): no call before `seconds` from now."""
        with self._lock:
            self._tat = max(self._tat, self.clock() + seconds + self._slack)


class Paces:
    """The meters of one Slack workspace: chat.postMessage per channel, chat.update for all."""

    RATES: ClassVar[dict[str, Rate]] = {"chat.postMessage": POST_RATE, "chat.update": UPDATE_RATE}

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._paces: dict[tuple[str, str], Pace] = {}
        self._lock = threading.Lock()

    def of(self, method: str, channel: str) -> Pace | None:
        rate = self.RATES.get(method)
        if rate is None:
            return None
        key = (method, channel if method == "chat.postMessage" else "*")
        with self._lock:
            pace = self._paces.get(key)
            if pace is None:
                pace = self._paces[key] = Pace(rate, self.clock)
            return pace

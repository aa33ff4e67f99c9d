"""The live clock rule: silence is judged only on time in which it could have been heard.

A silence rule (a heartbeat that stops, a step that does not come) fires when time passes a
deadline with nothing heard. But nothing can be heard while the broker is down or the worker
is paused, and what emitters send reaches the broker only after their own delays: after a
broker outage each delivers what it spooled meanwhile on its own schedule (its reconnect
backoff), and an emitter starved of CPU (a loaded node) or of network sends seconds late.
One emitter's records arriving before another's must not move time past the moment the
other sent what has not arrived yet -- that would fire on every late process of the
partition, and resolve it a moment later.

So time for a partition holds, two ways, both seen from the partition, both bounded:

- at the moment its reading stopped, for a while after it resumes -- as long as the
  interruption lasted, at most `RECONNECT_S`, which is how long an emitter takes to
  reconnect and send its spool -- where the worker's fetches of it stopped answering for
  `GAP_S` (`observe`): its broker was down or the worker itself was paused. A re-read has no
  fetches to go by, so it reads the same from the records (`interrupted`): a gap of `GAP_S`
  in their append times -- a broker away appends nothing -- that records stamped in it
  follow late within `WINDOW_S`, the emitters delivering what they spooled through it; a gap
  nothing spooled follows was quiet. Late records read while it holds (the spools) hold it
  on, at the earliest time they carry, for as long as they were late, at most `RECONNECT_S`
  after it began;
- behind the wall clock while the partition's records arrive late (`late`): a record that
  arrives `LATE_S` or more after its event time says that emitters are delivering late,
  and how much later another may still come it cannot say -- one emitter of a loaded node
  may be seconds behind the rest. So for `LAG_WINDOW_S` of arrivals after it, time goes no
  further than `RECONNECT_S` behind the wall clock, the longest any hold lasts: silence is
  judged that late while records come late, and no later, however long they do. Read from
  the records alone, so a rebuild that re-reads them holds as the live worker did; it
  holds the time events move too.

A process that died meanwhile fires that much later; none fires for having been unreadable
or slow to deliver. However late its records, one emitter cannot hold time for long: a
hold at an interruption ends `RECONNECT_S` after reading resumed at most, and late records
hold silence `RECONNECT_S` behind the wall clock, no further.
Pure: the drivers pass in the times.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: No fetch of the partition answered for this many seconds: a gap (outage, pause, stall).
GAP_S = 2.0
#: A record that arrives this many seconds after its event time was held on its way.
LATE_S = 3.0
#: The longest a hold lasts: an emitter retries its broker within 5 s (its longest backoff)
#: and then sends its spool, oldest first, before anything new.
RECONNECT_S = 15.0
#: How far (in append time) a re-read looks past a gap in the records for late ones.
WINDOW_S = RECONNECT_S
#: How long (in append time) after a late record silence stays RECONNECT_S behind.
LAG_WINDOW_S = RECONNECT_S


def interrupted(
    times: Sequence[tuple[float, float]], before: float, complete: bool
) -> tuple[int, list[int]]:
    """For a re-read: how many of the records can be applied now, and before which of those
    a gap in the append times was an interruption of reading rather than quiet. `times`:
    each record's (append time, event time, its host's clock corrected), in order; `before`:
    the append time of the record before them (-inf: none, the first record is no gap's
    end). An interruption is a gap of GAP_S that
    records stamped before its end follow within WINDOW_S, LATE_S late or more (spooled
    through it); a gap whose window the records do not cover yet ends what can be applied
    there (`told`), unless `complete` (nothing follows)."""
    outages: list[int] = []
    previous = before
    for i, (arrival, _) in enumerate(times):
        if arrival - previous > GAP_S and math.isfinite(previous):
            said = told(arrival, times[i:])
            if said:
                outages.append(i)
            elif said is None and not complete:
                return i, outages
        previous = arrival
    return len(times), outages


def told(resumed: float, times: Iterable[tuple[float, float]]) -> bool | None:
    """What the records from a gap's end on (appended from `resumed`; (append time, event
    time) each, in order) say the gap was: an interruption (True: one stamped before
    `resumed` came LATE_S late or more within WINDOW_S), quiet (False: WINDOW_S went by
    without one), or not yet (None). The records an undecided gap waits with need only the
    newer ones read: those it has already read said nothing."""
    for arrival, ts in times:
        if arrival > resumed + WINDOW_S:
            return False
        if arrival - ts > LATE_S and ts < resumed:
            return True
    return None


@dataclass
class ReadClock:
    """One partition's reading: when its fetches last answered, the time held after an
    interruption (`held_at`, until time reaches `until`; the episode began at `since`), and
    when the last record that came late arrived (`late_at`)."""

    answered: float | None = None  # when a fetch of the partition last answered
    held_at: float | None = None
    until: float = -math.inf
    since: float = -math.inf
    late_at: float = -math.inf

    @classmethod
    def after(cls, last_record: float) -> ReadClock:
        """The clock of a partition that goes live after a rebuild: its last record's append
        time stands for the last answer, so a broker outage that ended while it was being
        rebuilt still holds time (the worker that read through it is gone)."""
        clock = cls()
        clock.answered_by(last_record)
        return clock

    def answered_by(self, last_record: float) -> None:
        """A partition going live after a rebuild: its last record's append time stands for
        the last answer, where none later is known (`after`)."""
        if math.isfinite(last_record) and (self.answered is None or last_record > self.answered):
            self.answered = last_record

    def observe(self, answered: float) -> None:
        """A fetch of the partition answered at `answered` (the client's record of it)."""
        last = self.answered
        if last is not None and answered - last > GAP_S:
            self._hold(last, answered, answered - last)
        if last is None or answered > last:
            self.answered = answered

    def late(self, ts: float, arrival: float) -> None:
        """A record with event time `ts` arrived at `arrival` (on the broker's clock)."""
        lag = arrival - ts
        if lag <= LATE_S:
            return
        if self.held_at is not None and arrival < self.until:  # a spool after a gap
            self.held_at = min(self.held_at, ts)
            self.until = max(self.until, min(arrival + lag, self.since + RECONNECT_S))
        if arrival > self.late_at:
            self.late_at = arrival

    def _hold(self, at: float, now: float, lasted: float) -> None:
        """A gap in reading from `at` to `now`: hold time at `at` until `lasted` (at most
        RECONNECT_S) after `now`; within a hold, at the earlier start, to the later end."""
        if self.held_at is not None and now < self.until:
            self.held_at = min(self.held_at, at)
            self.until = max(self.until, now + min(lasted, RECONNECT_S))
        else:
            self.held_at, self.since, self.until = at, now, now + min(lasted, RECONNECT_S)

    def limit(self, horizon: float, now: float) -> float:
        """`horizon`, held at an interruption's start until its emitters had time to deliver,
        and RECONNECT_S behind `now` while records come late."""
        if now - self.late_at < LAG_WINDOW_S and now - RECONNECT_S < horizon:
            horizon = now - RECONNECT_S
        if self.held_at is None:
            return horizon
        if now >= self.until:
            self.held_at = None
            return horizon
        return min(horizon, self.held_at)

    def dump(self) -> tuple[float | None, float | None, float, float, float]:
        return self.answered, self.held_at, self.until, self.since, self.late_at

    @classmethod
    def load(cls, state: tuple[Any, ...]) -> ReadClock:
        """What `dump` gave (a checkpoint of a release before `late_at`: four times)."""
        return cls(*state)

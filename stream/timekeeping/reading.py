"""The live clock rule: silence is judged only on time in which it could have been heard.

A silence rule (a heartbeat that stops, a step that does not come) fires when time passes a
deadline with nothing heard. But nothing can be heard while the broker is down or the worker
is paused, and after a broker outage each emitter delivers what it spooled meanwhile on its
own schedule (its reconnect backoff): one emitter's backlog arriving before another's must
not move time past the moment the other fell silent -- that would fire on every process of
the partition at once, and resolve it a moment later.

So time for a partition holds, at the moment its reading stopped, for a while after it
resumes -- as long as the interruption lasted, at most `RECONNECT_S`, which is how long an
emitter takes to reconnect and send its spool. Two things start a hold, both seen from the
partition, both bounded:

- the worker's fetches of it stopped answering for `GAP_S` (`observe`): its broker was
  down or the worker itself was paused. A re-read has no fetches to go by, so it reads the
  same from the records (`interrupted`): a gap of `GAP_S` in their append times -- a broker
  away appends nothing -- that records stamped in it follow late within `WINDOW_S`, the
  emitters delivering what they spooled through it; a gap nothing spooled follows was quiet;
- a record arrives late, `arrival - ts > LATE_S` (`late`): an emitter spooled it through an
  outage. Read from the records alone, so a rebuild that re-reads them holds as the live
  worker did; it holds the time events move too.

A process that died during the outage fires that much later; none fires for having been
unreadable. However late its records, one emitter cannot hold time for long: an episode
ends `RECONNECT_S` after it began, and as long again passes before the next one may begin.
A gap in reading is no guess: it always holds, however soon after another.
Pure: the drivers pass in the times.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: No fetch of the partition answered for this many seconds: a gap (outage, pause, stall).
GAP_S = 2.0
#: A record that arrives this many seconds after its event time was held on its way.
LATE_S = 3.0
#: The longest a hold lasts: an emitter retries its broker within 5 s (its longest backoff)
#: and then sends its spool, oldest first, before anything new.
RECONNECT_S = 15.0
#: How far (in append time) a re-read looks past a gap in the records for late ones.
WINDOW_S = RECONNECT_S


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
    """One partition's reading: when its fetches last answered, and the time held after an
    interruption (`held_at`, until time reaches `until`; the episode began at `since`)."""

    answered: float | None = None  # when a fetch of the partition last answered
    held_at: float | None = None
    until: float = -math.inf
    since: float = -math.inf

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
            self._hold(last, answered, answered - last, bounded=False)
        if last is None or answered > last:
            self.answered = answered

    def late(self, ts: float, arrival: float) -> None:
        """A record with event time `ts` arrived at `arrival` (on the broker's clock)."""
        if arrival - ts > LATE_S:
            self._hold(ts, arrival, arrival - ts)

    def _hold(self, at: float, now: float, lasted: float, bounded: bool = True) -> None:
        """Hold time at `at` until `lasted` (at most RECONNECT_S) after `now`. `bounded`
        (late records, a guess): an episode ends RECONNECT_S after it began, and time flows
        as long again before another may begin; a gap in reading is no guess and always
        holds."""
        if self.held_at is not None and now < self.until:  # within an episode: hold on
            self.held_at = min(self.held_at, at)
            until = max(self.until, now + min(lasted, RECONNECT_S))
            # however many late records follow, it ends RECONNECT_S after it began
            self.until = min(until, self.since + RECONNECT_S) if bounded else until
        elif bounded and now < self.until + RECONNECT_S:  # just after one: time flows
            self.held_at = None
        else:
            self.held_at, self.since, self.until = at, now, now + min(lasted, RECONNECT_S)

    def limit(self, horizon: float, now: float) -> float:
        """`horizon`, held at an interruption's start until its emitters had time to deliver."""
        if self.held_at is None:
            return horizon
        if now >= self.until:
            self.held_at = None
            return horizon
        return min(horizon, self.held_at)

    def dump(self) -> tuple[float | None, float | None, float, float]:
        return self.answered, self.held_at, self.until, self.since

    @classmethod
    def load(cls, state: tuple[float | None, float | None, float, float]) -> ReadClock:
        return cls(*state)

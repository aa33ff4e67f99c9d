"""Clock skew: put every emitting host's event times on the broker's clock.

Contract §2: a host whose clock is off by a few minutes must cause neither false nor missed
alerts in live mode. The live worker creates `runwatch.events` with
`message.timestamp.type=LogAppendTime`, so every record carries the time the broker appended
it, by one clock, stored in the log (a re-read sees the same value). For each emitting host,
`arrival - ts` is its clock offset plus the delivery delay; the smallest value over a recent
window is the best estimate of the offset (the NTP idea: the fastest delivery has the least
delay in it). Events are applied at `ts + offset`.

Backlog that an emitter spooled through a broker outage arrives late in a burst: its samples
are large and say nothing new, so a host's estimate only forgets old samples once the host
has been delivering for a full window since its last gap. The backlog therefore keeps its
(corrected) event time and is applied as late events.

One event cannot move a host's estimate: a sample more than `outlier` seconds below the
host's second-smallest sample (an event stamped far in the future -- a wrong clock, or a
hostile emitter naming that host) is left out until a second sample confirms it, which is
what a host whose clock really stepped forward gives. Samples are kept as the two smallest
per second of arrival, so the estimate costs O(1) per event, and O(window) only when a
second forgotten held one of the two smallest (a host of a large fleet sends about once a
second, so forgetting comes with nearly every event and a rescan must be the exception).

What is applied (`shift`) is the estimate, with three exceptions. A host within `deadband`
seconds behind is taken as it is: that much may be delay. A host ahead is always corrected
(no delay makes an event arrive before it was stamped), so no event is applied later than it
arrived -- else an event's own alert would ripen only after its run's end, sent in the same
batch, had closed the run. And a run's events from one host keep their order: the estimate
falls when any of the host's emitters delivers faster, and applied at once to every run it
would put a slow emitter's next event before its previous one (a failure before the step it
followed). So where the new shift would put an event of a run before one of its earlier
events from that host, the run keeps its shift, lowered only as far as the event's own
arrival requires: what other runs on the host deliver does not reorder a run's events.

Everything depends only on the records (event ts, append time) in partition order, so a
worker that rebuilds its state by re-reading a partition gets the same corrections.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from runwatch.stream.native import native

if TYPE_CHECKING:
    _Doubles = array[float]
else:  # (not subscriptable at run time before 3.12)
    _Doubles = array

#: Seconds of arrival time over which the smallest offset sample is taken.
DEFAULT_WINDOW = 60.0
#: A silence this long (arrival time) ends a host's delivery streak.
DEFAULT_GAP = 30.0
#: A lone sample this many seconds below the others is an outlier until confirmed.
DEFAULT_OUTLIER = 10.0

_INF = float("inf")
#: a second's three doubles as the array holds them (native), to append in one copy
_SECOND = struct.Struct("3d").pack


#: a shift of one event: (host, run, ts, arrival, deadband) -> seconds to add to its ts
Shift = Callable[["_Host", str | None, float, float, float], float]


#: `shift_held` in one native call (`_skew.c`), where the install built it
_NativeShifter: Callable[[float, float, float], Shift] | None = native(
    "runwatch.stream.timekeeping._skew", "Shifter"
)

#: A host's array: its scalars first, at these places, then its samples
_LAST, _STREAK, _LOW1, _LOW2, _HELD, _LATEST = range(6)
_HEAD = 6


class _Host(_Doubles):
    """One host, flat in one array of doubles: its scalars -- the latest arrival, when its
    delivery streak started, the two smallest samples held, the shift its run's latest event
    was given and the latest time one of them was put at -- then its samples, per second of
    arrival the two smallest ([second, smallest, second smallest] * seconds held, oldest
    first); beside the array, the run whose shifts it keeps (`run`; None: none yet) and
    other runs' (`others`: run -> the two). A fleet has tens of thousands of hosts per
    worker, each touched about once a second: one object and one contiguous buffer per
    host, read and written in one call per event (`ClockOffsets.shift`), is what keeps
    that cheap (floats held as attributes are objects of their own, each a cache miss)."""

    __slots__ = ("others", "run")

    run: str | None
    others: dict[str, tuple[float, float]] | None

    def __new__(cls, arrival: float) -> _Host:
        host = cast(_Host, super().__new__(cls, "d", (arrival, arrival, _INF, _INF, 0.0, 0.0)))
        host.run = None
        host.others = None
        return host

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # (array's own drops a subclass's slots: its doubles' bytes and the two)
        return (_Host, (0.0,), (self.tobytes(), self.run, self.others))

    def __setstate__(self, state: tuple[bytes, str | None, Any]) -> None:
        data, self.run, self.others = state
        del self[:]
        self.frombytes(data)

    @property
    def samples(self) -> array[float]:
        """Per second held: [second, smallest, second smallest], oldest first."""
        return array("d", self[_HEAD:])

    @property
    def low1(self) -> float:
        return float(self[_LOW1])

    @property
    def low2(self) -> float:
        return float(self[_LOW2])

    def rescan(self) -> None:
        """The two smallest samples held, read off every second's two (after forgetting a
        second that held one of them)."""
        low1 = low2 = _INF
        for j in range(_HEAD + 1, len(self), 3):
            a = self[j]
            if a < low2:
                if a < low1:
                    b = self[j + 1]
                    low1, low2 = a, (low1 if low1 < b else b)
                else:
                    low2 = a  # (b >= a: nothing more from this second)
        self[_LOW1], self[_LOW2] = low1, low2


class ClockOffsets:
    """Per-host clock offset estimates (seconds to add to a host's `ts`)."""

    __slots__ = ("_hosts", "gap", "outlier", "window")

    def __init__(
        self,
        window: float = DEFAULT_WINDOW,
        gap: float = DEFAULT_GAP,
        outlier: float = DEFAULT_OUTLIER,
    ) -> None:
        if window <= 0 or gap <= 0 or outlier <= 0:
            raise ValueError("window, gap and outlier must be positive")
        self.window = window
        self.gap = gap
        self.outlier = outlier
        self._hosts: dict[object, _Host] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def observe(self, host: object, ts: float, arrival: float) -> float:
        """Record that an event stamped `ts` by `host` reached the broker at `arrival`;
        return the host's offset estimate, this sample included."""
        return self.shift(host, None, ts, arrival, -_INF)

    def shift(
        self, host: object, run: str | None, ts: float, arrival: float, deadband: float
    ) -> float:
        """Seconds to add to the `ts` of an event of `run` stamped by `host` that reached the
        broker at `arrival`, the sample recorded: the host's estimate, 0 for a host within
        `deadband` seconds behind, but no less than keeps the run's events from that host in
        order, as far as its arrival allows (module docstring). `run` None: the estimate,
        no run's order kept (`observe`)."""
        return self.shifter()(self.held(host, arrival), run, ts, arrival, deadband)

    def held(self, host: object, arrival: float) -> _Host:
        """`host`'s samples and shifts, made at its first event (arriving at `arrival`).
        A caller whose events come in runs of one host (a batch record is one process's)
        looks the host up once for the run of them and hands it to `shift_held`: the
        look-up -- hashing a fresh name, a probe and a key compare in a table of tens of
        thousands of hosts, each a cache miss -- was a third of what a shift cost."""
        held = self._hosts.get(host)
        if held is None:
            held = self._hosts[host] = _Host(arrival)
        return held

    def shifter(self, native: bool = True) -> Shift:
        """`shift_held`, as the live driver calls it for every event: native where it was
        built (`_skew.c`, the same doubles; the Python below is its reference), for the
        window, gap and outlier this instance has now."""
        if native and _NativeShifter is not None:
            return _NativeShifter(self.gap, self.window, self.outlier)
        return self.shift_held

    def shift_held(
        self, held: _Host, run: str | None, ts: float, arrival: float, deadband: float
    ) -> float:
        """`shift`, for the host `held` (`held`'s answer, of this instance). One call for
        all of it: it runs for every event."""
        last = held[0]  # (`_LAST`: the places written as numbers on this path)
        sample = arrival - ts
        n = len(held)
        # the host's latest arrival again (a batch record's next line): its second is the
        # latest held, and whatever that arrival lets go of is gone already
        again = arrival == last and n != 6
        if not again:
            if arrival - last > self.gap:
                held[1] = arrival  # the streak starts again
            if arrival > last:
                held[0] = arrival
            second = arrival // 1.0  # (the second of arrival: `math.floor`, as a float)
        if not again and (n == 6 or second > held[n - 3]):
            held.frombytes(_SECOND(second, sample, _INF))  # (`extend` parses each double)
        elif sample < held[n - 2]:  # this second (or an arrival a little out of order)
            held[n - 1] = held[n - 2]
            held[n - 2] = sample
        elif sample < held[n - 1]:
            held[n - 1] = sample
        low1, low2 = held[2], held[3]
        if sample < low2:
            if sample < low1:
                held[2], held[3] = low1, low2 = sample, low1
            else:
                held[3] = low2 = sample
        horizon = arrival - self.window
        if not again and held[6] < horizon and arrival - held[1] >= self.window:
            # forget the seconds before the window (the latest stays), rescanning only when
            # a second forgotten held one of the two smallest
            i, n, lost = 6, len(held), False
            while n - i > 3 and held[i] < horizon:
                lost = lost or held[i + 1] <= low2
                i += 3
            del held[6:i]
            if lost:
                held.rescan()
                low1, low2 = held[2], held[3]
        estimate = low2 if low2 != _INF and low1 < low2 - self.outlier else low1
        want = estimate if estimate > deadband or estimate < 0.0 else 0.0
        if run is None:
            return want
        others = None
        if held.run == run:  # the run whose shifts the host keeps (nearly every event)
            held_shift, latest = held[4], held[5]
        elif held.run is None:
            held.run = run
            held[4], held[5] = want, ts + want
            return want
        else:
            others = held.others
            if others is None:
                others = held.others = {}
            kept_last = others.get(run)
            if kept_last is None:
                others[run] = (want, ts + want)
                return want
            held_shift, latest = kept_last
        # the shift of the run's latest event, the latest time one of them was put at
        if held_shift > want and ts + want < latest:  # less would put it before an earlier one
            kept = held_shift if held_shift < sample else sample  # (not after its own arrival)
            if kept > want:
                want = kept
        at = ts + want
        if at < latest:
            at = latest
        if others is None:
            if want != held_shift:  # (a write parses its double: only what changed)
                held[4] = want
            held[5] = at
        else:
            others[run] = (want, at)
        return want

    def forget(self, runs: Iterable[str]) -> None:
        """Let go of the shifts kept for runs that left (the hosts' samples stay)."""
        gone = set(runs)
        if not gone:
            return
        for state in self._hosts.values():
            others = state.others
            if others is not None:
                for run in gone.intersection(others):
                    del others[run]
            if state.run in gone:
                state.run, state[_HELD], state[_LATEST] = None, 0.0, 0.0
                if others:  # one of the others' takes its place
                    run = next(iter(others))
                    state.run, (state[_HELD], state[_LATEST]) = run, others.pop(run)
            if others is not None and not others:
                state.others = None

    def offset(self, host: object) -> float | None:
        """The current estimate for `host`, or None if it was never seen."""
        state = self._hosts.get(host)
        if state is None:
            return None
        low1, low2 = float(state[_LOW1]), float(state[_LOW2])
        return low2 if low2 != _INF and low1 < low2 - self.outlier else low1

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

Everything depends only on the records (event ts, append time) in partition order, so a
worker that rebuilds its state by re-reading a partition gets the same corrections.
"""

from __future__ import annotations

from collections import deque

#: Seconds of arrival time over which the smallest offset sample is taken.
DEFAULT_WINDOW = 60.0
#: A silence this long (arrival time) ends a host's delivery streak.
DEFAULT_GAP = 30.0


class _Host:
    __slots__ = ("last", "samples", "streak_start")

    def __init__(self, arrival: float) -> None:
        # (arrival, offset sample) with samples increasing front to back: front is the min.
        self.samples: deque[tuple[float, float]] = deque()
        self.streak_start = arrival
        self.last = arrival


class ClockOffsets:
    """Per-host clock offset estimates (seconds to add to a host's `ts`)."""

    __slots__ = ("_hosts", "gap", "window")

    def __init__(self, window: float = DEFAULT_WINDOW, gap: float = DEFAULT_GAP) -> None:
        if window <= 0 or gap <= 0:
            raise ValueError("window and gap must be positive")
        self.window = window
        self.gap = gap
        self._hosts: dict[object, _Host] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def observe(self, host: object, ts: float, arrival: float) -> float:
        """Record that an event stamped `ts` by `host` reached the broker at `arrival`;
        return the host's offset estimate, this sample included."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host(arrival)
        elif arrival - state.last > self.gap:
            state.streak_start = arrival
        if arrival > state.last:
            state.last = arrival
        sample = arrival - ts
        samples = state.samples
        while samples and samples[-1][1] >= sample:
            samples.pop()
        samples.append((arrival, sample))
        if arrival - state.streak_start >= self.window:
            horizon = arrival - self.window
            while len(samples) > 1 and samples[0][0] < horizon:
                samples.popleft()
        return samples[0][1]

    def offset(self, host: object) -> float | None:
        """The current estimate for `host`, or None if it was never seen."""
        state = self._hosts.get(host)
        return state.samples[0][1] if state is not None else None

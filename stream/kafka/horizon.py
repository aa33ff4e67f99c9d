"""How far wall-clock time may go for a live partition's silence rules, and whether this worker
may judge the partition by the wall clock at all: from what the consuming loop has read, not
from the clock alone.

A rule on silence (`heartbeat_lost`, `stuck_progress`) fires when nothing arrived for a while,
and a worker that cannot read its input cannot tell a silent process from a broker it cannot
reach. So a partition's time goes to the moment a fetch last answered with the partition's
end (aiokafka's `last_poll_timestamp`), and only when everything up to that end is read --
silence until then is silence of the emitters; otherwise to the broker time of the last
record applied (plus the driver's grace). After a pause of this worker (a long GC, SIGSTOP,
a node freeze), a broker restart or any stall, no fetch has answered since: time holds until
one does, and then a while longer for emitters that spooled through it
(`runwatch.stream.timekeeping.reading.ReadClock`).

The partition is judged at all only while the group lease is held (`lease.py`), the consumer
is assigned it, and a fetch of it answered within the session timeout: a member the group
expelled while it was paused has none of these until it runs again.
"""

from __future__ import annotations

from collections.abc import Callable

from runwatch.stream.kafka.consume import TP, ConsumingLoop
from runwatch.stream.kafka.lease import GroupLease
from runwatch.stream.live import LiveDriver
from runwatch.stream.timekeeping.reading import ReadClock


class Horizon:
    """The live partitions' time, for `topic`'s partitions read by `loop()` (None while the
    loop is not running)."""

    def __init__(
        self,
        loop: Callable[[], ConsumingLoop | None],
        lease: GroupLease,
        topic: str,
        session_timeout: float,
    ) -> None:
        self.loop = loop
        self.lease = lease
        self.topic = topic
        self.session_timeout = session_timeout
        self._clocks: dict[int, ReadClock] = {}  # per live partition, its reading's gaps

    def owns(self, partition: int, now: float) -> bool:
        """Whether this worker may judge `partition` by the wall clock (at `now`) and publish
        what that makes. What an expelled member paused meanwhile could still publish in the
        moment before its heartbeat learns it was expelled comes from records it read, so it
        is what the owner publishes, with the same transition ids (no transactions fence it
        at the broker yet: `publish.py` says where they go)."""
        loop, tp = self.loop(), TP(self.topic, partition)
        if loop is None or not self.lease.held() or not loop.holds(tp):
            return False
        polled = (loop.fetched(tp) or (None, False))[0]
        return polled is not None and now - polled < self.session_timeout

    def of(self, partition: int, driver: LiveDriver, now: float) -> tuple[float, bool]:
        """(how far wall-clock time may go for `partition`'s silence rules at `now`, whether
        all of the partition is read)."""
        held = min(now, driver.arrival + driver.grace)
        loop = self.loop()
        fetched = None if loop is None else loop.fetched(TP(self.topic, partition))
        if fetched is None:
            return held, False
        polled, caught_up = fetched
        clock = self._clocks.setdefault(partition, ReadClock())
        if polled is None:
            return clock.limit(held, now), False
        clock.observe(polled)
        if not caught_up:
            return clock.limit(held, now), False
        return clock.limit(max(held, min(now, polled)), now), True

    def went_live(self, partition: int, arrival: float) -> None:
        """`partition` went live after a re-read whose last record arrived at `arrival`."""
        self._clocks[partition] = ReadClock.after(arrival)

    def forget(self, partition: int) -> None:
        self._clocks.pop(partition, None)

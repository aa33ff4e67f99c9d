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
one does, and then a while longer for emitters that spooled through it -- the driver's own
`ReadClock` (`runwatch.stream.timekeeping.reading`), told of each fetch's answer before the
records it brought are applied (`observe`), so that no record read meanwhile moves the
silence clock past the interruption's start either: the first records fetched after an
outage may be an emitter's newest, its spool coming after them.

The partition is judged at all only while the consumer is assigned it and a fetch of it
answered within the session timeout: a member the group expelled while it was paused has
neither until it runs again -- and then what it judges is refused by the broker once the
new owner has taken the partition over (`publish.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from runwatch.stream.kafka.consume import TP, ConsumingLoop
from runwatch.stream.live import LiveDriver


class Horizon:
    """The live partitions' time, for `topic`'s partitions read by `loop()` (None while the
    loop is not running)."""

    def __init__(
        self,
        loop: Callable[[], ConsumingLoop | None],
        topic: str,
        session_timeout: float,
    ) -> None:
        self.loop = loop
        self.topic = topic
        self.session_timeout = session_timeout

    def owns(self, partition: int, now: float) -> bool:
        """Whether this worker may judge `partition` by the wall clock (at `now`)."""
        loop, tp = self.loop(), TP(self.topic, partition)
        if loop is None or not loop.holds(tp):
            return False
        polled = (loop.fetched(tp) or (None, False))[0]
        return polled is not None and now - polled < self.session_timeout

    def observe(self, partition: int, driver: LiveDriver) -> tuple[float | None, bool] | None:
        """Tell `driver`'s reading when a fetch of `partition` last answered (before the
        records it brought are applied); (that time, whether all of it is handed on), or
        None where the partition is not assigned."""
        loop = self.loop()
        fetched = None if loop is None else loop.fetched(TP(self.topic, partition))
        if fetched is not None and fetched[0] is not None:
            driver.reading.observe(fetched[0])
        return fetched

    def of(self, partition: int, driver: LiveDriver, now: float) -> tuple[float, bool]:
        """(how far wall-clock time may go for `partition`'s silence rules at `now`, whether
        all of the partition is read)."""
        held = min(now, driver.arrival + driver.grace)
        fetched = self.observe(partition, driver)
        if fetched is None:
            return held, False
        polled, caught_up = fetched
        clock = driver.reading
        if polled is None or not caught_up:
            return clock.limit(held, now), False
        return clock.limit(max(held, min(now, polled)), now), True

    @staticmethod
    def went_live(driver: LiveDriver) -> None:
        """`driver`'s partition went live after a re-read: its last record's append time
        stands for the last answer, so a broker outage that ended while it was being rebuilt
        still holds time (the worker that read through it is gone)."""
        driver.reading.answered_by(driver.arrival)

"""The one checkpointer: when a driver's state is checkpointed, and where checkpoints are kept.

Both live drivers -- the Kafka worker, per partition of `runwatch.events`, and `runwatch
serve`, for its event log -- checkpoint the same way: now and then (every `every_s` seconds
or `every_events` events applied), and whenever they hand their input over (a rebalance, a
stop, a compaction of serve's log), but never when nothing is new since the last one. That
decision is `Checkpointer`'s: pure, it is given the time and what the driver has applied,
and it reads no clock and does no I/O. Where checkpoints go is a `CheckpointStore`: the
compacted topic `runwatch.checkpoints` (`stream/kafka/checkpoints.py`, `KafkaCheckpoints`)
or a file beside serve's event log (`runwatch/service/checkpoint_file.py`,
`FileCheckpoints`). The format is `stream/checkpoint.py`; taking one over on a start is
`stream/recovery.py`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol


class CheckpointStore(Protocol):
    """Where a driver's checkpoints are kept, one per partition of its input (serve's event
    log is partition 0): the newest is what a start takes over."""

    async def read(self, partition: int) -> bytes | None:
        """The newest checkpoint of `partition` (None: there is none)."""

    async def write(self, partition: int, data: bytes) -> None:
        """Keep `data` as `partition`'s newest checkpoint; raises when it cannot."""


@dataclass(slots=True)
class _Last:
    when: float  # when a checkpoint was last made or tried
    applied: int  # the events the driver had applied then
    covers: Hashable = None  # the input position the newest stored checkpoint covers


class Checkpointer:
    """When each partition's state is checkpointed. `every_s` / `every_events`: the
    interval, in seconds or in events applied (0: not by that measure)."""

    def __init__(self, every_s: float, every_events: int = 0) -> None:
        self.every_s = every_s
        self.every_events = every_events
        self._last: dict[int, _Last] = {}

    def due(
        self, partition: int, covers: Hashable, applied: int, now: float, *, at_once: bool = False
    ) -> bool:
        """Whether to checkpoint `partition`, whose state now covers the input up to
        `covers` after `applied` events: never when its newest checkpoint covers that
        already; else once the interval has passed -- or `at_once`, whatever the interval
        (the input is handed over: a rebalance, a stop, a compaction of serve's log)."""
        last = self._last.get(partition)
        if last is not None and last.covers == covers:
            return False  # nothing new
        return at_once or self.interval_passed(partition, applied, now)

    def interval_passed(self, partition: int, applied: int, now: float) -> bool:
        """Whether `partition`'s last checkpoint (made or tried) is older than the interval,
        in seconds or in events applied since. One never made is."""
        last = self._last.get(partition)
        if last is None:
            return self.every_s > 0 or self.every_events > 0
        return (self.every_s > 0 and now - last.when >= self.every_s) or (
            self.every_events > 0 and applied - last.applied >= self.every_events
        )

    def tried(self, partition: int, applied: int, now: float) -> None:
        """A checkpoint of `partition` is being made at `now`, after `applied` events: the
        next is due an interval from now, whether this one is stored or not."""
        last = self._last.get(partition)
        if last is None:
            self._last[partition] = _Last(now, applied)
        else:
            last.when, last.applied = now, applied

    def stored(self, partition: int, covers: Hashable) -> None:
        """A checkpoint covering the input up to `covers` was stored."""
        last = self._last.setdefault(partition, _Last(0.0, 0))
        last.covers = covers

    def restored(self, partition: int, covers: Hashable, applied: int, now: float) -> None:
        """`partition` started at `now` from a checkpoint covering `covers` (None: from
        nothing): the next one is due an interval from now, and only with something new."""
        self.tried(partition, applied, now)
        self.stored(partition, covers)

    def covers(self, partition: int) -> Hashable:
        """What `partition`'s newest stored checkpoint covers (None: not known)."""
        last = self._last.get(partition)
        return None if last is None else last.covers

    def forget(self, partition: int) -> None:
        """`partition` went elsewhere: its schedule goes with it."""
        self._last.pop(partition, None)

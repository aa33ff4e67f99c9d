"""Which partitions a stream worker judges: taking over those the group gives it, and letting
go of one whose producer was fenced until the group says whose it is.

A takeover (`Ownership.take`, in the background while the consuming loop holds the
partitions paused): their checkpoints are restored (`takeover.py`); each partition is taken
over at the broker (`Publisher.open`: its transactional producer fences the previous owner)
after the previous owner's handover checkpoint, its last write, and before what it
published is read; then the records after the checkpoint are re-read, what is missing
published, and the drivers go live where the re-read stopped. The broker away at any step:
tried again, backing off, while the partitions are still being taken over.

A partition whose producer is fenced (another worker took it over) or fails for good is
lost (`lost`): no longer judged here. Whether it is still this worker's, the group says
(`look_into_lost`): a commit that carries the worker's generation goes through only for a
current member, which then takes the partition over again -- fencing, in turn, whoever
fenced it; the others are the rebalance's to settle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from runwatch.stream.kafka.consume import TP

if TYPE_CHECKING:
    from runwatch.stream.kafka.worker import StreamWorker

log = logging.getLogger("runwatch.stream.worker")

#: The longest wait between tries at taking a partition over (the broker away).
TAKEOVER_RETRY_S = 5.0


class Ownership:
    """The takeovers of one worker and the partitions it lost (see the module)."""

    def __init__(self, worker: StreamWorker) -> None:
        self.worker = worker
        #: partitions whose producer was fenced or failed for good, until the group says
        #: whether they are still this worker's
        self.lost_ones: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    def take(self, partitions: list[int]) -> None:
        """Take `partitions` over in the background (the caller marked them rebuilding);
        not once the worker is stopping (its partitions are handed over, not taken)."""
        if self._stopping:
            return
        task = asyncio.ensure_future(self._rebuild(partitions))
        self._tasks.add(task)  # (the loop keeps only a weak reference to a task)
        task.add_done_callback(self._tasks.discard)

    async def cancel(self) -> None:
        """Drop the takeovers under way, and take no more (the worker stops)."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _rebuild(self, partitions: list[int]) -> None:
        """Take `partitions` over; all over again, backing off, should that fail (the
        broker away), for those still being taken over."""
        wait = 0.5
        while taking := [p for p in partitions if p in self.worker.rebuilding]:
            try:
                await self._take_over(taking)
                return
            except Exception as err:
                log.warning("partitions %s: takeover failed (%s: %s); again in %.1fs", taking,
                            type(err).__name__, err, wait,
                            exc_info=not isinstance(err, KafkaError))  # fmt: skip
                await asyncio.sleep(wait)
                wait = min(TAKEOVER_RETRY_S, wait * 2)

    async def _take_over(self, partitions: list[int]) -> None:
        """Bring `partitions` up to date (`takeover.py`), then publish what is missing and
        let the live loop go on from where the re-read stopped."""
        w = self.worker
        started = time.perf_counter()
        # side by side: reading a checkpoint, or waiting for a promised one, is mostly I/O
        got = await asyncio.gather(*(w.takeover.restore(p) for p in partitions))
        restored = dict(zip(partitions, got, strict=True))
        steps = {"restore": time.perf_counter() - started}
        # then each taken over at the broker, which fences its previous owner -- after its
        # handover (the previous owner's last write), before what it published is read
        fencing = time.perf_counter()
        await asyncio.gather(*(self._open(p) for p in partitions))
        steps["fence"] = time.perf_counter() - fencing
        for p, start in restored.items():
            w.checkpointing.schedule.restored(p, start.offset, start.driver.applied, time.time())
        done = await w.takeover.rebuild(partitions, restored, w.rebuilding.__contains__)
        publishing = time.perf_counter()
        for p, made in done.made.items():
            out = w.publisher.of(p)
            fleet = w.fleet_records(p, done.drivers[p], made[0]) if p in done.drivers else []
            await out.publish(*made, fleet)
            await out.commit()
        done.steps = {**steps, **done.steps, "publish": time.perf_counter() - publishing}
        live = []
        for p in done.kept:
            if p not in w.rebuilding or not w.publisher.of(p).live:
                continue  # given away (or fenced) while its transitions were published
            d = w.drivers[p] = done.drivers[p]
            w.horizon.went_live(d)
            w.rebuilding.discard(p)
            if w.metrics is not None:
                w.metrics.live(d)
            if w.loop is not None:  # the live loop goes on from where the re-read stopped
                w.loop.go_on(TP(w.topics.events, p), done.resume[p])
            live.append(p)
        w.say(done.summary(live))  # as they go live (/readyz too), before the checkpoints
        now = time.time()
        for p in live:  # a takeover after this one starts from here
            await w.checkpointing.checkpoint(p, now)

    async def _open(self, partition: int) -> None:
        """Take `partition` over at the broker (`Publisher.open`), trying again while the
        broker cannot be reached and the partition is still being taken over."""
        wait = 0.5
        while partition in self.worker.rebuilding:
            try:
                await self.worker.publisher.open(partition)
                return
            except KafkaError as err:
                log.info("partition %d: not taken over at the broker yet (%s: %s); again in "
                         "%.1fs", partition, type(err).__name__, err, wait)  # fmt: skip
                await asyncio.sleep(wait)
                wait = min(TAKEOVER_RETRY_S, wait * 2)

    def lost(self, partition: int) -> None:
        """`partition`'s producer was fenced (another worker took it over) or failed for
        good: stop judging it here; whether it is still ours, the group says."""
        w = self.worker
        driver = w.drivers.pop(partition, None)
        if driver is None and partition not in w.rebuilding:
            return
        w.rebuilding.discard(partition)
        w.checkpointing.schedule.forget(partition)
        self.lost_ones.add(partition)
        if w.loop is not None:
            with contextlib.suppress(Exception):
                w.loop.pause([TP(w.topics.events, partition)])

    async def look_into_lost(self) -> None:
        """The lost partitions the group confirms are still this worker's (its generation is
        current: a commit of their offsets goes through) are taken over again; the others
        are left to the rebalance under way, whose assignment settles them."""
        w = self.worker
        loop = w.loop
        if loop is None or self._stopping:
            return
        for p in sorted(self.lost_ones):
            tp = TP(w.topics.events, p)
            if not loop.holds(tp):
                self.lost_ones.discard(p)
            elif await loop.confirm([tp]):
                self.lost_ones.discard(p)
                w.say(f"partition {p}: still this worker's; taking it over again")
                w.rebuilding.add(p)
                loop.pause([tp])
                self.take([p])

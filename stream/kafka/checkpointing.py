"""The worker's checkpoints: which live partitions are due, how a checkpoint is made, and
where it goes.

When is the one `Checkpointer`'s decision (`runwatch.stream.checkpointer`, shared with
`runwatch serve`): every `checkpoint_every_s` seconds or `checkpoint_every_events` events,
at once for a handover, never with nothing new. Where is `KafkaCheckpoints`
(`checkpoints.py`), which writes through the partition's publisher, in a transaction of
its own after everything the partition published before it is committed (a worker that
lost the partition stores nothing: its producer is fenced).

A checkpoint is made in three steps. First the broker is asked where the output topics end
(`read.output_ends`): everything the state made is before those ends, so a takeover reads
them from there on. Then the state is taken, between two batches (`making`: no transition
made and not yet handed to the producer), with the offset it covers; with `fork` it is
pickled in a forked child while events go on being applied (`snapshot.py`), else in place.
Last it is stored, once everything the partition published is committed. A partition
given away meanwhile is not stored: its new owner's checkpoints must stay the newest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from runwatch.stream.checkpointer import Checkpointer
from runwatch.stream.exceptions import SnapshotFailed
from runwatch.stream.kafka.checkpoints import HANDOVER_S, KafkaCheckpoints
from runwatch.stream.kafka.read import Ends
from runwatch.stream.kafka.snapshot import Snapshot
from runwatch.stream.live import LiveDriver
from runwatch.stream.metrics.worker import WorkerMetrics

log = logging.getLogger("runwatch.stream.worker")


class Checkpointing:
    """Checkpoints of a worker's live partitions (`drivers`, the worker's own dict).

    `ends()`: where the output topics end now; `prune(p, driver, now)`: what the live path
    does to a driver before its state is taken (finished runs leave)."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        store: KafkaCheckpoints,
        drivers: dict[int, LiveDriver],
        making: asyncio.Lock,
        *,
        fork: bool,
        ends: Callable[[], Awaitable[Ends]],
        prune: Callable[[int, LiveDriver, float], None],
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.schedule = checkpointer
        self.store = store
        self.drivers = drivers
        self.making = making
        self.fork = fork
        self.ends = ends
        self.prune = prune
        self.metrics = metrics
        #: the due checkpoints being made, off the polling loop (one batch at a time)
        self._running: asyncio.Task[None] | None = None

    def due(self, now: float, handover: bool = False) -> list[int]:
        """The live partitions due a checkpoint (`Checkpointer.due`): for a `handover`,
        every one with something new."""
        return [
            p for p, driver in self.drivers.items()
            if driver.position is not None
            and self.schedule.due(p, driver.position + 1, driver.applied, now, at_once=handover)
        ]  # fmt: skip

    def rereading_due(self, partition: int, driver: LiveDriver, now: float) -> bool:
        """Whether a partition being re-read this far is due one (a takeover's)."""
        return self.schedule.interval_passed(partition, driver.applied, now)

    async def turn(self, now: float) -> None:
        """Between polls: the due checkpoints, in place -- or, forked, started off the
        polling loop, which goes on while a child pickles."""
        if not self.fork:
            for p in self.due(now):
                await self.checkpoint(p, now)
        elif self._running is None or self._running.done():
            due = self.due(now)
            if due:
                self._running = asyncio.create_task(self.all(due, now))

    async def idle(self) -> None:
        """Once the checkpoints under way are made (their outcome is their own)."""
        running = self._running
        if running is not None and not running.done():
            await asyncio.wait([running])

    async def all(self, partitions: list[int], now: float) -> None:
        """The checkpoints of `partitions`, made together (forked: one child pickles them
        all, `snapshot.py`), each stored as its own."""
        parts = [(p, driver) for p in partitions if (driver := self.drivers.get(p)) is not None]
        try:
            await self.several(parts, now)
        except asyncio.CancelledError:
            raise
        except Exception:  # said; the next turn tries again
            log.exception("partitions %s: checkpoints failed", partitions)

    async def checkpoint(self, partition: int, now: float) -> bool:
        """Store the live partition's state, with the offset it covers, once everything it
        made is on its topics; whether it was stored (a failure is said and counted: the
        next takeover replays from the checkpoint before)."""
        driver = self.drivers.get(partition)
        if driver is None:
            return False
        return await self.of(partition, driver, now)

    async def of(self, partition: int, driver: LiveDriver, now: float) -> bool:
        """`checkpoint` of `driver`: the partition's live one, or one a handover promised
        (given away since, and stored all the same: its new owner waits for it)."""
        return (await self.several([(partition, driver)], now)).get(partition, False)

    async def several(self, parts: list[tuple[int, LiveDriver]], now: float) -> dict[int, bool]:
        """`of` each of `parts` (partition, driver), their states taken together (one
        child pickles them all); whether each was stored."""
        parts = [(p, driver) for p, driver in parts if driver.position is not None]
        if not parts:
            return {}
        mine = {p: self.drivers.get(p) is driver for p, driver in parts}
        output = await self._output_ends()  # before the states: all they made is before them
        # (one given away meanwhile is the new owner's to checkpoint)
        parts = [(p, d) for p, d in parts if not mine[p] or self.drivers.get(p) is d]
        if not parts:
            return {}
        taken: list[tuple[int, LiveDriver, int, int, int]] = []
        positions: list[tuple[LiveDriver, Any]] = []
        async with self.making:  # no transition made and not yet handed to the producer
            for p, driver in parts:
                self.prune(p, driver, now)
                assert driver.position is not None
                offset = driver.position + 1
                taken.append((p, driver, offset, driver.applied, len(driver.engine.runs)))
                position: dict[str, Any] = {"offset": offset}
                if output is not None:
                    position["output"] = output
                positions.append((driver, position))
            snapshot = Snapshot(positions, fork=self.fork)
        try:
            made = await snapshot.data()
        except SnapshotFailed as err:
            made = [None] * len(taken)
            why = str(err)
        else:
            why = "its state could not be pickled"
        stored: dict[int, bool] = {}
        for (p, driver, offset, applied, runs), data in zip(taken, made, strict=True):
            stored[p] = False
            if mine[p] and self.fork and self.drivers.get(p) is not driver:
                continue  # given away while the child pickled: the new owner's now
            if data is None:
                log.warning("partition %d: checkpoint not made (%s); a takeover replays from "
                            "the one before", p, why)  # fmt: skip
                if self.metrics is not None:
                    self.metrics.checkpoints.failed.labels(str(p)).inc()
                continue
            stored[p] = await self.store_one(p, applied, offset, data, runs, now, note=mine[p])
        return stored

    async def _output_ends(self) -> Ends | None:
        """Where the output topics end now, for a checkpoint to keep; None if the broker
        does not say (its takeover then reads them from the start)."""
        try:
            async with asyncio.timeout(HANDOVER_S):
                return await self.ends()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.info("output topics' ends not known (%s: %s)", type(err).__name__, err)
            return None

    async def store_one(
        self,
        partition: int,
        applied: int,
        offset: int,
        data: bytes,
        runs: int,
        now: float,
        note: bool = True,
    ) -> bool:
        """Store one checkpoint of `partition` (made when its driver had applied `applied`
        events, covering up to `offset`); whether it was stored. `note`: the partition is
        this worker's (its next checkpoint is due an interval from now)."""
        started = time.perf_counter()
        if note:
            self.schedule.tried(partition, applied, now)
        try:
            await self.store.write(partition, data)
        except Exception as err:
            log.warning("partition %d: checkpoint of %d runs not stored (%s: %s); a takeover "
                        "replays from the one before", partition, runs, type(err).__name__,
                        err)  # fmt: skip
            if self.metrics is not None:
                self.metrics.checkpoints.failed.labels(str(partition)).inc()
            return False
        if note:
            self.schedule.stored(partition, offset)
        if self.metrics is not None:
            self.metrics.checkpoints.stored(str(partition), len(data), runs,
                                            time.perf_counter() - started)  # fmt: skip
        return True

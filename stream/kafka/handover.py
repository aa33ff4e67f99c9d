"""Handing partitions over: what a worker whose partitions move does, so that their new
owners start from the state it leaves rather than from a checkpoint interval ago.

A rebalance -- a worker joined, left or died -- revokes every member's partitions; which of
them move is known only at the assignment that follows, and checkpointing them all in the
revoke would hold every member's live partitions until the slowest had pickled its state
(seconds at thousands of runs). So on a revoke (`promise`) each live partition with
something new since its last checkpoint gets a PENDING marker on the checkpoints topic, and
the worker rejoins at once. The assignment keeps the promises (`assigned`), side by side:
SETTLED for the partitions this worker kept (no one waits on them), a checkpoint of the
driver left behind for each that went elsewhere -- or SETTLED where that fails, so its new
owner waits no longer. A takeover waits up to HANDOVER_S for a promised checkpoint
(`checkpoints.latest`); a promise its new owner stopped waiting for is not kept, lest an
older state replace the checkpoints the new owner stores.

A worker that stops (a rolling restart, a scale-down) checkpoints every partition it holds
as it is then (`stop`), so whoever gets one re-reads only what comes after (a SIGKILL gives
no such chance: the checkpoint interval bounds that).

The handover checkpoint is the old owner's last write for the partition, made after the
assignment moved it: its new owner takes the partition over at the broker -- which fences
the old owner's producer (`publish.py`) -- only once it has the checkpoint or has stopped
waiting for it, so a promise kept in time goes out, and one kept too late is refused by
the broker. A member expelled while it was paused may still promise: its writes are
refused too, once the new owner has taken the partition over.
"""

from __future__ import annotations

import asyncio
import logging
import time

from runwatch.stream.kafka.checkpointing import Checkpointing
from runwatch.stream.kafka.checkpoints import HANDOVER_S, PENDING, SETTLED, KafkaCheckpoints
from runwatch.stream.kafka.publish import Publisher
from runwatch.stream.live import LiveDriver

__all__ = ["HANDOVER_S", "Handover"]

log = logging.getLogger("runwatch.stream.worker")


class Handover:
    """A worker's handovers, written through its `publisher`."""

    def __init__(
        self, checkpointing: Checkpointing, store: KafkaCheckpoints, publisher: Publisher
    ) -> None:
        self.checkpointing = checkpointing
        self.store = store
        self.publisher = publisher
        #: the partitions a revoke promised a handover checkpoint of, with their drivers as
        #: they stood and until when (loop time) their new owners wait
        self.promised: dict[int, tuple[LiveDriver, float]] = {}
        #: the promises being kept
        self.settling: set[asyncio.Task[None]] = set()

    async def promise(self) -> None:
        """A revoke: a PENDING marker for each live partition due a handover checkpoint."""
        drivers = self.checkpointing.drivers
        try:
            async with asyncio.timeout(HANDOVER_S):
                for p in self.checkpointing.due(time.time(), handover=True):
                    if p not in self.promised:
                        waited_until = asyncio.get_running_loop().time() + HANDOVER_S
                        await self.store.mark(p, PENDING)
                        self.promised[p] = (drivers[p], waited_until)
        except Exception as err:  # over HANDOVER_S (a broker away): the checkpoint before serves
            log.info("handover not promised (%s: %s)", type(err).__name__, err)

    def assigned(self, partitions: set[int]) -> None:
        """The assignment after a revoke: keep its promises in the background."""
        if not self.promised:
            return
        promised, self.promised = self.promised, {}
        task = asyncio.ensure_future(self._settle(promised, partitions & set(promised)))
        self.settling.add(task)
        task.add_done_callback(self.settling.discard)

    async def _settle(self, promised: dict[int, tuple[LiveDriver, float]], kept: set[int]) -> None:
        await asyncio.gather(*(self._keep(p, *promised[p], kept=p in kept)
                               for p in sorted(promised)))  # fmt: skip
        for p in promised:
            if p not in kept:  # its last write is out (or refused): its publisher goes
                self.publisher.handed(p)

    async def _keep(
        self, partition: int, driver: LiveDriver, waited_until: float, *, kept: bool
    ) -> None:
        """One partition's promise. Not once its new owner has stopped waiting: it went on
        from the checkpoint before, and the one it stores must stay the newest."""
        try:
            if kept:
                async with asyncio.timeout(HANDOVER_S):
                    await self.store.mark(partition, SETTLED)
                return
            async with asyncio.timeout_at(waited_until):
                if not await self.checkpointing.of(partition, driver, time.time()):
                    await self.store.mark(partition, SETTLED)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the new owner waits out HANDOVER_S at most
            log.info("partition %d: handover not kept (%s: %s)", partition,
                     type(err).__name__, err)  # fmt: skip

    async def stop(self) -> None:
        """This worker stopping: the handovers under way finish (their new owners wait for
        them), then every live partition -- those a revoke promised and no assignment
        settled among them -- is checkpointed as it is now, and what is open committed."""
        if self.settling:
            await asyncio.wait(self.settling, timeout=HANDOVER_S)
        try:
            async with asyncio.timeout(HANDOVER_S):
                await self.checkpointing.idle()
                now = time.time()
                await self.checkpointing.all(self.checkpointing.due(now, handover=True), now)
                await self.publisher.commit()
        except Exception as err:  # over HANDOVER_S (a broker away): the one before serves
            log.info("handover checkpoints cut short (%s: %s)", type(err).__name__, err)

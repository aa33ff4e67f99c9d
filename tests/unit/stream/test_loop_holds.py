"""How long the worker's event loop goes without a turn (`stream/kafka/held.py`): what says
how short a session timeout may be, on the worker's /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import time

from runwatch.stream.kafka.held import LoopHolds
from runwatch.stream.metrics.worker import WorkerMetrics


def test_a_callback_that_holds_the_loop_is_seen_as_long_as_it_held() -> None:
    holds = LoopHolds(every=0.01)

    async def main() -> None:
        watch = asyncio.ensure_future(holds.watch())
        await asyncio.sleep(0)  # the watch is asleep, due in 10 ms
        time.sleep(0.2)  # a callback that does not yield: the loop is held
        async with asyncio.timeout(10):  # (a watch that notes nothing fails, not hangs)
            while holds.longest == 0.0:
                await asyncio.sleep(0.01)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch

    asyncio.run(main())
    # woken at least the hold, less the watch's own sleep, after it was due
    assert holds.longest >= 0.2 - 0.01


def test_only_the_longest_hold_is_kept() -> None:
    holds = LoopHolds()
    for late in (0.3, 1.2, 0.5):
        holds.noted(late)
    assert holds.longest == 1.2


def test_the_longest_hold_is_on_the_workers_metrics() -> None:
    holds = LoopHolds()
    holds.noted(2.5)
    metrics = WorkerMetrics(list, 0, "127.0.0.1", held=lambda: holds.longest)
    body = metrics.collector.exposition(["runwatch_event_loop_held_max_seconds"]).decode()
    assert "runwatch_event_loop_held_max_seconds 2.5" in body

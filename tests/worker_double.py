"""A stream worker against the in-memory Kafka double (`MemoryConnection` for every consumer
and producer it makes), and what its tests read back: the unit
tests of the live path and takeovers (tests/unit/stream/test_worker_takeover.py), of its
checkpoints (test_kafka_checkpointing.py) and of its handovers (test_handover.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from helpers import encode, make_event
from kafka_double import MemoryBroker, MemoryConnection

from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.kafka.worker import StreamWorker

TOPICS = Topics("t.")
GROUP = "workers"
PARTITIONS = 2


def broker() -> MemoryBroker:
    b = MemoryBroker()
    b.create(TOPICS.events, PARTITIONS)
    for topic in (TOPICS.alerts, TOPICS.dlq, TOPICS.checkpoints, TOPICS.breaker, TOPICS.fleet):
        b.create(topic, 1)
    return b


@asynccontextmanager
async def worker(
    b: MemoryBroker, said: list[str], fork: bool = True, killed: bool = False
) -> AsyncIterator[StreamWorker]:
    """A worker of GROUP, consuming and ticking (as Faust's timer ticks it) until the block
    ends, then stopped as Faust stops it (`killed`: gone without a word, as by SIGKILL);
    live (every partition it was given rebuilt) when the block starts. Checkpoints only
    when a test asks (`checkpoint`) or it hands its partitions over."""
    settings = WorkerSettings(bootstrap="memory", partitions=PARTITIONS,
                              topic_prefix=TOPICS.prefix, app_id=GROUP, say=said.append,
                              checkpoint_every_s=0, checkpoint_every_events=0,
                              checkpoint_fork=fork)  # fmt: skip
    w = StreamWorker(settings, kafka=MemoryConnection(b))

    async def ticking() -> None:
        while True:
            await w.tick(time.time())
            await asyncio.sleep(settings.tick_s / 10)

    tasks = [asyncio.create_task(w.consume()), asyncio.create_task(ticking())]
    try:
        await until(lambda: w.readiness()[0] and bool(w.drivers), "the worker is live")
        yield w
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not killed:
            await w.shutdown()


async def until(what: Callable[[], Any], why: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {why}")
        await asyncio.sleep(0.01)
    return got


def send(b: MemoryBroker, partition: int, *events: dict[str, Any] | bytes) -> None:
    for e in events:
        if isinstance(e, bytes):
            b.produce(TOPICS.events, e, partition)
        else:
            b.produce(TOPICS.events, encode(e), partition, e["run"].encode())


def step(run: str, n: int, loss: float) -> dict[str, Any]:
    """Step `n`'s metrics, stamped a moment before they are sent (an event stamped after
    the broker's append time waits for the clock to pass it: the next tick)."""
    return make_event("step.metrics", time.time() - 1, run=run, step=n, metrics={"loss": loss})


def alerts(b: MemoryBroker) -> list[tuple[str, str, str]]:
    """(run, rule, state) of every transition on runwatch.alerts, in order, as a
    read_committed consumer reads them (as every runwatch consumer does)."""
    out = [json.loads(r.value or b"") for r in b.visible(TOPICS.alerts)]
    return [(a["run"], a["rule"], a["state"]) for a in out]


def ids(b: MemoryBroker) -> list[str]:
    return [json.loads(r.value or b"")["id"] for r in b.visible(TOPICS.alerts)]


def letters(b: MemoryBroker) -> list[int]:
    """The events offset of every dead letter, in order (committed)."""
    return [json.loads(r.value or b"")["offset"] for r in b.visible(TOPICS.dlq)]


def markers(b: MemoryBroker) -> list[tuple[int, bytes]]:
    """(events partition, word) of every handover marker on the checkpoints topic, and
    (partition, b"checkpoint") of every checkpoint, in order (committed)."""
    out = []
    for r in b.visible(TOPICS.checkpoints):
        if r.key is not None:
            p = int(r.key.rsplit(b"|", 1)[1])
            out.append((p, r.value if r.key.startswith(b"handover|") else b"checkpoint"))
    return out


NAN = ("r1", "non_finite_metric", "firing")
FINE = ("r1", "non_finite_metric", "resolved")


def took_over(said: list[str], partition: int, rebuilt: int | None = 0, at: int = 2) -> None:
    """The worker that said `said` started `partition` from the checkpoint at offset `at`
    (what the first worker had read), and re-read `rebuilt` records (None: any number)."""
    (took,) = [x for x in said if x.startswith(f"partition {partition}: from")]
    assert f"from the checkpoint at offset {at} " in took, said
    if rebuilt is not None:
        line = next(x for x in said if "rebuilt from" in x)
        assert f"rebuilt from {rebuilt} records" in line, line

"""The stream worker without a broker: its live path, its checkpoints and its takeovers, run
against the in-memory Kafka double (`MemoryConnection` for every consumer it makes,
`MemoryAppProducer` for Faust's producer). What tests/integration/test_worker.py checks
against a real broker with processes and kills, here in a second each: the order things
are published in, and that a takeover -- from a checkpoint, or from nothing -- loses and
repeats no transition."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from helpers import encode, make_event
from kafka_double import MemoryAppProducer, MemoryBroker, MemoryConnection

from runwatch.emitters.topics import Topics
from runwatch.stream.kafka import worker as worker_module
from runwatch.stream.kafka.checkpoints import PENDING, SETTLED
from runwatch.stream.kafka.consume import TP
from runwatch.stream.kafka.takeover import FEED_SLICE, Takeover
from runwatch.stream.kafka.worker import HANDOVER_S, StreamWorker, WorkerSettings
from runwatch.stream.live import LiveDriver

TOPICS = Topics("t.")
GROUP = "workers"
PARTITIONS = 2


def broker() -> MemoryBroker:
    b = MemoryBroker()
    b.create(TOPICS.events, PARTITIONS)
    for topic in (TOPICS.alerts, TOPICS.dlq, TOPICS.checkpoints, TOPICS.breaker):
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
    w = StreamWorker(settings, kafka=MemoryConnection(b), producer=MemoryAppProducer(b))

    async def ticking() -> None:
        while True:
            await w.tick(time.time())
            await asyncio.sleep(settings.tick_s / 10)

    tasks = [asyncio.create_task(w._consume()), asyncio.create_task(ticking())]
    try:
        await until(lambda: w.readiness()[0] and bool(w.drivers), "the worker is live")
        yield w
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not killed:
            await w.shutdown()
        w.cleanup()


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
    """(run, rule, state) of every transition on runwatch.alerts, in order."""
    out = [json.loads(v) for v in b.values(TOPICS.alerts)]
    return [(a["run"], a["rule"], a["state"]) for a in out]


def ids(b: MemoryBroker) -> list[str]:
    return [json.loads(v)["id"] for v in b.values(TOPICS.alerts)]


NAN = ("r1", "non_finite_metric", "firing")
FINE = ("r1", "non_finite_metric", "resolved")


def took_over(said: list[str], partition: int, rebuilt: int | None = 0, at: int = 2) -> None:
    """The worker that said `said` started `partition` from the checkpoint at offset `at`
    (what the first worker had read), and re-read `rebuilt` events (None: any number)."""
    (took,) = [x for x in said if x.startswith(f"partition {partition}: from")]
    assert f"from the checkpoint at offset {at} " in took, said
    if rebuilt is not None:
        line = next(x for x in said if "rebuilt from" in x)
        assert f"rebuilt from {rebuilt} events" in line, line


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_an_alert_is_published_before_its_breaker_view_and_its_checkpoint(fork: bool) -> None:
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said, fork) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            send(b, 0, b"not json")
            await until(lambda: b.values(TOPICS.dlq), "the bad record dead-lettered")
            flushed = w.producer.flushes  # type: ignore[attr-defined]
            assert await w.checkpoint(0, time.time())
            assert w.producer.flushes > flushed  # type: ignore[attr-defined]

    asyncio.run(scenario())
    order = [topic for topic, _, _ in b.appended if topic != TOPICS.events]
    assert order.index(TOPICS.alerts) < order.index(TOPICS.breaker), order
    assert order[-1] == TOPICS.checkpoints, order  # after everything it covers
    (letter,) = [json.loads(v) for v in b.values(TOPICS.dlq)]
    assert (letter["topic"], letter["partition"], letter["offset"]) == (TOPICS.events, 0, 2)
    assert letter["raw"] == "not json"


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_takeover_from_a_checkpoint_re_reads_the_rest_and_repeats_nothing(fork: bool) -> None:
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, fork, killed=True) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            assert await w.checkpoint(0, time.time())
            send(b, 0, step("r1", 3, 0.4))  # published, and not covered by the checkpoint
            await until(lambda: alerts(b) == [NAN, FINE], "the resolve")
        # killed between two checkpoints; meanwhile r1 goes NaN again
        send(b, 0, step("r1", 4, math.nan))
        async with worker(b, second):
            await until(lambda: len(alerts(b)) == 3, "the missing transition published")
            send(b, 0, step("r1", 5, 0.3))
            await until(lambda: len(alerts(b)) == 4, "live again")

    asyncio.run(scenario())
    assert alerts(b) == [NAN, FINE, NAN, FINE]
    assert len(set(ids(b))) == 4
    took_over(second, 0, rebuilt=2)  # offsets 2 and 3, not the whole partition
    rebuilt = next(line for line in second if "rebuilt from" in line)
    assert "1 missing alert transitions published" in rebuilt


def letters(b: MemoryBroker) -> list[int]:
    """The events offset of every dead letter, in order."""
    return [json.loads(v)["offset"] for v in b.values(TOPICS.dlq)]


def test_a_takeover_reads_the_output_topics_only_from_its_checkpoint_on() -> None:
    """A flood of invalid events dead-lettered before the checkpoint is not read again by
    every later takeover: the checkpoint says where runwatch.alerts and the dead-letter
    topic ended, and what came before is its state's. What came after is read, so nothing
    published is repeated and nothing missing is lost."""
    b, first, second = broker(), [], []
    flood = 30

    async def scenario() -> None:
        async with worker(b, first, killed=True) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan), *[b"not json"] * flood)
            await until(lambda: len(letters(b)) == flood and alerts(b) == [NAN], "the flood")
            assert await w.checkpoint(0, time.time())
            send(b, 0, step("r1", 3, 0.4), b"late")  # published, not in the checkpoint
            await until(lambda: len(alerts(b)) == 2 and len(letters(b)) == flood + 1, "more")
        send(b, 0, step("r1", 4, math.nan), b"unseen")  # after the kill: not published
        async with worker(b, second):
            await until(lambda: len(alerts(b)) == 3 and len(letters(b)) == flood + 2,
                        "the missing transition and letter published")  # fmt: skip

    asyncio.run(scenario())
    assert alerts(b) == [NAN, FINE, NAN]
    assert len(set(ids(b))) == 3
    assert letters(b) == [*range(2, flood + 2), flood + 3, flood + 5]
    took_over(second, 0, rebuilt=4, at=flood + 2)
    line = next(x for x in second if "rebuilt from" in x)
    assert "1 missing alert transitions published (2 alert and dead-letter records" in line


def test_a_partition_without_a_checkpoint_reads_the_output_topics_from_their_start() -> None:
    """Taken over together with one that has a checkpoint: what the other partition's runs
    published before that checkpoint is read all the same, and not published again."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, killed=True) as w:
            send(b, 1, step("r2", 1, 0.5), step("r2", 2, math.nan))
            await until(lambda: alerts(b) == [("r2", *NAN[1:])], "r2's NaN")
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: len(alerts(b)) == 2, "r1's NaN")
            assert await w.checkpoint(0, time.time())  # partition 1 has none
        async with worker(b, second):
            send(b, 1, step("r2", 3, 0.4))
            await until(lambda: len(alerts(b)) == 3, "live again")

    asyncio.run(scenario())
    assert alerts(b) == [("r2", *NAN[1:]), NAN, ("r2", *FINE[1:])]
    assert len(set(ids(b))) == 3
    assert any("partition 1: no checkpoint found" in line for line in second), second


def test_a_takeover_goes_on_past_records_retention_deleted_since_its_checkpoint() -> None:
    """Every record after the checkpoint was deleted (a partition quiet for longer than the
    retention): the live loop goes on from the partition's first offset left, so it counts
    as read to its end -- time moves on for its runs, and no lag shows."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, killed=True) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, 0.4))
            await until(lambda: w.drivers[0].position == 1, "read")
            assert await w.checkpoint(0, time.time())
            send(b, 0, step("r1", 3, 0.3), step("r1", 4, 0.2))
            await until(lambda: w.drivers[0].position == 3, "read on")
        b.delete_records(TP(TOPICS.events, 0), 4)
        async with worker(b, second) as w:
            driver = w.drivers[0]
            await until(lambda: w._horizon(0, driver, time.time())[1], "read to its end")
            assert w.loop is not None
            assert w.loop.read[TP(TOPICS.events, 0)] == 4

    asyncio.run(scenario())
    took_over(second, 0, rebuilt=0)


def test_a_takeover_without_a_checkpoint_rebuilds_all_and_repeats_nothing() -> None:
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, killed=True):
            send(b, 1, step("r1", 1, 0.5), step("r1", 2, math.nan), step("r1", 3, 0.4))
            await until(lambda: alerts(b) == [NAN, FINE], "the NaN and its resolve")
        async with worker(b, second):
            send(b, 1, step("r1", 4, math.nan))
            await until(lambda: len(alerts(b)) == 3, "live again")

    asyncio.run(scenario())
    assert alerts(b) == [NAN, FINE, NAN]
    assert len(set(ids(b))) == 3
    assert any("partition 1: no checkpoint found" in line for line in second), second
    rebuilt = next(line for line in second if "rebuilt from" in line)
    assert "0 missing alert transitions published" in rebuilt


def test_the_partitions_of_a_takeover_are_restored_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading one partition's checkpoint, or waiting for a promised one, does not hold up
    the others given in the same assignment: each restore here goes on only once every
    one has begun (one after another, the first would wait for ever)."""
    began: set[int] = set()
    everyone = asyncio.Event()
    restore = Takeover.restore

    async def together(self: Takeover, partition: int) -> Any:
        began.add(partition)
        if len(began) == PARTITIONS:
            everyone.set()
        await everyone.wait()
        return await restore(self, partition)

    monkeypatch.setattr(Takeover, "restore", together)
    said: list[str] = []

    async def scenario() -> None:
        async with worker(broker(), said) as w:
            assert sorted(w.drivers) == list(range(PARTITIONS))

    asyncio.run(scenario())
    assert began == set(range(PARTITIONS))


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_worker_that_stops_hands_its_partitions_over_checkpointed(fork: bool) -> None:
    """A rolling restart: no checkpoint was due (the interval is off here), yet the next
    worker starts from one that covers everything read, and re-reads nothing."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, fork):
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
        async with worker(b, second):
            send(b, 0, step("r1", 3, 0.4))
            await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert len(set(ids(b))) == 2
    took_over(second, 0)


def markers(b: MemoryBroker) -> list[tuple[int, bytes]]:
    """(events partition, word) of every handover marker on the checkpoints topic, and
    (partition, b"checkpoint") of every checkpoint, in order."""
    out = []
    for part in b.topics[TOPICS.checkpoints]:
        for r in part:
            p = int(r.key.rsplit(b"|", 1)[1])
            out.append((p, r.value if r.key.startswith(b"handover|") else b"checkpoint"))
    return out


def test_a_revoke_promises_a_handover_and_rejoins_without_a_checkpoint() -> None:
    """The group takes the partitions back (a worker joined or died): the worker promises
    a checkpoint of each with something new since its last one, and makes none yet; the
    assignment says it kept them, and it withdraws the promise."""
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            await w.revoked(set())
            assert markers(b) == [(0, PENDING)]  # partition 1 has nothing new
            await w.revoked(set())  # promised already
            assert markers(b) == [(0, PENDING)]
            w.assigned({TP(TOPICS.events, p) for p in range(PARTITIONS)})
            await until(lambda: markers(b) == [(0, PENDING), (0, SETTLED)], "settled")

    asyncio.run(scenario())


def test_a_partition_that_moves_is_handed_over_after_the_assignment() -> None:
    """A second worker joins: the first promised partition 1 on the revoke and, told at the
    assignment that it went to the newcomer, checkpoints it as it stood; the newcomer waits
    for that checkpoint and re-reads nothing."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first):
            send(b, 1, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            async with worker(b, second):
                send(b, 1, step("r1", 3, 0.4))
                await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert markers(b)[:2] == [(1, PENDING), (1, b"checkpoint")], markers(b)
    assert len(set(ids(b))) == 2
    took_over(second, 1)


def test_the_handovers_of_one_assignment_are_made_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every partition went elsewhere: each new owner waits for its own handover, so none
    waits for another's pickling -- each checkpoint here goes on only once every one has
    begun (one after another, the first would wait out the new owner's deadline)."""
    monkeypatch.setattr(worker_module, "HANDOVER_S", 3.0)
    b, said = broker(), []
    began: set[int] = set()

    async def scenario() -> None:
        everyone = asyncio.Event()
        async with worker(b, said) as w:
            for p in range(PARTITIONS):
                send(b, p, step(f"r{p}", 1, 0.5))
            await until(lambda: all(d.position is not None for d in w.drivers.values()),
                        "news in every partition")  # fmt: skip
            checkpoint = w._checkpoint

            async def together(partition: int, *args: Any) -> bool:
                began.add(partition)
                if len(began) == PARTITIONS:
                    everyone.set()
                await everyone.wait()
                return await checkpoint(partition, *args)

            monkeypatch.setattr(w, "_checkpoint", together)
            await w.revoked(set())
            w.assigned(set())  # all went elsewhere
            await until(lambda: not w._settling, "the handovers made")

    asyncio.run(scenario())
    stored = [p for p, word in markers(b) if word == b"checkpoint"]
    assert sorted(stored) == list(range(PARTITIONS)), markers(b)


def test_a_handover_its_new_owner_stopped_waiting_for_is_not_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new owner waits HANDOVER_S from the promise, then goes on from the checkpoint
    before and stores a newer one; an old owner too slow to checkpoint by then stores
    nothing, lest its older state replace that."""
    monkeypatch.setattr(worker_module, "HANDOVER_S", 0.2)
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            gate = asyncio.Event()  # never set: a pickling that takes for ever
            checkpoint = w._checkpoint

            async def slow(*args: Any) -> bool:
                await gate.wait()
                return await checkpoint(*args)

            monkeypatch.setattr(w, "_checkpoint", slow)
            await w.revoked(set())
            w.assigned(set())  # all went elsewhere
            await until(lambda: not w._settling, "the handover given up")

    asyncio.run(scenario())
    assert markers(b) == [(0, PENDING)], markers(b)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_partition_given_away_while_the_output_ends_are_asked_is_not_checkpointed(
    fork: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint asks the broker where the output topics end before it takes the state;
    a partition the group gave to another worker meanwhile is that worker's now, and a
    checkpoint of the state left behind would replace the newer ones it stores."""
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said, fork) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            ask = w._output_ends

            async def given_away_meanwhile() -> Any:
                ends = await ask()
                w.drivers.pop(0)
                return ends

            monkeypatch.setattr(w, "_output_ends", given_away_meanwhile)
            assert not await w.checkpoint(0, time.time())

    asyncio.run(scenario())
    assert markers(b) == [], markers(b)


def test_a_worker_stopping_before_its_assignment_keeps_its_promises() -> None:
    """Revoked, then stopped before the assignment came: the promised checkpoint is made
    on the way out, so that no successor waits on a promise left open."""
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            await w.revoked(set())
        async with worker(b, second):
            send(b, 0, step("r1", 3, 0.4))
            await until(lambda: alerts(b) == [NAN, FINE], "live again")

    asyncio.run(scenario())
    assert markers(b)[:2] == [(0, PENDING), (0, b"checkpoint")], markers(b)
    took_over(second, 0, rebuilt=None)
    assert not any("waited" in line for line in second), second


def test_the_live_consumer_waits_to_fill_fetches_and_for_a_handover() -> None:
    """The live consumer asks the broker to hold a fetch up to the worker's fetch wait (fewer,
    larger batches), and the group to wait for its handover on a revoke; the consumers of a
    rebuild read what is there at once."""
    b, said = broker(), []

    async def scenario() -> dict[str, Any]:
        async with worker(b, said) as w:
            assert isinstance(w.kafka, MemoryConnection)
            made = w.kafka.tuning
            return {"live": [t for t in made if "session_timeout_ms" in t],
                    "other": [t for t in made if "session_timeout_ms" not in t]}  # fmt: skip

    made = asyncio.run(scenario())
    (live,) = made["live"]
    assert live["fetch_max_wait_ms"] == 50, live
    assert live["fetch_min_bytes"] >= 1 << 20, live
    # a member handing over (HANDOVER_S at most) is not dropped from the next generation
    assert live["rebalance_timeout_ms"] >= (WorkerSettings.session_timeout + HANDOVER_S) * 1000
    assert made["other"], "the takeover made no consumer of its own"
    assert not any("fetch_max_wait_ms" in t or "fetch_min_bytes" in t for t in made["other"])


@pytest.mark.parametrize("when", ["re-read", "live"])
def test_a_driver_gives_the_loop_a_turn_between_slices(
    when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-read, and the live path, apply their fetches FEED_SLICE records at a time and
    let every other task of the loop (the group heartbeat, a takeover's reads) run in
    between."""
    b, said = broker(), []
    n = 3 * FEED_SLICE + 7  # one fetch of the double (the worker's batch_max is 5,000)
    records = [step("r1", i, 0.5) for i in range(1, n + 1)]
    if when == "re-read":
        send(b, 0, *records)
    turns = 0
    fed: list[tuple[int, int]] = []  # (records, turns of the other task so far)
    feed = LiveDriver.feed

    def noting(self: LiveDriver, records: Any) -> Any:
        records = list(records)
        if self.replaying == (when == "re-read"):
            fed.append((len(records), turns))
        return feed(self, records)

    monkeypatch.setattr(LiveDriver, "feed", noting)

    async def scenario() -> None:
        async def other() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        try:
            async with worker(b, said) as w:
                if when == "live":
                    fed.clear()
                    send(b, 0, *records)
                    await until(lambda: w.drivers[0].position == n - 1, "all applied")
        finally:
            task.cancel()

    asyncio.run(scenario())
    assert sum(count for count, _ in fed) == n
    assert max(count for count, _ in fed) <= FEED_SLICE
    assert all(later > earlier for (_, earlier), (_, later) in itertools.pairwise(fed))

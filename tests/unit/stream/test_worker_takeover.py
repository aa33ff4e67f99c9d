"""The stream worker without a broker: its live path and its takeovers, run against the
in-memory Kafka double (`worker_double`). What tests/integration/test_worker.py checks against
a real broker with processes and kills, here in a second each: that a takeover -- from a
checkpoint, or from nothing -- loses and repeats no transition, and that the live path and a
re-read give the rest of the loop its turns. Its checkpoints: test_kafka_checkpointing.py;
its handovers: test_handover.py."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from typing import Any

import pytest
from helpers import encode
from kafka_double import MemoryConnection
from worker_double import (
    FINE,
    NAN,
    PARTITIONS,
    TOPICS,
    alerts,
    broker,
    ids,
    letters,
    send,
    step,
    took_over,
    until,
    worker,
)

from runwatch.emitters.topics import BATCH_HEADER
from runwatch.stream.kafka.checkpoints import HANDOVER_S
from runwatch.stream.kafka.consume import TP
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.kafka.takeover import FEED_SLICE, Takeover
from runwatch.stream.live import LiveDriver


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_a_takeover_from_a_checkpoint_re_reads_the_rest_and_repeats_nothing(fork: bool) -> None:
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, fork, killed=True) as w:
            send(b, 0, step("r1", 1, 0.5), step("r1", 2, math.nan))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
            assert await w.checkpointing.checkpoint(0, time.time())
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
    # where the time from the assignment to live went, each step in order
    steps = rebuilt.rsplit("; ", 1)[1].split(", ")
    assert [s.rsplit(" ", 1)[0] for s in steps] == [
        "restore", "fence", "output read", "re-read", "finish", "publish"]  # fmt: skip
    restored = next(line for line in second if "from the checkpoint at offset" in line)
    assert "read in " in restored
    assert "loaded in " in restored


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
            assert await w.checkpointing.checkpoint(0, time.time())
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


def test_a_takeover_says_the_records_it_re_read_and_the_events_they_held() -> None:
    """A batch record (contract section 8) holds several events: the takeover's line counts
    records and the events applied apart (it once said "events" of its records)."""
    b, second = broker(), []
    lines = [encode(step("r1", n, 0.5)) for n in (1, 2, 3)]
    b.produce(TOPICS.events, b"\n".join(lines), 0, b"r1", [BATCH_HEADER])
    send(b, 0, step("r1", 4, 0.4))

    async def scenario() -> None:
        async with worker(b, second):
            await until(lambda: any("rebuilt from" in x for x in second), "live")

    asyncio.run(scenario())
    line = next(x for x in second if "rebuilt from" in x)
    assert "rebuilt from 2 records (4 events applied)" in line, line
    assert " records/s)" in line, line


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
            assert await w.checkpointing.checkpoint(0, time.time())  # partition 1 has none
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
            assert await w.checkpointing.checkpoint(0, time.time())
            send(b, 0, step("r1", 3, 0.3), step("r1", 4, 0.2))
            await until(lambda: w.drivers[0].position == 3, "read on")
        b.delete_records(TP(TOPICS.events, 0), 4)
        async with worker(b, second) as w:
            driver = w.drivers[0]
            await until(lambda: w.horizon.of(0, driver, time.time())[1], "read to its end")
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
    assert live["fetch_max_wait_ms"] == 100, live
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
    feed = LiveDriver.feed_records

    def noting(self: LiveDriver, records: Any) -> Any:
        records = list(records)
        if self.replaying == (when == "re-read"):
            fed.append((len(records), turns))
        return feed(self, records)

    monkeypatch.setattr(LiveDriver, "feed_records", noting)

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


def test_a_fenced_partition_still_its_own_is_taken_over_again_but_not_once_stopping() -> None:
    """Another producer of partition 0's transactional id fences the worker's (as a worker
    that took the partition over would): its next transaction is refused, it stops judging
    the partition, and -- the group still giving it the partition (a commit with its
    generation goes through) -- takes it over again, fencing the other, and publishes what
    the fenced transaction held once. A worker that is stopping takes nothing over."""
    from kafka_double import MemoryTxnProducer
    from worker_double import GROUP

    from runwatch.stream.kafka.publish import transactional_id

    async def go() -> None:
        b = broker()
        said: list[str] = []
        async with worker(b, said) as w:
            other = MemoryTxnProducer(b, transactional_id(GROUP, TOPICS.events, 0))
            await other.start()
            send(b, 0, step("r1", 1, math.nan))
            await until(lambda: any("taking it over again" in x for x in said), "taken again")
            await until(lambda: alerts(b) == [NAN], "the firing published")
            assert not other.usable  # fenced in turn
            assert 0 in w.drivers
            # stopping: a partition lost now stays lost
            await w.ownership.cancel()
            w.ownership.lost(0)
            await w.ownership.look_into_lost()
            assert 0 not in w.drivers
            assert 0 not in w.rebuilding
        assert alerts(b) == [NAN]

    asyncio.run(go())

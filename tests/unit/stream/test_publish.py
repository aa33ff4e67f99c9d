"""What the worker publishes, in which order, and through what (`stream/kafka/publish.py`):
one publisher per input partition, each with a transactional producer of its own -- its
transitions before its dead letters before its run views, in a transaction committed at
the turn, a checkpoint in one of its own after it; a publisher whose partition another
worker took over is fenced by the broker and publishes nothing more; a transaction that
fails short of fencing is sent again, once."""

from __future__ import annotations

import asyncio
import json
import math
import time

import orjson
import pytest
from helpers import make_event
from kafka_double import MemoryBroker, MemoryConnection

from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.kafka.publish import Lost, Publisher, transactional_id
from runwatch.stream.live import LiveDriver
from runwatch.stream.refused import Refused

TOPICS = Topics("t.")
GROUP = "workers"


def broker() -> MemoryBroker:
    b = MemoryBroker()
    for topic in (TOPICS.alerts, TOPICS.dlq, TOPICS.checkpoints, TOPICS.breaker):
        b.create(topic, 2)
    return b


def publisher(b: MemoryBroker, lost: list[int] | None = None) -> Publisher:
    """A worker's publisher on `b`, noting the partitions it loses in `lost`."""
    return publishing(MemoryConnection(b), lost)


def publishing(kafka: MemoryConnection, lost: list[int] | None = None) -> Publisher:
    return Publisher(kafka.producer, TOPICS, GROUP, "w/1",
                     lost=(lost if lost is not None else []).append)  # fmt: skip


def made(run: str) -> tuple[list[Alert], list[RunView]]:
    """A NaN step's firing transition and the run view it changed, as a driver makes
    them."""
    driver = LiveDriver(topic=TOPICS.events)
    driver.engine.views_changed = set()
    now = time.time()
    step = make_event("step.metrics", now - 1, run=run, step=1, metrics={"loss": math.nan})
    alerts, _ = driver.feed([(json.dumps(step).encode(), now, 0)])
    assert alerts
    return alerts, driver.engine.take_run_views()


LETTER = Refused("not json", b"x", TOPICS.events, 0, 7)


def published(b: MemoryBroker) -> list[str]:
    """The topic of every record appended, in order (the topic's name without the prefix)."""
    return [topic.removeprefix(TOPICS.prefix) for topic, _, _ in b.appended]


def committed_ids(b: MemoryBroker) -> list[str]:
    """The transition ids a read_committed consumer reads on runwatch.alerts."""
    return [orjson.loads(r.value or b"")["id"] for r in b.visible(TOPICS.alerts)]


def test_transitions_then_dead_letters_then_run_views_then_the_checkpoint() -> None:
    b = broker()
    out = publisher(b)
    alerts, views = made("r1")

    async def scenario() -> None:
        await out.open(0)
        await out.of(0).publish(alerts, [LETTER], views)
        assert committed_ids(b) == []  # in a transaction: no one reads it yet
        await out.of(0).checkpoint(b"key", b"state", 1)  # commits what is open first

    asyncio.run(scenario())
    assert published(b) == ["runwatch.alerts", "runwatch.events.dlq", "runwatch.breaker",
                            "runwatch.checkpoints"]  # fmt: skip
    assert committed_ids(b) == [alerts[0].id]
    (record,) = b.visible(TOPICS.checkpoints)
    assert (record.partition, record.key, record.value) == (1, b"key", b"state")
    (transition,) = b.visible(TOPICS.alerts)
    assert record.txn is not transition.txn  # a transaction of its own, after


def test_what_a_turn_publishes_goes_out_in_one_transaction() -> None:
    b = broker()
    out = publisher(b)
    first, _ = made("r1")
    second, _ = made("r2")

    async def scenario() -> None:
        await out.open(0)
        await out.of(0).publish(first, [])
        await out.of(0).publish(second, [])
        assert committed_ids(b) == []
        await out.commit()

    asyncio.run(scenario())
    assert committed_ids(b) == [first[0].id, second[0].id]
    one, two = b.visible(TOPICS.alerts)
    assert one.txn is two.txn


def test_a_publisher_whose_partition_another_worker_took_over_publishes_nothing_more() -> None:
    """The new owner's producer of the same transactional id fences the old one at the
    broker: the transaction the old one had open ends aborted (read by no one), and every
    later send, commit and checkpoint of it is refused -- however long it was paused."""
    b = broker()
    lost: list[int] = []
    old, new = publisher(b, lost), publisher(b)
    first, _ = made("r1")
    later, _ = made("r2")
    owners, _ = made("r3")

    async def scenario() -> None:
        await old.open(0)
        await old.of(0).publish(first, [])  # open when the new owner takes over
        await new.open(0)
        await new.of(0).publish(owners, [])
        await new.commit()
        await old.commit()  # refused: lost
        await old.of(0).publish(later, [])  # nothing more
        await old.commit()
        with pytest.raises(Lost):
            await old.of(0).checkpoint(b"key", b"stale", 0)

    asyncio.run(scenario())
    assert committed_ids(b) == [owners[0].id]
    assert lost == [0]  # said once
    assert not old.of(0).live
    assert b.visible(TOPICS.checkpoints) == []
    assert b.epochs[transactional_id(GROUP, TOPICS.events, 0)] == 2


def test_a_transaction_that_fails_short_of_fencing_is_sent_again_once() -> None:
    """The broker away at the commit: the transaction is aborted and what it held sent
    again in the next, committed once it can be -- each transition read once."""
    b, lost = broker(), []
    kafka = MemoryConnection(b)
    out = publishing(kafka, lost)
    alerts, views = made("r1")

    async def scenario() -> None:
        await out.open(0)
        await out.of(0).publish(alerts, [LETTER], views)
        (producer,) = kafka.producers
        producer.fail_commits = 2
        assert await out.of(0).commit()
        assert producer.commits == 1

    asyncio.run(scenario())
    assert committed_ids(b) == [alerts[0].id]
    assert len(b.visible(TOPICS.dlq)) == len(b.visible(TOPICS.breaker)) == 1
    assert len([r for r in b.topics[TOPICS.alerts][0] + b.topics[TOPICS.alerts][1]
                if not r.control]) == 3  # fmt: skip
    assert lost == []


def test_the_publishers_of_partitions_gone_elsewhere_are_closed_after_their_handover() -> None:
    kafka = MemoryConnection(broker())
    out = publishing(kafka)

    async def scenario() -> list[bool]:
        for p in (0, 1, 2):
            await out.open(p)
        out.keep({0}, handing={1})  # 1 and 2 went elsewhere; 1's handover still to write
        await asyncio.sleep(0)
        running = [p.epoch is not None for p in kafka.producers]
        out.handed(1)
        await out.close()
        return running

    assert asyncio.run(scenario()) == [True, True, False]
    assert [p.epoch for p in kafka.producers] == [None, None, None]  # all stopped


def test_a_handover_under_way_outlives_the_next_assignment() -> None:
    """Two rebalances in a row (a kill, then the group settling): the second assignment
    names no new handover, yet the first one's publisher stays until its checkpoint is out
    -- closed at once, the checkpoint was refused and the new owner waited 10 s for it."""
    kafka = MemoryConnection(broker())
    out = publishing(kafka)

    async def scenario() -> list[bool]:
        for p in (0, 1):
            await out.open(p)
        out.keep({0}, handing={1})  # 1 went elsewhere; its handover still to write
        out.keep({0})  # the next assignment, before it is written
        await asyncio.sleep(0)
        await out.of(1).checkpoint(b"k", b"state", 1)  # the handover goes out still
        running = [p.epoch is not None for p in kafka.producers]
        out.handed(1)
        await out.close()
        return running

    assert asyncio.run(scenario()) == [True, True]
    assert [p.epoch for p in kafka.producers] == [None, None]  # all stopped after

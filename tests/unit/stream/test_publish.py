"""What the worker publishes, in which order, and through what (`stream/kafka/publish.py`):
one publisher per input partition, its transitions before its dead letters before its
run views, a checkpoint only after a flush, and nothing while the group lease has
lapsed -- held, then sent if the partition is still this worker's, else dropped."""

from __future__ import annotations

import asyncio
import json
import math
import time

import orjson
from helpers import make_event
from kafka_double import MemoryAppProducer, MemoryBroker

from runwatch.emitters.runview import RunView
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.kafka.publish import Publisher
from runwatch.stream.live import LiveDriver
from runwatch.stream.refused import Refused

TOPICS = Topics("t.")


def broker() -> MemoryBroker:
    b = MemoryBroker()
    for topic in (TOPICS.alerts, TOPICS.dlq, TOPICS.checkpoints, TOPICS.breaker):
        b.create(topic, 2)
    return b


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


def test_transitions_then_dead_letters_then_run_views_then_the_checkpoint() -> None:
    b = broker()
    producer = MemoryAppProducer(b)
    publisher = Publisher(lambda: producer, TOPICS, "w/1")
    alerts, views = made("r1")

    async def scenario() -> None:
        out = publisher.of(0)
        await out.publish(alerts, [LETTER], views)
        flushed = producer.flushes
        await out.checkpoint(b"key", b"state", 1)
        assert producer.flushes == flushed + 1  # after everything before it is out

    asyncio.run(scenario())
    assert published(b) == ["runwatch.alerts", "runwatch.events.dlq", "runwatch.breaker",
                            "runwatch.checkpoints"]  # fmt: skip
    (alert,) = b.topics[TOPICS.alerts][0] + b.topics[TOPICS.alerts][1]
    assert orjson.loads(alert.value)["id"] == alerts[0].id
    ((record,),) = [p for p in b.topics[TOPICS.checkpoints] if p]
    assert (record.partition, record.key, record.value) == (1, b"key", b"state")


def test_output_made_while_the_lease_lapsed_is_held_and_sent_once_it_is_renewed() -> None:
    b = broker()
    producer = MemoryAppProducer(b)
    leased = [False]
    publisher = Publisher(lambda: producer, TOPICS, "w/1", leased=lambda: leased[0])
    first, _ = made("r1")
    second, _ = made("r2")

    async def scenario() -> None:
        out = publisher.of(0)
        await out.publish(first, [])
        assert b.appended == []
        assert publisher.holds(0)
        assert [o.partition for o in publisher.holding()] == [0]
        await out.release(mine=True)  # not while the lease has lapsed
        assert b.appended == []
        leased[0] = True
        await out.publish(second, [])  # after what is held, not before it
        assert b.appended == []
        await out.release(mine=True)

    asyncio.run(scenario())
    sent = [(p, o) for topic, p, o in b.appended if topic == TOPICS.alerts]  # in send order
    ids = [orjson.loads(b.topics[TOPICS.alerts][p][o].value)["id"] for p, o in sent]
    assert ids == [first[0].id, second[0].id]
    assert not publisher.holds(0)


def test_output_held_for_a_partition_that_went_elsewhere_is_dropped() -> None:
    b = broker()
    producer = MemoryAppProducer(b)
    leased = [False]
    publisher = Publisher(lambda: producer, TOPICS, "w/1", leased=lambda: leased[0])
    alerts, _ = made("r1")

    async def scenario() -> None:
        await publisher.of(0).publish(alerts, [])
        await publisher.of(1).publish(alerts, [])
        publisher.keep({1})  # the assignment: partition 0 went elsewhere
        assert not publisher.holds(0)
        leased[0] = True
        await publisher.of(1).release(mine=False)  # given away while it was held

    asyncio.run(scenario())
    assert b.appended == []

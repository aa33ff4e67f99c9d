"""The one consuming loop, against the in-memory Kafka double: every record handed on once and in
order, a failing record isolated and dead-lettered while the rest go on, positions kept across
rebalances, reading up to the end, commits, backoff, lag and a clean stop."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from kafka_double import MemoryBroker, MemoryConsumer

from runwatch.stream.kafka.consume import TP, ConsumingLoop, Group, Handler, Partitions, Until
from runwatch.stream.kafka.health import ConsumerHealth


class Recorder(Handler):
    """Keeps what it is handed; fails on values in `poison`; stops the loop after `want`."""

    def __init__(self, want: int | None = None, poison: frozenset[bytes] = frozenset()) -> None:
        self.want = want
        self.poison = poison
        self.seen: list[tuple[str, int, int, bytes | None]] = []
        self.dead_letters: list[tuple[int, str]] = []
        self.batches: list[int] = []
        self.assignments: list[set[TP]] = []
        self.revocations: list[set[TP]] = []
        self.positions: dict[TP, int] = {}
        self.turns = 0

    async def handle(self, records: list[Any]) -> None:
        self.batches.append(len(records))
        for r in records:
            if r.value in self.poison:
                raise ValueError(f"cannot handle {r.value!r}")
        self.seen += [(r.topic, r.partition, r.offset, r.value) for r in records]

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        self.assignments.append(set(partitions))
        return {tp: o for tp, o in self.positions.items() if tp in partitions}

    async def revoked(self, partitions: set[TP]) -> None:
        self.revocations.append(set(partitions))

    async def turn(self) -> None:
        self.turns += 1

    def dead(self, record: Any, reason: str) -> None:
        self.dead_letters.append((record.offset, reason))

    def done(self) -> bool:
        return self.want is not None and len(self.seen) >= self.want


def run(loop: ConsumingLoop, timeout: float = 10.0) -> None:
    asyncio.run(asyncio.wait_for(loop.run(), timeout))


def fill(broker: MemoryBroker, topic: str, partitions: int, per_partition: int) -> None:
    broker.create(topic, partitions)
    for p in range(partitions):
        for i in range(per_partition):
            broker.produce(topic, f"{p}:{i}".encode(), partition=p)


def test_a_group_consumer_hands_on_every_record_once_in_order() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 3, 50)
    consumer = MemoryConsumer(broker, group_id="g")
    handler = Recorder(want=150)
    loop = ConsumingLoop(consumer, Group(("events",)), handler, stop=handler.done, max_records=7)
    run(loop)
    assert len(handler.seen) == 150
    for p in range(3):
        offsets = [o for _, part, o, _ in handler.seen if part == p]
        assert offsets == list(range(50))
    assert max(handler.batches) <= 7
    assert consumer.stopped, "the loop stops its consumer"
    assert handler.assignments == [{TP("events", 0), TP("events", 1), TP("events", 2)}]


def test_a_record_that_fails_is_dead_lettered_and_the_rest_go_on() -> None:
    broker = MemoryBroker()
    for i in range(20):
        broker.produce("events", b"poison" if i == 7 else f"ok{i}".encode())
    handler = Recorder(want=19, poison=frozenset({b"poison"}))
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=handler.done)  # fmt: skip
    run(loop)
    assert [o for *_, o, _ in [(t, p, o, v) for t, p, o, v in handler.seen]] == [
        i for i in range(20) if i != 7
    ]
    assert handler.dead_letters == [(7, "ValueError: cannot handle b'poison'")]
    assert loop.isolated == 1
    assert loop.read[TP("events", 0)] == 20


def test_a_dead_letter_that_fails_too_does_not_stop_the_loop() -> None:
    broker = MemoryBroker()
    for value in (b"a", b"poison", b"b"):
        broker.produce("events", value)

    class Clumsy(Recorder):
        def dead(self, record: Any, reason: str) -> None:
            raise OSError("dead-letter place is gone")

    handler = Clumsy(want=2, poison=frozenset({b"poison"}))
    run(ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                      stop=handler.done))  # fmt: skip
    assert [v for *_, v in handler.seen] == [b"a", b"b"]


def test_positions_the_handler_keeps_are_sought_on_assignment() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 2, 10)
    handler = Recorder(want=10 - 4 + 10)
    handler.positions = {TP("events", 0): 4}
    run(ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                      stop=handler.done))  # fmt: skip
    assert [o for _, p, o, _ in handler.seen if p == 0] == list(range(4, 10))
    assert [o for _, p, o, _ in handler.seen if p == 1] == list(range(10))


def test_a_rebalance_revokes_then_assigns_and_keeps_read_positions() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 2, 5)
    first = MemoryConsumer(broker, "g")
    handler = Recorder()
    loop = ConsumingLoop(first, Group(("events",)), handler, stop=lambda: len(handler.seen) >= 20)

    async def scenario() -> None:
        task = asyncio.ensure_future(loop.run())
        while len(handler.seen) < 10:
            await asyncio.sleep(0.001)
        broker.rebalance("g")  # e.g. a member came and went: same partitions again
        for p in range(2):
            for i in range(5):
                broker.produce("events", f"late{p}:{i}".encode(), partition=p)
        await asyncio.wait_for(task, 10)

    asyncio.run(scenario())
    assert len(handler.revocations) == 1
    assert len(handler.assignments) == 2
    assert len(handler.seen) == 20, "nothing read twice after the rebalance"
    assert len({(p, o) for _, p, o, _ in handler.seen}) == 20


def test_a_groupless_consumer_that_reassigns_by_itself_hands_nothing_on_twice() -> None:
    broker = MemoryBroker()
    fill(broker, "alerts", 1, 5)
    consumer = MemoryConsumer(broker)  # no group: assigns itself every partition
    handler = Recorder()
    loop = ConsumingLoop(consumer, Group(("alerts",)), handler, stop=lambda: len(handler.seen) >= 8)

    async def scenario() -> None:
        task = asyncio.ensure_future(loop.run())
        while len(handler.seen) < 5:
            await asyncio.sleep(0.001)
        broker.create("alerts", 2)  # the topic grows; the consumer starts every partition over
        broker.produce("alerts", b"x", partition=1)
        broker.produce("alerts", b"y", partition=0)
        broker.produce("alerts", b"z", partition=0)
        consumer.pending_rebalance = True
        await asyncio.wait_for(task, 10)

    asyncio.run(scenario())
    assert sorted((p, o) for _, p, o, _ in handler.seen) == [(0, i) for i in range(7)] + [(1, 0)]


def test_until_end_reads_what_was_there_and_stops() -> None:
    broker = MemoryBroker()
    fill(broker, "alerts", 2, 3)

    class ProducesMore(Recorder):
        async def handle(self, records: list[Any]) -> None:
            await super().handle(records)
            broker.produce("alerts", b"later", partition=records[0].partition)

    handler = ProducesMore()
    consumer = MemoryConsumer(broker)
    parts = Partitions("alerts")
    run(ConsumingLoop(consumer, parts, handler, until="end", max_records=2))
    assert sorted((p, o) for _, p, o, _ in handler.seen) == [
        (p, o) for p in (0, 1) for o in range(3)
    ]
    assert consumer.stopped


def test_until_caught_up_also_reads_what_arrived_meanwhile() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 1, 3)
    produced = []

    class ProducesTwice(Recorder):
        async def handle(self, records: list[Any]) -> None:
            await super().handle(records)
            if len(produced) < 2:
                produced.append(broker.produce("events", b"meanwhile"))

    handler = ProducesTwice()
    run(ConsumingLoop(MemoryConsumer(broker), Partitions("events", (0,)), handler,
                      until="caught_up"))  # fmt: skip
    assert [o for *_, o, _ in handler.seen] == list(range(5))


def test_a_rebuild_from_a_checkpoint_reads_only_the_tail() -> None:
    """`Partitions(start=...)`: from the offset a checkpoint covers, up to the end; a
    partition read up to its end already finishes at once."""
    broker = MemoryBroker()
    fill(broker, "events", 2, 6)
    handler = Recorder()
    source = Partitions("events", (0, 1), start={0: 4, 1: 6})
    consumer = MemoryConsumer(broker)
    run(ConsumingLoop(consumer, source, handler, until="caught_up"))
    assert [(p, o) for _, p, o, _ in handler.seen] == [(0, 4), (0, 5)]
    # held paused until sought: aiokafka fetched nothing before the start to throw away
    assert consumer.fetched_ahead
    assert all(offset >= {0: 4, 1: 6}[tp.partition] for tp, offset in consumer.fetched_ahead)


def test_reading_a_topic_that_does_not_exist_returns_at_once() -> None:
    handler = Recorder()
    run(ConsumingLoop(MemoryConsumer(MemoryBroker()), Partitions("missing"), handler,
                      until="end"))  # fmt: skip
    assert handler.seen == []


@pytest.mark.parametrize("until", ["end", "caught_up"])
def test_until_end_of_nothing_returns_without_a_poll(until: Until) -> None:
    """Nothing to read (an empty partition, or a start at its end): no fetch is waited out,
    which on a real broker holds a takeover half a second per topic read."""
    broker = MemoryBroker()
    fill(broker, "topic", 2, 0)
    broker.produce("topic", b"read already", partition=1)
    handler, consumer = Recorder(), MemoryConsumer(broker)
    run(ConsumingLoop(consumer, Partitions("topic", start={1: 1}), handler, until=until))
    assert handler.seen == []
    assert consumer.polls == 0


def test_a_start_past_a_partition_s_end_reads_it_from_its_start() -> None:
    """An offset past the end is of a topic by that name that was deleted and made anew
    (runwatch.alerts, say, since a checkpoint noted where it ended): all of it is new."""
    broker = MemoryBroker()
    fill(broker, "alerts", 2, 3)
    handler = Recorder()
    source = Partitions("alerts", start={0: 7, 1: 2})
    run(ConsumingLoop(MemoryConsumer(broker), source, handler, until="end"))
    assert sorted((p, o) for _, p, o, _ in handler.seen) == [(0, 0), (0, 1), (0, 2), (1, 2)]


def test_a_partition_whose_records_all_expired_is_read_to_its_end() -> None:
    """Retention deleted every record of a partition (one the DLQ has not written to for a
    week): it begins at its end, and a read to the end finishes instead of waiting for
    records before its beginning that will never come. A start before the beginning (a
    checkpoint older than the retention) starts at the beginning."""
    broker = MemoryBroker()
    fill(broker, "dlq", 2, 4)
    broker.delete_records(TP("dlq", 0), 4)
    broker.delete_records(TP("dlq", 1), 2)
    handler = Recorder()
    source = Partitions("dlq", start={0: 1, 1: 1})
    run(ConsumingLoop(MemoryConsumer(broker), source, handler, until="end"))
    assert [(p, o) for _, p, o, _ in handler.seen] == [(1, 2), (1, 3)]


def transactional(broker: MemoryBroker, topic: str, partitions: int, per_partition: int) -> None:
    """`fill`, each partition's records written in one transaction: a commit marker after
    them takes the partition's last offset."""
    fill(broker, topic, partitions, per_partition)
    for p in range(partitions):
        broker.commit_marker(topic, p)


@pytest.mark.parametrize("until", ["end", "caught_up"])
def test_a_read_to_the_end_passes_a_transaction_s_commit_marker(until: Until) -> None:
    """Events an exactly-once pipeline wrote: the partition's last offset is a marker no
    consumer gets; the read finishes once its position has passed it."""
    broker = MemoryBroker()
    transactional(broker, "events", 2, 3)
    handler = Recorder()
    run(ConsumingLoop(MemoryConsumer(broker), Partitions("events"), handler, until=until))
    assert sorted((p, o) for _, p, o, _ in handler.seen) == [
        (p, o) for p in (0, 1) for o in range(3)
    ]


def test_a_live_partition_ending_in_a_commit_marker_counts_as_read_to_its_end() -> None:
    """The group's loop: what it read up to follows the position past the marker, so
    nothing shows as behind (and a worker judges the partition's silence)."""
    broker = MemoryBroker()
    transactional(broker, "events", 1, 3)
    handler = Recorder()
    tp = TP("events", 0)
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=lambda: loop.read.get(tp) == 4)  # fmt: skip
    run(loop)
    assert [o for *_, o, _ in handler.seen] == [0, 1, 2]


def test_a_read_to_the_end_is_not_moved_past_its_end() -> None:
    """Records appended after the end was taken are fetched but not handed on: what the
    read returns as read up to stays at the end, whatever the consumer's position."""
    broker = MemoryBroker()
    fill(broker, "events", 2, 3)

    class ProducesMore(Recorder):
        async def handle(self, records: list[Any]) -> None:
            await super().handle(records)
            if records[0].partition == 0:
                broker.produce("events", b"later", partition=0)
                broker.commit_marker("events", 0)

    loop = ConsumingLoop(MemoryConsumer(broker), Partitions("events"), ProducesMore(),
                         until="end", max_records=1)  # fmt: skip
    run(loop)
    assert loop.read == {TP("events", 0): 3, TP("events", 1): 3}


def test_commits_after_each_batch_so_the_group_goes_on_where_it_was() -> None:
    broker = MemoryBroker()
    fill(broker, "alerts", 1, 10)
    first = Recorder(want=10)
    c1 = MemoryConsumer(broker, "notify")
    run(ConsumingLoop(c1, Group(("alerts",)), first, stop=first.done, commit=True))
    assert c1.commits >= 1
    broker.produce("alerts", b"new")
    second = Recorder(want=1)
    run(ConsumingLoop(MemoryConsumer(broker, "notify"), Group(("alerts",)), second,
                      stop=second.done, commit=True))  # fmt: skip
    assert [v for *_, v in second.seen] == [b"new"]


def test_a_failing_fetch_backs_off_and_goes_on() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 1, 3)
    broker.fail_next_fetch = ConnectionError("broker went away")
    handler = Recorder(want=3)
    health = ConsumerHealth(lambda: {}, stall=30.0, behind_ok=0)
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=handler.done, health=health)  # fmt: skip
    run(loop)
    assert loop.client_errors == 1
    assert len(handler.seen) == 3
    assert health.live()[0]


def test_a_broker_gone_as_the_role_starts_is_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    """The command's probe found Kafka; the broker went down before the consumer started:
    the loop tries again until it answers, says so once, and then reads as usual."""
    broker = MemoryBroker()
    fill(broker, "events", 1, 3)
    broker.fail_starts = 3
    handler = Recorder(want=3)
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=handler.done, max_backoff=0.01)  # fmt: skip
    with caplog.at_level("WARNING"):
        run(loop)
    assert len(handler.seen) == 3
    assert loop.client_errors == 3
    assert sum("cannot reach Kafka" in r.getMessage() for r in caplog.records) == 1


def test_a_role_stopped_while_the_broker_is_away_stops() -> None:
    broker = MemoryBroker()
    broker.fail_starts = 1_000_000
    consumer = MemoryConsumer(broker, "g")
    stops = iter([False, False, True])
    loop = ConsumingLoop(consumer, Group(("events",)), Recorder(),
                         stop=lambda: next(stops, True), max_backoff=0.01)  # fmt: skip
    run(loop)
    assert consumer.stopped
    assert not consumer.started


def test_lag_is_the_records_between_what_was_handed_on_and_the_end() -> None:
    broker = MemoryBroker()
    fill(broker, "events", 2, 4)
    lags: list[Any] = []

    class Holds(Recorder):
        """Waits inside its second batch until the test has read the lag."""

        async def handle(self, records: list[Any]) -> None:
            if self.seen:
                self.waiting = True
                while not lags:
                    await asyncio.sleep(0.001)
            await super().handle(records)

    handler = Holds()
    handler.waiting = False
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=lambda: bool(lags), max_records=3)  # fmt: skip

    async def scenario() -> None:
        assert loop.lag() is None  # not running yet
        task = asyncio.ensure_future(loop.run())
        while not handler.waiting:
            await asyncio.sleep(0.001)
        lags.append(loop.lag())
        await asyncio.wait_for(task, 10)

    asyncio.run(scenario())
    assert lags[0] == {("events", 0): 1, ("events", 1): 4}


def test_the_handler_turns_after_every_poll_also_an_empty_one() -> None:
    broker = MemoryBroker()
    broker.create("events")
    handler = Recorder()
    loop = ConsumingLoop(MemoryConsumer(broker, "g"), Group(("events",)), handler,
                         stop=lambda: handler.turns >= 3)  # fmt: skip
    run(loop)
    assert handler.turns == 3
    assert handler.seen == []


def test_cancelling_the_loop_stops_the_consumer() -> None:
    broker = MemoryBroker()
    broker.create("events")
    consumer = MemoryConsumer(broker, "g")
    loop = ConsumingLoop(consumer, Group(("events",)), Recorder())

    async def scenario() -> None:
        task = asyncio.ensure_future(loop.run())
        while consumer.polls < 2:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert consumer.stopped
    assert not loop.running


def test_a_cancel_that_meets_a_finishing_poll_still_stops_the_loop() -> None:
    """3.11's `asyncio.wait_for` drops a cancellation that arrives as the awaited poll
    finishes; a loop that polled through it would keep its role from stopping. Cancelled at
    every moment of a busy loop, each stops."""

    async def scenario(when: int) -> bool:
        broker = MemoryBroker()
        fill(broker, "events", 1, 1_000)
        consumer = MemoryConsumer(broker, "g")
        loop = ConsumingLoop(consumer, Group(("events",)), Recorder(), max_records=1)
        task = asyncio.ensure_future(loop.run())
        for _ in range(when):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5)
        if not done:  # (stop it some other way, so the test ends)
            loop.stop = lambda: True
            await asyncio.wait([task], timeout=5)
        return bool(done)

    stopped = [asyncio.run(scenario(when)) for when in range(40)]
    assert all(stopped), [i for i, ok in enumerate(stopped) if not ok]

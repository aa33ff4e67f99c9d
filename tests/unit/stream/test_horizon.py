"""How far wall-clock time goes for a live partition's silence rules (`stream/kafka/horizon.py`):
only as far as the worker has read -- a fetch that answered with the partition's end, all of
it handed on -- and a partition is judged at all only while the lease is held, it is
assigned and a fetch of it answered lately."""

from __future__ import annotations

from runwatch.stream.kafka.consume import TP
from runwatch.stream.kafka.horizon import Horizon
from runwatch.stream.kafka.lease import GroupLease
from runwatch.stream.live import LiveDriver

TOPIC = "t.runwatch.events"


class Loop:
    """The consuming loop as the horizon asks it: assignment and the last fetch."""

    def __init__(self) -> None:
        self.assigned = {TP(TOPIC, 0)}
        #: per partition: (when the last fetch answered, all of it handed on)
        self.answers: dict[TP, tuple[float | None, bool]] = {}

    def holds(self, tp: TP) -> bool:
        return tp in self.assigned

    def fetched(self, tp: TP) -> tuple[float | None, bool] | None:
        return self.answers.get(tp, (None, False)) if tp in self.assigned else None


class Held(GroupLease):
    def __init__(self) -> None:
        super().__init__(10.0)
        self.on = True

    def held(self) -> bool:
        return self.on


def driver(arrival: float) -> LiveDriver:
    d = LiveDriver(topic=TOPIC, grace=0.5)
    d.arrival = arrival
    return d


def test_time_goes_to_the_last_fetch_once_all_of_it_is_read() -> None:
    loop = Loop()
    horizon = Horizon(lambda: loop, Held(), TOPIC, 10.0)
    d = driver(arrival=100.0)
    loop.answers[TP(TOPIC, 0)] = (150.0, True)
    assert horizon.of(0, d, now=151.0) == (150.0, True)
    loop.answers[TP(TOPIC, 0)] = (152.0, False)  # records left to hand on
    assert horizon.of(0, d, now=153.0) == (100.5, False)  # the last record's time + grace


def test_without_a_loop_or_an_answer_time_holds_at_what_was_read() -> None:
    d = driver(arrival=100.0)
    assert Horizon(lambda: None, Held(), TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)
    loop = Loop()
    assert Horizon(lambda: loop, Held(), TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)
    loop.assigned = set()  # not assigned any more
    assert Horizon(lambda: loop, Held(), TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)


def test_after_a_gap_in_the_answers_time_holds_a_while_longer() -> None:
    """Fetches answered, then none for 20 s (a broker away, this process paused): once they
    answer again, time does not leap to the fetch -- emitters are still delivering what
    they spooled meanwhile (`ReadClock`)."""
    loop = Loop()
    horizon = Horizon(lambda: loop, Held(), TOPIC, 10.0)
    d = driver(arrival=100.0)
    tp = TP(TOPIC, 0)
    for t in (100.0, 100.5, 101.0):
        loop.answers[tp] = (t, True)
        assert horizon.of(0, d, now=t)[0] == t
    loop.answers[tp] = (121.0, True)
    time, caught_up = horizon.of(0, d, now=121.0)
    assert caught_up
    assert time < 121.0


def test_a_partition_is_judged_only_while_leased_assigned_and_fetched_lately() -> None:
    loop, lease = Loop(), Held()
    horizon = Horizon(lambda: loop, lease, TOPIC, 10.0)
    tp = TP(TOPIC, 0)
    assert not horizon.owns(0, now=100.0)  # no fetch answered yet
    loop.answers[tp] = (95.0, True)
    assert horizon.owns(0, now=100.0)
    assert not horizon.owns(0, now=105.0)  # the last answer is a session timeout old
    lease.on = False
    assert not horizon.owns(0, now=100.0)
    lease.on = True
    loop.assigned = set()
    assert not horizon.owns(0, now=100.0)
    assert not Horizon(lambda: None, lease, TOPIC, 10.0).owns(0, now=100.0)

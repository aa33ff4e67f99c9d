"""How far wall-clock time goes for a live partition's silence rules (`stream/kafka/horizon.py`):
only as far as the worker has read -- a fetch that answered with the partition's end, all of
it handed on -- and a partition is judged at all only while it is assigned and a fetch of it
answered lately."""

from __future__ import annotations

from helpers import encode, make_event

from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka.consume import TP
from runwatch.stream.kafka.horizon import Horizon
from runwatch.stream.live import LiveDriver

TOPIC = "t.runwatch.events"
T0 = 1_800_000_000.0


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


def driver(arrival: float) -> LiveDriver:
    d = LiveDriver(topic=TOPIC, grace=0.5)
    d.arrival = arrival
    return d


def test_time_goes_to_the_last_fetch_once_all_of_it_is_read() -> None:
    loop = Loop()
    horizon = Horizon(lambda: loop, TOPIC, 10.0)
    d = driver(arrival=100.0)
    loop.answers[TP(TOPIC, 0)] = (150.0, True)
    assert horizon.of(0, d, now=151.0) == (150.0, True)
    loop.answers[TP(TOPIC, 0)] = (152.0, False)  # records left to hand on
    assert horizon.of(0, d, now=153.0) == (100.5, False)  # the last record's time + grace


def test_without_a_loop_or_an_answer_time_holds_at_what_was_read() -> None:
    d = driver(arrival=100.0)
    assert Horizon(lambda: None, TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)
    loop = Loop()
    assert Horizon(lambda: loop, TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)
    loop.assigned = set()  # not assigned any more
    assert Horizon(lambda: loop, TOPIC, 10.0).of(0, d, now=500.0) == (100.5, False)


def test_after_a_gap_in_the_answers_time_holds_a_while_longer() -> None:
    """Fetches answered, then none for 20 s (a broker away, this process paused): once they
    answer again, time does not leap to the fetch -- emitters are still delivering what
    they spooled meanwhile (`ReadClock`)."""
    loop = Loop()
    horizon = Horizon(lambda: loop, TOPIC, 10.0)
    d = driver(arrival=100.0)
    tp = TP(TOPIC, 0)
    for t in (100.0, 100.5, 101.0):
        loop.answers[tp] = (t, True)
        assert horizon.of(0, d, now=t)[0] == t
    loop.answers[tp] = (121.0, True)
    time, caught_up = horizon.of(0, d, now=121.0)
    assert caught_up
    assert time < 121.0


def test_a_partition_is_judged_only_while_assigned_and_fetched_lately() -> None:
    loop = Loop()
    horizon = Horizon(lambda: loop, TOPIC, 10.0)
    tp = TP(TOPIC, 0)
    assert not horizon.owns(0, now=100.0)  # no fetch answered yet
    loop.answers[tp] = (95.0, True)
    assert horizon.owns(0, now=100.0)
    assert not horizon.owns(0, now=105.0)  # the last answer is a session timeout old
    loop.assigned = set()
    assert not horizon.owns(0, now=100.0)
    assert not Horizon(lambda: None, TOPIC, 10.0).owns(0, now=100.0)


def test_records_fetched_first_after_an_outage_do_not_move_silence_past_it() -> None:
    """The broker away from T0+1 to T0+10: the first fetch after it brings trainer a's newest
    beat (its emitter sent what was queued before its spool), then b's and a's spools. The
    gap before that fetch holds silence at its start while the records come in, so b,
    silent only because its beats were spooled, is not taken for lost (issue 43)."""
    loop = Loop()
    horizon = Horizon(lambda: loop, TOPIC, 10.0)
    config = RulesConfig.from_mapping({"rules": {"heartbeat_lost": {"timeout": 3}}})
    d = LiveDriver(config, topic=TOPIC, grace=0.5)
    tp, out, offset = TP(TOPIC, 0), [], 0

    def fetched(at: float, *beats: tuple[str, float]) -> None:
        nonlocal offset, out
        loop.answers[tp] = (T0 + at, True)
        horizon.observe(0, d)  # as the worker does before it applies a fetch's records
        for host, ts in beats:
            raw = encode(make_event("heartbeat", T0 + ts, host=host, component=host))
            out += d.feed([(raw, T0 + at, offset)])[0]
            offset += 1
        out += d.tick(horizon.of(0, d, T0 + at)[0])

    for t in range(2):
        fetched(t, ("a", t), ("b", t))
    fetched(10, ("a", 10))  # a's newest first
    fetched(10.5, *[(h, 1 + i) for i in range(9) for h in ("b", "a")])  # the spools
    for t in range(11, 30):
        fetched(t, ("a", t), ("b", t))
    assert out == []

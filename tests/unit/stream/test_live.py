"""LiveDriver without a broker: clock skew correction, wall-clock ticks, dead letters, and
the rebuild that publishes only what `runwatch.alerts` lacks."""

from __future__ import annotations

import base64
import gc
import json
import weakref
from collections.abc import Iterable
from typing import Any

import pytest
from helpers import encode, make_event

from runwatch.dev import scenarios
from runwatch.stream.alerts import Alert, transition_id
from runwatch.stream.config import RulesConfig
from runwatch.stream.live import LiveDriver
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.refused import WHOLE, Refused
from runwatch.stream.state.run import RunState
from runwatch.stream.timekeeping.skew import ClockOffsets

T0 = 1_800_000_000.0
CONFIG = RulesConfig.from_mapping({"rules": {"heartbeat_lost": {"timeout": 3}}})
KEY = "heartbeat_lost|r1|trainer@node-0/100"


class Partition:
    """A fake partition: records with broker append times and offsets."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, float, int]] = []

    def append(self, raw: bytes | None, arrival: float) -> tuple[bytes | None, float, int]:
        record = (raw, arrival, len(self.records))
        self.records.append(record)
        return record


def beat(ts: float, host: str = "node-0", **fields: Any) -> bytes:
    return encode(make_event("heartbeat", ts, host=host, **fields))


def driver(**kw: Any) -> LiveDriver:
    return LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, **kw)


def play(
    d: LiveDriver, part: Partition, skew: float, beats: Iterable[float], delay: float = 0.05
) -> list[Alert]:
    """Heartbeats at true times `beats` from a host whose clock is `skew` s off; ticks every
    0.5 s of wall time in between."""
    out: list[Alert] = []
    wall = None
    for t in beats:
        if wall is not None:
            while wall + 0.5 <= t:
                wall += 0.5
                out += d.tick(wall)
        wall = t
        out += d.feed([part.append(beat(t + skew), t + delay)])[0]
    return out


# -- skew ----------------------------------------------------------------------------------


@pytest.mark.parametrize("skew", [-120.0, 0.0, 120.0])
def test_a_skewed_host_raises_neither_false_nor_missed_alerts(skew: float) -> None:
    d = driver()
    part = Partition()
    steady = [T0 + i * 0.5 for i in range(20)]  # beats every 0.5 s for 10 s
    assert play(d, part, skew, steady) == []  # no false alert
    # silence from T0+9.5: due at T0+12.5, judged at wall T0+13 (grace 0.5)
    fired = []
    for k in range(1, 12):
        fired += d.tick(T0 + 9.5 + k * 0.5)
    assert [(a.state, a.ts) for a in fired] == [("firing", pytest.approx(T0 + 12.55))]
    assert d.corrected == (0 if skew == 0 else 20)


@pytest.mark.parametrize("ahead", [30.0, 3000.0, 5 * 86_400.0])
def test_one_event_from_the_future_cannot_move_its_hosts_clock(ahead: float) -> None:
    """A healthy host beating every 0.5 s; one event claiming its name is stamped `ahead`
    seconds in the future (a hostile emitter, or a clock that jumped once). It must not pull
    the host's offset estimate: the beats after it would look old and fire heartbeat_lost."""
    d = driver()
    part = Partition()
    beats = [T0 + i * 0.5 for i in range(40)]
    out = play(d, part, 0.0, beats[:10])
    poison = make_event("heartbeat", beats[9] + ahead, host="node-0", pid=999)
    alerts, dead = d.feed([part.append(encode(poison), beats[9] + 0.06)])
    out += alerts + play(d, part, 0.0, beats[10:])
    assert [a for a in out if a.subject == "trainer@node-0/100"] == []  # no false alert
    assert d.clocks.offset("node-0") == pytest.approx(0.05)
    if ahead > 300:  # too far ahead of its arrival to be a clock a little off: refused
        (letter,) = dead
        assert "ahead of the time the event arrived" in letter.reason


def test_uncorrected_skew_would_fire_falsely() -> None:
    """The control: with correction off, a host 2 min behind looks silent -- as soon as the
    hold its records' lateness starts is over (they look spooled through an outage)."""
    d = driver(min_correction=float("inf"))
    out = play(d, Partition(), -120.0, [T0 + i * 0.5 for i in range(40)])
    assert [a.state for a in out][:1] == ["firing"]


def test_offset_estimate_is_the_fastest_delivery() -> None:
    clocks = ClockOffsets(window=60)
    assert clocks.observe("h", 100.0, 221.0) == 121.0
    assert clocks.observe("h", 101.0, 221.2) == pytest.approx(120.2)
    assert clocks.observe("h", 102.0, 230.0) == pytest.approx(120.2)  # a slow delivery
    assert clocks.offset("h") == pytest.approx(120.2)
    assert clocks.offset("other") is None


def test_offset_forgets_old_samples_only_after_a_full_window_of_delivery() -> None:
    clocks = ClockOffsets(window=10, gap=5)
    for i in range(20):
        clocks.observe("h", 100.0 + i, 100.1 + i)
    # the host's clock steps back by 30 s: samples grow; the old minimum holds a window
    assert clocks.observe("h", 90.0, 120.1) == pytest.approx(0.1)
    for i in range(1, 12):
        est = clocks.observe("h", 90.0 + i, 120.1 + i)
    assert est == pytest.approx(30.1)


def test_spooled_backlog_keeps_its_event_time() -> None:
    """After an outage the emitter's backlog arrives in a burst: it keeps its (corrected)
    event time and is applied late, so the silence during the outage is not hidden."""
    d = driver()
    part = Partition()
    play(d, part, -120.0, [T0 + i * 0.5 for i in range(10)])  # up to T0+4.5
    fired = []
    for k in range(1, 40):  # broker outage: nothing arrives for 20 s
        fired += d.tick(T0 + 4.5 + k * 0.5)
    assert [a.state for a in fired] == ["firing"]
    backlog = [(beat(T0 + 5 + i - 120), T0 + 25 + i * 0.001) for i in range(20)]
    alerts, _ = d.feed([part.append(raw, at) for raw, at in backlog])
    # the backlog's beats are 5..24 s old, not fresh: the alert resolves at their time
    assert [a.state for a in alerts] == ["resolved"]
    (proc,) = d.engine.runs["r1"].state.processes.by_id.values()
    assert proc.last_beat == pytest.approx(T0 + 24.05, abs=0.1)


# -- ticks, duplicates, dead letters ---------------------------------------------------------


def test_tick_fires_silence_at_wall_clock_less_grace() -> None:
    d = driver(min_correction=1.0)
    part = Partition()
    d.feed([part.append(beat(T0), T0)])
    assert d.tick(T0 + 3.4) == []  # due at T0+3, but within the grace
    (alert,) = d.tick(T0 + 3.6)
    assert (alert.state, alert.key, alert.id) == ("firing", KEY, transition_id(KEY, 1))


def test_duplicates_are_applied_once() -> None:
    d = driver()
    raw = beat(T0)
    d.feed([(raw, T0, 0), (raw, T0 + 1, 1)])
    assert (d.applied, d.duplicates) == (1, 1)


def test_invalid_records_become_dead_letters() -> None:
    d = driver()
    bad_run = make_event("run.started", T0, config={"zero_reward": {"steps": "x"}})
    alerts, dead = d.feed(
        [(b"not json", T0, 7), (b"\xff\xfe", T0, 8), (None, T0, 9), (encode(bad_run), T0, 10)]
    )
    assert alerts == []
    assert [x.position for x in dead] == [7, 8, 9, 10]
    assert d.invalid == 4
    first = json.loads(dead[0].to_json())
    assert first["raw"] == "not json"
    assert first["reason"].startswith("not JSON")
    assert (first["topic"], first["partition"], first["offset"]) == ("runwatch.events", 3, 7)
    second = json.loads(dead[1].to_json())
    assert second["raw_encoding"] == "base64"
    assert base64.b64decode(second["raw"]) == b"\xff\xfe"
    assert "zero_reward" in json.loads(dead[3].to_json())["reason"]


def test_dead_letter_json_round_trips() -> None:
    letter = Refused("bad", b'{"a":1}', "t", 0, 5)
    assert json.loads(letter.to_json()) == {
        "reason": "bad", "raw": '{"a":1}', "topic": "t", "partition": 0, "offset": 5,
    }  # fmt: skip


# -- rebuild ----------------------------------------------------------------------------------


def history(part: Partition) -> None:
    """Beats, a 5 s silence (fires at T0+4.5+3), beats again (resolves), silence again."""
    for i in range(10):
        part.append(beat(T0 + i * 0.5), T0 + i * 0.5 + 0.01)
    for i in range(6):
        part.append(beat(T0 + 9.5 + i * 0.5), T0 + 9.5 + i * 0.5 + 0.01)


def live_run(part: Partition, until: float) -> list[Alert]:
    d = driver()
    out: list[Alert] = []
    wall = T0
    for record in part.records:
        while wall + 0.5 <= record[1]:
            wall += 0.5
            out += d.tick(wall)
        out += d.feed([record])[0]
    while wall < until:
        wall += 0.5
        out += d.tick(wall)
    return out


def published_of(alerts: Iterable[Alert]) -> PublishedAlerts:
    pub = PublishedAlerts()
    for a in alerts:
        pub.add(a)
    return pub


def rebuild(part: Partition, published: PublishedAlerts, now: float) -> list[Alert]:
    d = driver()
    d.start_replay()
    assert d.feed(part.records) == ([], [])
    alerts, _ = d.finish_replay(published, now)
    return alerts


def test_rebuild_publishes_nothing_when_everything_was_published() -> None:
    part = Partition()
    history(part)
    done = live_run(part, T0 + 20)
    assert [a.state for a in done] == ["firing", "resolved", "firing"]
    assert rebuild(part, published_of(done), T0 + 20) == []


@pytest.mark.parametrize("published_count", [0, 1, 2])
def test_rebuild_publishes_exactly_the_lost_transitions(published_count: int) -> None:
    part = Partition()
    history(part)
    done = live_run(part, T0 + 20)
    missing = rebuild(part, published_of(done[:published_count]), T0 + 20)
    assert [a.id for a in missing] == [a.id for a in done[published_count:]]


def test_rebuild_keeps_numbering_when_live_judged_a_silence_replay_does_not_see() -> None:
    """Live fired on the wall clock; a beat stamped before the deadline arrived late and
    resolved it. The re-read applies that beat in time and never fires: it takes the
    published count over, and its next firing is transition 3."""
    part = Partition()
    part.append(beat(T0), T0)
    d = driver()
    d.feed(part.records)
    (fired,) = d.tick(T0 + 4)  # due T0+3
    part.append(beat(T0 + 2.9), T0 + 5)  # delayed delivery
    (resolved,) = d.feed(part.records[-1:])[0]
    assert rebuild(part, published_of([fired, resolved]), T0 + 5.1) == []
    d = driver()
    d.start_replay()
    d.feed(part.records)
    d.finish_replay(published_of([fired, resolved]), T0 + 5.1)
    (again,) = d.tick(T0 + 7)
    assert (again.state, again.id) == ("firing", transition_id(KEY, 3))


def test_rebuild_restores_alternation_when_the_replay_disagrees_with_the_topic() -> None:
    """The topic says firing (its resolve was lost with the worker) and the re-read never
    fired: the missing resolve is published under the next number."""
    part = Partition()
    part.append(beat(T0), T0)
    d = driver()
    d.feed(part.records)
    (fired,) = d.tick(T0 + 4)
    part.append(beat(T0 + 2.9), T0 + 6)
    out = rebuild(part, published_of([fired]), T0 + 6.1)
    assert [(a.state, a.id) for a in out] == [("resolved", transition_id(KEY, 2))]


def test_rebuild_republishes_dead_letters_past_the_last_one_recorded() -> None:
    part = Partition()
    part.append(b"bad-1", T0)
    part.append(beat(T0), T0)
    part.append(b"bad-2", T0)
    d = driver()
    d.start_replay()
    d.feed(part.records)
    _, dead = d.finish_replay(PublishedAlerts(), T0 + 1, dead_after=(0, WHOLE))
    assert [x.position for x in dead] == [2]


@pytest.mark.parametrize("published_count", [0, 1, 3])
def test_a_rebuild_taken_over_from_its_own_checkpoint_loses_and_repeats_nothing(
    published_count: int,
) -> None:
    """A worker killed mid-rebuild left a checkpoint of what it had re-read: the successor
    starts there and publishes what the whole rebuild would have (transitions and dead
    letters the first re-read made are in the checkpoint, unpublished)."""
    from runwatch.stream import checkpoint

    part = Partition()
    part.append(b"bad-0", T0)
    history(part)
    done = live_run(part, T0 + 20)
    published = published_of(done[:published_count])
    whole = driver()
    whole.start_replay()
    whole.feed(part.records)
    want_alerts, want_dead = whole.finish_replay(published, T0 + 20)
    for split in range(len(part.records) + 1):
        first = driver()
        first.start_replay()
        first.feed(part.records[:split])
        data = checkpoint.dump(first, {"offset": split})
        second = driver()
        assert checkpoint.load(data, second) == {"offset": split}
        second.start_replay()
        second.feed(part.records[split:])
        alerts, dead = second.finish_replay(published, T0 + 20)
        assert [a.id for a in alerts] == [a.id for a in want_alerts], split
        assert [(d.position, d.reason) for d in dead] == [(d.position, d.reason) for d in want_dead]


def test_finished_and_silent_runs_leave_and_late_events_do_not_bring_them_back() -> None:
    """Bounded state: the rules keep live runs, not the history (serve and the worker)."""
    from runwatch.stream.decode import decode
    from runwatch.stream.live import LiveDriver

    def ev(ident: str, run: str, kind: str, ts: float, **fields: object) -> object:
        return decode(json.dumps({"v": 1, "id": ident, "ts": ts, "run": run, "kind": kind,
                                  "src": {"component": "trainer"}, **fields}).encode())  # fmt: skip

    t0 = 1_800_000_000.0
    driver = LiveDriver()
    finished = ev("a2", "done", "run.finished", t0 + 1, status="ok")
    driver.feed_events([(ev("a1", "done", "run.started", t0), b"", t0, 1, 0),
                        (finished, b"", t0 + 1, 2, 0),
                        (ev("b1", "quiet", "heartbeat", t0), b"", t0, 3, 0),
                        (ev("c1", "live", "heartbeat", t0 + 7200), b"", t0 + 7200, 4,
                         0)])  # fmt: skip
    assert driver.evict(t0 + 7200, keep_finished_s=3600, silent_after_s=3600) == (
        ["done"], ["quiet"])  # fmt: skip
    assert set(driver.engine.runs) == {"live"}
    driver.feed_events([(ev("a3", "done", "heartbeat", t0 + 7201), b"", t0 + 7201, 5, 0)])
    assert "done" not in driver.engine.runs
    assert driver.late == 1
    driver.feed_events([(ev("b2", "quiet", "heartbeat", t0 + 7201), b"", t0 + 7201, 6, 0)])
    assert "quiet" in driver.engine.runs  # a silent run that speaks again is tracked again


# -- a broker outage: the emitters' backlogs come in one after the other -------------------


def outage(part: Partition, dead: bool = False) -> list[tuple[float, Alert]]:
    """node-0 and node-1 beat every 0.5 s; the broker is down from T0+10 to T0+20, while
    both spool. node-0 reconnects first and sends its backlog, then beats live; node-1 only
    4 s later (its backoff). With `dead`, node-2 stopped at T0+10 for good. Returns each
    transition with the wall time it was made at."""
    hosts = ["node-0", "node-1"] + (["node-2"] if dead else [])
    before = [(T0 + i * 0.5, h) for i in range(20) for h in hosts]
    d, out, wall = driver(), [], T0
    for ts, host in before:  # delivered at once, ticked as the wall clock goes
        while wall + 0.5 <= ts:
            wall += 0.5
            out += [(wall, a) for a in d.tick(wall)]
        out += [(ts, a) for a in d.feed([part.append(beat(ts, host=host), ts + 0.01)])[0]]
    # the outage: no record, and the worker's time holds (no fetch answers: no tick)
    arrivals = [(T0 + 20 + i * 0.01, T0 + 10 + i * 0.5, "node-0") for i in range(20)]
    arrivals += [(T0 + 20.2 + i * 0.5, T0 + 20.2 + i * 0.5, "node-0") for i in range(40)]
    arrivals += [(T0 + 24 + i * 0.01, T0 + 10 + i * 0.5, "node-1") for i in range(28)]
    arrivals += [(T0 + 24.3 + i * 0.5, T0 + 24.3 + i * 0.5, "node-1") for i in range(32)]
    wall = T0 + 20
    for arrival, ts, host in sorted(arrivals):
        while wall + 0.5 <= arrival:
            wall += 0.5
            out += [(wall, a) for a in d.tick(wall)]
        record = part.append(beat(ts, host=host), arrival)
        out += [(arrival, a) for a in d.feed([record])[0]]
    while wall < T0 + 40:
        wall += 0.5
        out += [(wall, a) for a in d.tick(wall)]
    return out


def test_backlogs_delivered_one_after_the_other_raise_no_alert() -> None:
    part = Partition()
    assert outage(part) == []
    assert rebuild(part, PublishedAlerts(), T0 + 40) == []  # the re-read agrees


def test_a_process_that_died_in_the_outage_fires_once_the_backlogs_are_in() -> None:
    part = Partition()
    fired = [(wall, a) for wall, a in outage(part, dead=True) if a.state == "firing"]
    assert [a.key for _, a in fired] == ["heartbeat_lost|r1|trainer@node-2/100"]
    (made, alert), *_ = fired
    assert alert.ts == pytest.approx(T0 + 9.5 + 3)  # when it became true, as ever
    assert T0 + 24 < made <= T0 + 20 + 15 + 1  # after node-1's backlog; not minutes later
    assert rebuild(part, published_of([alert]), T0 + 40) == []


def step(ts: float, number: int, loss: float) -> bytes:
    return encode(make_event("step.metrics", ts, step=number, metrics={"loss": loss}))


def nan_step_in(arrivals: list[tuple[float, float, int]]) -> tuple[list[Alert], Partition]:
    """node-0's trainer beats every 0.5 s and logs a step every 2 s, records arriving at
    the given (arrival, ts, step) times; step 7 is a NaN, step 8 heals it. The transitions
    of non_finite_metric, ticked as the wall clock goes while records come (the worker's
    horizon: while its fetches get no answer, no tick moves time)."""
    part, d, out = Partition(), driver(), []
    wall = last = min(arrival for arrival, _, _ in arrivals)
    for arrival, ts, number in sorted(arrivals):
        while wall + 0.5 <= arrival:
            wall += 0.5
            if wall - last < 1.0:
                out += d.tick(wall)
        last = arrival
        raw = beat(ts) if number < 0 else step(ts, number, float("nan") if number == 7 else 1.0)
        out += d.feed([part.append(raw, arrival)])[0]
    return [a for a in out if a.rule == "non_finite_metric"], part


def records(start: float, end: float, late: float = 0.01) -> list[tuple[float, float, int]]:
    """Beats every 0.5 s and a step every 2 s of event time in [start, end), each arriving
    `late` seconds after its time."""
    beats = [(T0 + t / 2 + late, T0 + t / 2, -1) for t in range(int(start * 2), int(end * 2))]
    steps = [(T0 + 2 * n + late, T0 + 2 * n, n) for n in range(int(start / 2), int(end / 2))]
    return beats + steps


def test_a_nan_step_in_an_outage_backlog_fires_and_resolves_at_its_own_time() -> None:
    """The broker is away from T0+10 to T0+20; the backlog (the NaN step at T0+14, the
    healed one at T0+16) arrives after it. Silence is held while it comes in; the NaN is
    not: it fires and resolves as a replay of the same events does (issue 43)."""
    backlog = [(T0 + 20 + (ts - T0) / 1000, ts, n) for _, ts, n in records(10, 20)]
    made, part = nan_step_in(records(0, 10) + backlog + records(20, 30, late=0.2))
    assert [(a.state, a.ts) for a in made] == [("firing", T0 + 14), ("resolved", T0 + 16)]
    assert rebuild(part, published_of(made), T0 + 30) == []  # the re-read agrees


def test_a_nan_step_while_records_come_in_late_fires() -> None:
    """Records 3.5 s late for their first 10 s (a loaded emitter starting up) hold silence
    until T0+16.5; a NaN step on time meanwhile still fires, and the next step resolves it."""
    made, _ = nan_step_in(records(0, 10, late=3.5) + records(10, 30))
    assert [(a.state, a.ts) for a in made] == [("firing", T0 + 14), ("resolved", T0 + 16)]


def test_a_re_read_holds_silence_at_a_gap_in_the_records_as_the_live_worker_did() -> None:
    """The broker away from T0+10 to T0+20: the first record appended after it is node-0's
    newest beat (its emitter sent what was queued before its spool), then both spools. Live,
    the unanswered fetches held silence; a re-read of the same records sees the gap in their
    append times and holds it too: nothing to publish, nothing false."""
    part = Partition()
    before = [(T0 + i * 0.5, h) for i in range(20) for h in ("node-0", "node-1")]
    for ts, host in before:
        part.append(beat(ts, host=host), ts + 0.01)
    part.append(beat(T0 + 20, host="node-0"), T0 + 20.01)  # the newest first
    for i in range(20):
        for host in ("node-1", "node-0"):
            part.append(beat(T0 + 10 + i * 0.5, host=host), T0 + 20.02 + i * 0.01)
    for i in range(1, 40):
        for host in ("node-0", "node-1"):
            part.append(beat(T0 + 20 + i * 0.5, host=host), T0 + 20.5 + i * 0.5)
    d = LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, arrival_gaps=True)
    d.start_replay()
    d.feed(part.records)
    assert d.finish_replay(PublishedAlerts(), T0 + 40) == ([], [])


def test_a_rebuild_whose_records_end_where_the_broker_went_away_holds_silence() -> None:
    """A takeover during an outage: the records end at T0+10 (nothing appended since), the
    end was taken at T0+20. A gap, not a silence: the re-read publishes nothing, and judges
    silence again once the emitters had the time to deliver (10 s more)."""
    part = Partition()
    for i in range(20):
        for host in ("node-0", "node-1"):
            part.append(beat(T0 + i * 0.5, host=host), T0 + i * 0.5 + 0.01)
    d = LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, arrival_gaps=True)
    d.start_replay()
    d.feed(part.records)
    assert d.finish_replay(PublishedAlerts(), T0 + 20) == ([], [])
    assert d.tick(T0 + 29.9) == []
    assert len(d.tick(T0 + 30.5)) == 2  # both silent still: heartbeat_lost, each


def test_a_re_read_judges_a_quiet_gap_as_the_silence_it_was() -> None:
    """The only run of a partition goes quiet for 5 s (timeout 3 s) with the broker up: no
    record is appended, and none late follows. A re-read judges it as a replay does --
    fired and resolved -- not as an outage (an outage's records come late after it)."""
    part = Partition()
    for i in range(10):
        part.append(beat(T0 + i * 0.5), T0 + i * 0.5 + 0.01)
    for i in range(10):
        part.append(beat(T0 + 10 + i * 0.5), T0 + 10 + i * 0.5 + 0.01)
    d = LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, arrival_gaps=True)
    d.start_replay()
    for record in part.records:  # one at a time: the gap's window is not in one batch
        d.feed([record])
    alerts, _ = d.finish_replay(PublishedAlerts(), T0 + 15)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert d.position == len(part.records) - 1


def test_a_re_read_waits_at_a_gap_only_until_what_follows_tells_it() -> None:
    """Records past a quiet gap wait -- the position (what a checkpoint covers) stays before
    the gap -- until WINDOW_S of appends after it passed with nothing late; then all of them
    are applied, the silence judged, and the invalid records met meanwhile counted once."""
    part = Partition()
    for i in range(10):
        part.append(beat(T0 + i * 0.5), T0 + i * 0.5 + 0.01)
    gap = len(part.records)
    for i in range(40):
        part.append(beat(T0 + 10 + i * 0.5), T0 + 10 + i * 0.5 + 0.01)
        if i % 10 == 5:
            part.append(b"{not json", T0 + 10 + i * 0.5 + 0.02)
    d = LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, arrival_gaps=True)
    d.start_replay()
    positions = []
    for record in part.records:
        d.feed([record])
        positions.append(d.position)
    waited = [p for p in positions[gap:] if p == gap - 1]
    assert 25 <= len(waited) < len(positions) - gap  # ~WINDOW_S of appends, then on
    assert d.position == len(part.records) - 1
    assert d.invalid == 4
    alerts, _ = d.finish_replay(PublishedAlerts(), T0 + 40)
    assert [a.state for a in alerts] == ["firing", "resolved"]


def test_a_rebuild_judges_silence_only_as_far_as_the_previous_owner_judged_silence() -> None:
    """The cluster fault test's false alarm: a takeover read its partition up to where the
    broker went away (T0+10; the end taken at T0+20, before the emitters' spools came), and
    what the previous owner published had a NaN step's transitions stamped T0+19 -- event
    time, a step it read late, not how far it judged silence. The rebuild judged silence to
    T0+19 and fired heartbeat_lost on both processes. Only a silence rule's firing says how
    far its owner's silence clock went."""
    part = Partition()
    for i in range(20):
        for host in ("node-0", "node-1"):
            part.append(beat(T0 + i * 0.5, host=host), T0 + i * 0.5 + 0.01)
    published = PublishedAlerts()
    key = "non_finite_metric|r1"
    for n, state in ((1, "firing"), (2, "resolved")):
        published.add(Alert(id=transition_id(key, n), ts=T0 + 19, rule="non_finite_metric",
                            run="r1", state=state, severity="critical", key=key,
                            since=T0 + 18.5, summary="non-finite value"))  # fmt: skip
    d = LiveDriver(CONFIG, topic="runwatch.events", partition=3, grace=0.5, arrival_gaps=True)
    d.start_replay()
    d.feed(part.records)
    assert d.finish_replay(published, T0 + 20) == ([], [])
    assert d.tick(T0 + 29.9) == []


def test_a_driver_let_go_is_freed_without_the_cyclic_collector() -> None:
    """A worker drops a partition's driver when the partition is given away, and runs the
    cyclic collector's full pass rarely (`stream/collector.py`): the driver's state must hold
    no reference cycle, or every partition that moved would stay in memory until then."""

    def states() -> int:
        # (type(), not isinstance: that asks every object its __class__, and a lazy module of
        # torch answers with a FutureWarning)
        return sum(type(o) is RunState for o in gc.get_objects())

    events = scenarios.sandbox_hang()[:3000]
    gc.collect()
    before = states()
    gc.disable()
    try:
        d = driver()
        part = Partition()
        for e in events:
            d.feed([part.append(encode(e), e["ts"] + 0.01)])
        d.tick(events[-1]["ts"] + 600)
        assert d.engine.runs
        assert states() > before
        engine = weakref.ref(d.engine)
        del d
        assert engine() is None
        assert states() == before
    finally:
        gc.enable()

"""The Kafka fleet stage's decision (`runwatch.stream.fleet.merge`) gives replay's fleet
incidents: issue 45's fleet trace split by run over partitions, each replayed on its own
(as a worker judges its partition), the fleet records of each (`feed.py`) interleaved in
an arbitrary order that keeps each partition's, and merged -- the same `shared_cause`
transitions as one replay of every run."""

from __future__ import annotations

import heapq
import io
import random
import zlib
from collections.abc import Iterator

import pytest

from runwatch.dev.deliver import write_file
from runwatch.dev.fleet import fleet_cluster
from runwatch.stream import checkpoint
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidFleetRecord
from runwatch.stream.fleet.feed import FleetFeed
from runwatch.stream.fleet.merge import IDLE_S, FleetMerge
from runwatch.stream.fleet.wire import FleetRecord, Mark, Transition, Uses, decode, encode
from runwatch.stream.replay import replay
from runwatch.stream.state.fleet import RunUsage

T0 = 1_773_496_800.0
PARTITIONS = 3
DELAY_S = 10.0


@pytest.fixture(scope="module")
def lines() -> list[bytes]:
    cluster, _ = fleet_cluster(runs=24, node_runs=3, coincident=3, duration=1200.0,
                               hang_at=400.0, hang_for=400.0, node_down_at=460.0,
                               crash_at=430.0, trajectories=8)  # fmt: skip
    out = io.BytesIO()
    write_file(cluster, out, T0, 1.0)
    return out.getvalue().splitlines()


def fleet_of(alerts: list[Alert]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(a.id, a.subject or "", a.state, tuple(a.details["runs"]))
            for a in alerts if a.run == "@fleet"]  # fmt: skip


def partition_of(line: bytes) -> int:
    run = line.split(b'"run":"', 1)[1].split(b'"', 1)[0]
    return zlib.crc32(run) % PARTITIONS


def partition_records(lines: list[bytes], p: int) -> list[FleetRecord]:
    """Partition `p`'s runs replayed alone, and the fleet records its worker would send."""
    engine, feed = Engine(RulesConfig.default()), FleetFeed(p)
    mine = [(f"p{p}", i, raw) for i, raw in enumerate(lines) if partition_of(raw) == p]
    out: list[FleetRecord] = []
    for alert in replay(mine, engine, fleet=False):  # (transitions come one event at a time)
        out += feed.records([alert], engine)
    out += feed.records([], engine)
    return out


def interleaved(parts: list[list[FleetRecord]], seed: int) -> Iterator[tuple[float, FleetRecord]]:
    """The partitions' records as a stage would read them: each partition's in order, each
    record up to `DELAY_S` after its time (its worker's poll, the broker), so the partitions
    interleave differently with each seed; with the wall time each arrives."""
    rng = random.Random(seed)

    def arrivals(records: list[FleetRecord]) -> Iterator[tuple[float, FleetRecord]]:
        at = float("-inf")
        for r in records:
            at = max(at, r.ts + rng.uniform(0.0, DELAY_S))
            yield at, r

    return heapq.merge(*(list(arrivals(part)) for part in parts), key=lambda x: x[0])


def test_the_partitioned_fleet_trace_merges_to_replays_fleet_incidents(
    lines: list[bytes],
) -> None:
    expected = fleet_of(list(replay([("all", i, raw) for i, raw in enumerate(lines)],
                                    Engine(RulesConfig.default()))))  # fmt: skip
    assert sorted(s for _, s, state, _ in expected if state == "firing") == [
        "dep:reward@rm-1:8000", "host:rollout-node-7"]  # fmt: skip
    parts = [partition_records(lines, p) for p in range(PARTITIONS)]
    for seed in (1, 2):
        merge = FleetMerge(RulesConfig.default(), PARTITIONS, started=0.0)
        got: list[Alert] = []
        for wall, record in interleaved(parts, seed):
            got += merge.add(decode(encode(record)[1]), wall=wall)
            got += merge.release(wall=wall)
        got += merge.release(wall=float("inf"))
        assert fleet_of(got) == expected
        assert merge.late == 0


def test_a_silent_partition_stops_holding_the_watermark_after_idle_s() -> None:
    merge = FleetMerge(RulesConfig.default(), 2, started=100.0)
    merge.add(Mark(0, 50.0), wall=100.0)
    assert merge.release(wall=100.0 + IDLE_S - 1) == []
    assert merge.released == float("-inf")
    merge.add(Mark(0, 60.0), wall=100.0 + IDLE_S + 1)
    merge.release(wall=100.0 + IDLE_S + 1)
    assert merge.released == 58.0  # partition 1 never spoke: it holds nothing now


@pytest.mark.parametrize(
    "value",
    [b"", b"[]", b'{"t":"mark","p":-1,"ts":1}', b'{"t":"mark","p":0,"ts":"x"}',
     b'{"t":"uses","p":0,"run":"r","clock":1,"deps":{"a":"b"},"hosts":[],"servers":[]}',
     b'{"t":"alert","p":0,"alert":{"v":1}}', b'{"t":"nope","p":0}'],
)  # fmt: skip
def test_a_bad_fleet_record_is_refused_with_its_reason(value: bytes) -> None:
    with pytest.raises(InvalidFleetRecord):
        decode(value)


def test_a_stage_taken_over_from_its_checkpoint_goes_on_to_the_same_incidents(
    lines: list[bytes],
) -> None:
    """Half-way, the stage's state goes into a checkpoint and a new stage goes on from it,
    re-reading what the old one read since; a worker's takeover sends some transitions a
    second time. The fleet transitions are those of one stage that saw each record once."""
    parts = [partition_records(lines, p) for p in range(PARTITIONS)]
    arrivals = list(interleaved(parts, 3))
    config = RulesConfig.default()

    def play(merge: FleetMerge, items: list[tuple[float, FleetRecord]]) -> list[Alert]:
        out: list[Alert] = []
        for wall, record in items:
            out += merge.add(record, wall)
            out += merge.release(wall)
        return out

    whole = FleetMerge(config, PARTITIONS, started=0.0)
    expected = fleet_of(play(whole, arrivals) + whole.release(float("inf")))
    assert expected
    cut = len(arrivals) // 2
    first = FleetMerge(config, PARTITIONS, started=0.0)
    published = play(first, arrivals[:cut])
    saved = checkpoint.pack(first.dump_state(), config, cut)
    play(first, arrivals[cut : cut + 500])  # made, never committed: gone with it
    second = FleetMerge(config, PARTITIONS, started=0.0)
    state, position = checkpoint.unpack(saved, config)
    second.load_state(state)
    again = [a for a in arrivals[:position] if isinstance(a[1], Transition)]  # a rebuild
    published += play(second, again + arrivals[position:]) + second.release(float("inf"))
    assert fleet_of(published) == expected


def test_runs_out_of_the_decisions_reach_leave_the_population_and_a_checkpoint() -> None:
    """Bounded: a run not heard from within the decision's reach leaves once the watermark
    has moved past it (let go every few seconds of it, not on every turn); its usage is in
    a checkpoint until then, and a checkpoint of the older form (`RunUsage` objects) still
    loads."""
    config = RulesConfig.default()
    merge = FleetMerge(config, 1, started=0.0)
    reach = merge.window
    hosts, servers = frozenset({"node-1"}), frozenset({"vllm-0@node-1"})
    merge.add(Uses(0, "old", RunUsage(T0, {"redis": T0}, hosts, servers)), 0.0)
    merge.add(Uses(0, "new", RunUsage(T0 + reach - 5.0, {}, hosts, frozenset())), 0.0)
    merge.add(Mark(0, T0 + reach + 1.0), 0.0)  # (less LAG_S: the watermark)
    merge.release(0.0)
    assert set(merge.population.runs) == {"old", "new"}  # "old" is within reach still
    state, _ = checkpoint.unpack(checkpoint.pack(merge.dump_state(), config, 1), config)
    again = FleetMerge(config, 1, started=0.0)
    again.load_state(state)
    assert {run: vars_of(u) for run, u in again.population.runs.items()} == {
        run: vars_of(u) for run, u in merge.population.runs.items()
    }
    older = dict(state, runs=dict(merge.population.runs))  # (as checkpoints held them)
    again.load_state(older)
    assert vars_of(again.population.runs["old"]) == (T0, {"redis": T0}, hosts, servers)
    merge.add(Uses(0, "new", RunUsage(T0 + 2 * reach, {}, hosts, frozenset())), 0.0)
    merge.add(Mark(0, T0 + 2 * reach + 10.0), 0.0)
    merge.release(0.0)
    assert set(merge.population.runs) == {"new"}


def vars_of(usage: RunUsage) -> tuple[object, ...]:
    return (usage.clock, usage.deps, usage.hosts, usage.servers)

"""A member run's own transitions on the Kafka path (`runwatch.stream.fleet.members`): the
workers publish each transition at once and stamp it with what the fleet stage has decided
so far, which reaches them later. Against replay, on issue 45's fleet trace: where the
decisions come as soon as they are made, every stamp is replay's, and the only transitions
left unstamped are those that opened a fleet incident (the stage decides after its worker
published them); where they come late, no stamp contradicts replay's and at least 80% of
each cause's runs still carry it."""

from __future__ import annotations

import io
from collections import deque
from dataclasses import dataclass

import pytest

from runwatch.dev.deliver import write_file
from runwatch.dev.fleet import Expected, fleet_cluster
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidFleetRecord
from runwatch.stream.fleet.members import Members, Membership
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.replay import replay

T0 = 1_773_496_800.0


@dataclass
class Played:
    replay: list[Alert]  # replay's run transitions, stamped by its stage
    kafka: list[Alert]  # the same, stamped as a worker stamps them
    opening: set[str]  # ids of the run transitions at which a fleet incident opened


@pytest.fixture(scope="module")
def trace() -> tuple[list[bytes], Expected]:
    cluster, expected = fleet_cluster(runs=24, node_runs=3, coincident=3, duration=1200.0,
                                      hang_at=400.0, hang_for=400.0, node_down_at=460.0,
                                      crash_at=430.0, trajectories=8)  # fmt: skip
    out = io.BytesIO()
    write_file(cluster, out, T0, 1.0)
    return out.getvalue().splitlines(), expected


def play(lines: list[bytes], lag: float) -> Played:
    """Replay the trace; the worker's stamp sees the stage's decisions `lag` seconds of
    event time after they were made (each through the record's encoding, as on the topic;
    0: before the next transition)."""
    engine = Engine(RulesConfig.default())
    stage, membership = FleetStage(engine), Membership()
    decisions: deque[tuple[float, bytes]] = deque()
    played = Played([], [], set())
    for alert in replay([("t", i, raw) for i, raw in enumerate(lines)], engine, fleet=False):
        played.kafka += membership.stamp([alert])
        out = stage.transitions([alert])
        played.replay += [a for a in out if a.run != "@fleet"]
        if any(a.run == "@fleet" and a.firing for a in out):
            played.opening.add(alert.id)
        decisions.append((alert.ts, Members.of(stage.state).encode()))
        while decisions and decisions[0][0] + lag <= alert.ts:
            membership.update(Members.decode(decisions.popleft()[1]))
    return played


def fleet(alert: Alert) -> str | None:
    return alert.incident.fleet if alert.incident is not None else None


def carrying(alerts: list[Alert], expected: Expected) -> dict[str, float]:
    """Per cause, the share of its runs whose transitions carry its fleet incident."""
    shares = {}
    for thing, runs in ((expected.dep, expected.dep_runs), (expected.host, expected.host_runs)):
        carry = {a.run for a in alerts if (fleet(a) or "").startswith(f"fleet|{thing}|")}
        assert carry <= runs, sorted(carry - runs)
        shares[thing] = len(carry) / len(runs)
    return shares


def test_decisions_known_at_once_give_replays_stamps_but_at_openings(
    trace: tuple[list[bytes], Expected],
) -> None:
    lines, expected = trace
    played = play(lines, lag=0.0)
    assert [a.id for a in played.kafka] == [a.id for a in played.replay]
    pairs = zip(played.kafka, played.replay, strict=True)
    differ = [(a.id, fleet(a), fleet(r)) for a, r in pairs if fleet(a) != fleet(r)]
    assert {i for i, *_ in differ} == played.opening, differ
    assert all(mine is None for _, mine, _ in differ), differ
    assert sum(fleet(a) is not None for a in played.kafka) > 2 * len(played.opening)
    assert min(carrying(played.kafka, expected).values()) >= 0.8


@pytest.mark.parametrize("lag", [5.0, 120.0])
def test_late_decisions_never_contradict_replay(
    trace: tuple[list[bytes], Expected], lag: float
) -> None:
    lines, expected = trace
    played = play(lines, lag)
    pairs = zip(played.kafka, played.replay, strict=True)
    wrong = [(a.id, fleet(a), fleet(r)) for a, r in pairs if fleet(a) not in (None, fleet(r))]
    assert not wrong
    assert min(carrying(played.kafka, expected).values()) >= 0.8


@pytest.mark.parametrize("value", [b"", b"[]", b'{"v": 2, "fleets": []}',
                                   b'{"v": 1, "fleets": [{"id": "f"}]}',
                                   b'{"v": 1, "fleets": [{"id": "f", "subject": "dep:x", '
                                   b'"opened": "soon", "incidents": []}]}'])  # fmt: skip
def test_a_bad_members_record_is_refused_with_a_reason(value: bytes) -> None:
    with pytest.raises(InvalidFleetRecord):
        Members.decode(value)

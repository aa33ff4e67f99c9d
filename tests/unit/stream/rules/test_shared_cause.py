"""`shared_cause` (critical): a fleet incident when the incidents of runs that use one thing
open together, far more than those of runs that do not (contract section 8).

The decision is pure and driven by run-incident summaries (`runwatch.stream.fleet.decide`),
so most of it is tested from summaries and a population written here; then through the
engine's own transitions (`FleetStage`): a node that dies under four runs, the members'
`incident.fleet`, a checkpoint in the middle, the rule turned off.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import beats, by_ts, decoded, lawful, make_event, one_root

from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.decide import Change, Figures, FleetBook, Summary
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.rules.shared_cause import SharedCauseParams
from runwatch.stream.state.fleet import FleetState, Thing

RULE = "shared_cause"
T0 = 1_773_496_800.0
NODE: Thing = ("host", "node-7")


class Fleet:
    """A population of runs, each using the things given, and a book to drive."""

    def __init__(self, uses: dict[str, set[Thing]], **params: Any) -> None:
        self.uses = uses
        self.book = FleetBook(FleetState(), SharedCauseParams(**params))

    def users(self, thing: Thing, since: float) -> set[str]:
        return {run for run, things in self.uses.items() if thing in things}

    def active(self, since: float) -> set[str]:
        return set(self.uses)

    def open(
        self, thing: Thing, run: str, ts: float, n: int = 1, points: bool | None = None
    ) -> list[Change]:
        """`points`: the failure points at `thing` (default: a dep, as work waiting on it)."""
        points = thing[0] == "dep" if points is None else points
        summary = Summary(thing, run, f"incident|{run}|{n}", ts, True, points)
        return self.book.summary(summary, self)

    def close(self, thing: Thing, run: str, ts: float, n: int = 1) -> list[Change]:
        return self.book.summary(Summary(thing, run, f"incident|{run}|{n}", ts, False), self)


def sixty() -> dict[str, set[Thing]]:
    """Issue 45's fleet: 60 runs, a third on each of three reward servers, every run on a
    node of its own but the four whose rollout workers share node-7."""
    uses: dict[str, set[Thing]] = {}
    for k in range(60):
        run = f"r{k:02d}"
        uses[run] = {("dep", f"reward@rm-{k % 3}:8000"), ("host", f"node-{100 + k}")}
        if k < 4:
            uses[run].add(NODE)
    return uses


def test_a_node_whose_runs_all_died_opens_though_half_the_fleet_is_in_trouble() -> None:
    """The base-rate pitfall: 26 of the 56 runs that do not use node-7 have an incident --
    20 stall on a hung reward server, 6 crash on nodes of their own. Counted as "any
    incident" the node would fail the five-times test (4/4 against 26/56); against failures
    of its own kind elsewhere (6/56) it passes."""
    fleet = Fleet(sixty())
    for k in range(5, 60, 3):  # the runs of rm-2 (k % 3 == 2), but the node's
        assert fleet.open(("dep", "reward@rm-2:8000"), f"r{k:02d}", 100.0 + k) == [] or k > 10
    for k in (6, 9, 12, 15, 18, 21):  # crashes on their own nodes, in the same minute
        assert fleet.open(("host", f"node-{100 + k}"), f"r{k:02d}", 300.0 + k) == []
    assert fleet.open(NODE, "r00", 400.0) == []
    assert fleet.open(NODE, "r01", 401.0) == []
    (opened,) = fleet.open(NODE, "r02", 402.0)
    assert opened.what == "opened"
    assert opened.fleet.founders == ["r00", "r01", "r02"]
    figures = opened.figures
    assert figures is not None
    assert (figures.affected, figures.users, figures.others, figures.others_affected) == (
        3, 4, 56, 6)  # fmt: skip
    assert opened.fleet.id == "fleet|host:node-7|1"


def test_coincident_failures_on_different_things_are_no_fleet_incident() -> None:
    fleet = Fleet(sixty())
    for k in (6, 9, 12, 15, 18, 21):  # six crash in the same minute, each on its own node
        assert fleet.open(("host", f"node-{100 + k}"), f"r{k:02d}", 300.0 + k) == []
    assert fleet.book.state.fleets == {}


def test_a_thing_whose_users_fail_no_more_than_the_rest_opens_nothing() -> None:
    """Four of four users of node-7, but 20 of the 56 others lost a process on their own
    nodes in the same window: 100% against 36% is under five times."""
    fleet = Fleet(sixty())
    for k in range(4, 24):
        fleet.open(("host", f"node-{100 + k}"), f"r{k:02d}", 300.0 + k)
    for k in range(4):
        assert fleet.open(NODE, f"r{k:02d}", 400.0 + k) == []
    looser = Fleet(sixty(), ratio=2.0)  # configurable: twice is enough here
    for k in range(4, 24):
        looser.open(("host", f"node-{100 + k}"), f"r{k:02d}", 300.0 + k)
    changes = [c for k in range(4) for c in looser.open(NODE, f"r{k:02d}", 400.0 + k)]
    assert [c.what for c in changes] == ["opened", "joined"]


def test_half_of_its_users_at_least() -> None:
    """20 runs use rm-1: 9 stalled is not half of them; the tenth opens it."""
    fleet = Fleet(sixty())
    rm1 = ("dep", "reward@rm-1:8000")
    users = [f"r{k:02d}" for k in range(1, 60, 3)]
    for i, run in enumerate(users[:9]):
        assert fleet.open(rm1, run, 100.0 + i) == []
    (opened,) = fleet.open(rm1, users[9], 110.0)
    assert opened.fleet.founders == sorted(users[:10])
    stricter = Fleet(sixty(), min_share=0.75)
    assert [c for i, run in enumerate(users[:14]) for c in stricter.open(rm1, run, 100.0 + i)] == []


def test_incidents_further_apart_than_the_window_are_not_one_cause() -> None:
    fleet = Fleet(sixty(), window=100.0)
    assert fleet.open(NODE, "r00", 0.0) == []
    assert fleet.open(NODE, "r01", 61.0) == []
    assert fleet.open(NODE, "r02", 122.0) == []  # r00's left the window: two in it
    (opened,) = fleet.open(NODE, "r03", 150.0)
    assert opened.fleet.founders == ["r01", "r02", "r03"]
    assert opened.fleet.since == 61.0


def test_min_runs() -> None:
    uses = {f"r{k}": {NODE} if k < 4 else {("host", "node-8")} for k in range(8)}
    fleet = Fleet(uses, min_runs=4)
    assert [c for k in range(3) for c in fleet.open(NODE, f"r{k}", float(k))] == []
    assert [c.what for c in fleet.open(NODE, "r3", 3.0)] == ["opened"]


def test_a_node_every_run_is_on_counts_only_the_failures_that_point_at_it() -> None:
    """A one-machine `serve`: every run is on "vm", so there is nothing to set failures
    there against. Crashes with errors of their own open nothing, however many; processes
    gone silent there point at it: three of five open it."""
    vm: Thing = ("host", "vm")
    crashes = Fleet({f"job-{k}": {vm, ("dep", "reward@localhost:8000")} for k in range(5)})
    assert [c for k in range(5) for c in crashes.open(vm, f"job-{k}", 5.0 + k)] == []
    assert crashes.book.state.fleets == {}
    silences = Fleet({f"job-{k}": {vm} for k in range(5)})
    assert silences.open(vm, "job-0", 5.0) == []  # a crash
    assert silences.open(vm, "job-1", 6.0, points=True) == []
    assert silences.open(vm, "job-2", 7.0, points=True) == []
    (opened,) = silences.open(vm, "job-3", 8.0, points=True)
    assert opened.figures is not None
    assert (opened.figures.affected, opened.figures.pointed) == (4, 3)


def test_a_service_every_run_waits_on_needs_no_contrast() -> None:
    """One reward server serves every run and hangs: the runs' alerts say their work waits
    on it, and half of its users stalling on it within the window opens it."""
    rm: Thing = ("dep", "reward@rm-1:8000")
    fleet = Fleet({f"r{k}": {rm, ("host", f"node-{k}")} for k in range(6)})
    assert [c for k in range(2) for c in fleet.open(rm, f"r{k}", 10.0 + k)] == []
    (opened,) = fleet.open(rm, "r2", 12.0)
    assert opened.figures is not None
    assert (opened.figures.users, opened.figures.others) == (6, 0)
    assert opened.fleet.founders == ["r0", "r1", "r2"]


def test_the_test_with_and_without_runs_elsewhere() -> None:
    """With runs that do not use the thing, the ratio of shares decides, whether or not the
    failures point at it; with none, the failures that point at it alone."""
    p = SharedCauseParams()
    assert not Figures(affected=3, users=3, others=0, others_affected=0, pointed=2).shared(p)
    assert Figures(affected=3, users=3, others=0, others_affected=0, pointed=3).shared(p)
    assert not Figures(affected=3, users=7, others=0, others_affected=0, pointed=3).shared(p)
    spread = Figures(affected=3, users=4, others=56, others_affected=6)  # 75% against 11%
    assert spread.shared(p)
    assert not spread.shared(SharedCauseParams(ratio=8.0))
    assert not Figures(affected=3, users=4, others=56, others_affected=20, pointed=3).shared(p)


def test_joiners_and_the_resolution_when_every_member_incident_closed() -> None:
    uses = {f"r{k}": {NODE} for k in range(6)} | {f"o{k}": set() for k in range(20)}
    fleet = Fleet(uses)
    for k in range(3):
        fleet.open(NODE, f"r{k}", float(k))
    assert fleet.close(NODE, "r0", 10.0) == []
    (joined,) = fleet.open(NODE, "r4", 20.0)  # later: a member from its first transition
    assert joined.what == "joined"
    assert fleet.book.state.member_of["incident|r4|1"] == "fleet|host:node-7|1"
    assert "incident|r0|1" not in fleet.book.state.member_of
    assert fleet.open(NODE, "r1", 25.0, n=2) == [joined.__class__("joined", joined.fleet, 25.0)]
    for run, n in (("r1", 1), ("r2", 1), ("r4", 1)):
        assert fleet.close(NODE, run, 30.0, n) == []
    (resolved,) = fleet.close(NODE, "r1", 40.0, n=2)
    assert resolved.what == "resolved"
    assert sorted(set(resolved.fleet.members.values())) == ["r0", "r1", "r2", "r4"]
    assert fleet.book.state.fleets == {}
    assert fleet.book.state.member_of == {}
    for k in range(3):  # the next time is a new fleet incident
        fleet.open(NODE, f"r{k}", 100.0 + k, n=3)
    assert fleet.book.state.fleets[NODE].id == "fleet|host:node-7|2"


# -- through the engine's transitions ---------------------------------------------------------


def node_dies(runs: int = 4, others: int = 12) -> list[dict[str, Any]]:
    """`runs` runs have their rollout worker on node-7, which dies at 300; `others` runs
    go on on nodes of their own; the node's runs are killed at 900."""
    events: list[dict[str, Any]] = []
    for k in range(runs + others):
        run = f"run-{k:02d}"
        trainer = {"component": "trainer", "host": f"node-{100 + k}", "pid": 100 + k}
        node = "node-7" if k < runs else f"node-{200 + k}"
        rollout = {"component": "rollout", "host": node, "pid": 200 + k}
        events += beats(trainer, k, 1000 + k, run=run)
        events += beats(rollout, k, 300 if k < runs else 1000 + k, run=run)
        if k < runs:
            events.append(make_event("run.finished", 900.0 + k, run=run, src=trainer,
                                     status="killed"))  # fmt: skip
    return [{**e, "ts": T0 + e["ts"]} for e in by_ts(events)]  # live: plausible times


def staged(events: list[dict[str, Any]], config: RulesConfig | None = None) -> list[Alert]:
    """The engine's transitions through the fleet stage, held to the alert contract."""
    engine = Engine(config)
    stage = FleetStage(engine)
    out: list[Alert] = []
    for event in events:
        out += stage.transitions(engine.apply(decoded(event)))
    lawful(out, {})
    one_root(out, {}, engine.config.incidents.explains)
    return out


def test_a_node_that_dies_under_four_runs_is_one_fleet_incident() -> None:
    alerts = staged(node_dies())
    fleet = [a for a in alerts if a.run == "@fleet"]
    assert [(a.rule, a.state, a.subject) for a in fleet] == [
        (RULE, "firing", "host:node-7"), (RULE, "resolved", "host:node-7")]  # fmt: skip
    fired, resolved = fleet
    node = ["run-00", "run-01", "run-02", "run-03"]
    assert fired.severity == "critical"
    assert fired.key == "shared_cause|@fleet|host:node-7"
    assert len(fired.details["runs"]) == 3  # the runs affected when it opened
    assert set(fired.details["runs"]) < set(node)
    assert resolved.details["runs"] == node  # every member
    assert fired.incident is not None
    assert resolved.incident is not None
    assert (fired.incident.id, fired.incident.role, fired.incident.open) == (
        "fleet|host:node-7|1", "root", True)  # fmt: skip
    assert resolved.incident.open is False
    # it fires just before the transition that made it, which is already a member
    third = alerts[alerts.index(fired) + 1]
    assert (third.run in fired.details["runs"], third.rule) == (True, "heartbeat_lost")
    assert third.incident is not None
    assert third.incident.fleet == fired.incident.id
    members = {a.run for a in alerts if a.incident and a.incident.fleet == "fleet|host:node-7|1"}
    assert members == {"run-00", "run-01", "run-02", "run-03"}  # their run-end resolutions
    assert all(a.incident is None or a.incident.fleet is None
               for a in alerts if a.run >= "run-04")  # fmt: skip
    # it resolves when the last member incident closed (the runs were killed)
    last = alerts[alerts.index(resolved) - 1]
    assert (last.run, last.state, last.details["reason"]) == ("run-03", "resolved",
                                                              "run_finished")  # fmt: skip


def test_turned_off_like_any_rule() -> None:
    config = RulesConfig.from_mapping({"rules": {RULE: {"enabled": False}}})
    alerts = staged(node_dies(), config)
    assert [a for a in alerts if a.run == "@fleet"] == []
    assert all(a.incident is None or a.incident.fleet is None for a in alerts)
    assert len(alerts) == len(staged(node_dies())) - 2
    fewer = RulesConfig.from_mapping({"rules": {RULE: {"min_runs": 5}}})
    assert [a for a in staged(node_dies(), fewer) if a.run == "@fleet"] == []


def test_its_parameters_are_the_fleet_s_not_a_run_s() -> None:
    from runwatch.stream.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"config\.shared_cause\.window: cannot be changed"):
        RulesConfig.default().run_params({RULE: {"window": 60}})


def test_the_fleet_state_goes_through_a_checkpoint() -> None:
    """serve's driver judges fleet incidents and checkpoints them: cut anywhere, the
    transitions are the same (alternation and members included)."""
    from runwatch.stream import checkpoint
    from runwatch.stream.live import LiveDriver

    events = node_dies()
    lines = [(json.dumps(e).encode(), e["ts"], i) for i, e in enumerate(events)]
    whole = LiveDriver(fleet=True)
    want = [a.to_dict() for a in whole.feed(lines)[0]]
    assert any(a["run"] == "@fleet" for a in want)
    for split in (len(lines) // 3, len(lines) // 2, 2 * len(lines) // 3):
        first = LiveDriver(fleet=True)
        got = [a.to_dict() for a in first.feed(lines[:split])[0]]
        second = LiveDriver(fleet=True)
        checkpoint.load(checkpoint.dump(first, {"offset": split}), second)
        got += [a.to_dict() for a in second.feed(lines[split:])[0]]
        assert got == want, split
    with pytest.raises(checkpoint.CheckpointError):  # a worker's, without the fleet's state
        checkpoint.load(checkpoint.dump(LiveDriver(), {"offset": 0}), LiveDriver(fleet=True))


def test_runs_let_go_of_in_silence_close_what_they_held() -> None:
    """serve evicts a run silent for a day with its incidents open: they count as closed,
    and the fleet incident they held resolves (on the next tick) instead of never."""
    from runwatch.stream.live import LiveDriver

    events = [e for e in node_dies() if e["kind"] != "run.finished"]  # killed without a word
    driver = LiveDriver(fleet=True)
    out, _ = driver.feed([(json.dumps(e).encode(), e["ts"], i) for i, e in enumerate(events)])
    assert [(a.state, a.subject) for a in out if a.run == "@fleet"] == [("firing", "host:node-7")]
    later = events[-1]["ts"] + 86_400.0 + 60.0
    _, silent = driver.evict(later)
    assert {"run-00", "run-01", "run-02", "run-03"} <= set(silent)
    resolved = [a for a in driver.tick(later) if a.run == "@fleet"]
    assert [(a.state, a.subject) for a in resolved] == [("resolved", "host:node-7")]
    assert resolved[0].details["runs"] == ["run-00", "run-01", "run-02", "run-03"]


def test_a_rebuild_keeps_firing_and_resolved_in_turn() -> None:
    """serve rebuilt from its log after a resolution its re-read does not reproduce (the
    runs were let go of on the wall clock): the published state wins, nothing fires twice;
    and a published firing the rebuild does not hold is resolved."""
    from runwatch.stream.live import LiveDriver
    from runwatch.stream.published import PublishedAlerts

    events = [e for e in node_dies() if e["kind"] != "run.finished"]
    lines = [(json.dumps(e).encode(), e["ts"], i) for i, e in enumerate(events)]
    later = events[-1]["ts"] + 86_400.0 + 60.0
    first = LiveDriver(fleet=True)
    made = first.feed(lines)[0]
    first.evict(later)
    made += first.tick(later)
    published = PublishedAlerts()
    for alert in made:
        published.add(alert)
    key = "shared_cause|@fleet|host:node-7"
    assert published.count(key) == 2
    rebuilt = LiveDriver(fleet=True)
    rebuilt.start_replay()
    rebuilt.feed(lines)
    missing, _ = rebuilt.finish_replay(published, later)
    assert [a for a in missing if a.run == "@fleet"] == []
    assert rebuilt.fleet is not None
    assert rebuilt.fleet.state.fleets == {}
    assert rebuilt.fleet.count(key) == 2
    # a log cut before the resolution: the published firing is resolved at once
    cut = PublishedAlerts()
    for alert in made[: [a.key for a in made].index(key) + 1]:
        cut.add(alert)
    other = LiveDriver(fleet=True)
    other.start_replay()
    other.feed(lines[:2])  # one run's first beats: its state holds no fleet incident
    fixed, _ = other.finish_replay(cut, later)
    fleet = [a for a in fixed if a.run == "@fleet"]
    assert [(a.state, a.key) for a in fleet] == [("resolved", key)]
    assert fleet[0].incident is not None
    assert fleet[0].incident.open is False

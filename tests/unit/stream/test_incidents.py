"""Incidents: one per fault, with the root the pipeline's direction of dependency names --
on every bundled scenario and every simulated fault -- exactly one root per incident,
symptoms only of a root that explains them, the table extended from the config, and the
state through a checkpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import (
    ROLLOUT,
    TRAINER,
    beats,
    by_ts,
    decoded,
    feed,
    make_engine,
    make_event,
    one_root,
)

from runwatch.dev.scenarios import SCENARIOS
from runwatch.dev.simulate import EXPECTED_ROOT, KINDS, Cluster
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import ConfigError
from runwatch.stream.incidents import IncidentGraph
from runwatch.stream.replay import replay

ORCH = {"component": "orchestrator", "host": "node-5", "pid": 500}


def incidents(alerts: list[Alert]) -> dict[str, list[Alert]]:
    """Transitions by incident id, in order; every transition is in one."""
    out: dict[str, list[Alert]] = {}
    for a in alerts:
        assert a.incident is not None, a
        out.setdefault(a.incident.id, []).append(a)
    return out


def root_of(transitions: list[Alert]) -> tuple[str, str | None]:
    """The incident's root as its last transition says: (rule, the root's subject)."""
    ref = transitions[-1].incident
    assert ref is not None
    subject = next(a.subject for a in transitions if a.key == ref.root)
    return ref.root_rule, subject


def replayed(events: list[Any]) -> list[Alert]:
    """The transitions of a replay, each held to one root per incident and direction."""
    lines = (("t", i, json.dumps(e).encode()) for i, e in enumerate(events))
    engine = Engine()
    alerts = list(replay(lines, engine))
    one_root(alerts, {}, engine.config.incidents.explains)
    return alerts


def roots_by_incident(alerts: list[Alert]) -> dict[str, set[str]]:
    """incident id -> the keys any of its transitions called its root."""
    out: dict[str, set[str]] = {}
    for a in alerts:
        if a.incident is not None:
            out.setdefault(a.incident.id, set())
            if a.incident.role == "root":
                out[a.incident.id].add(a.key)
    return out


# -- the bundled scenarios and the simulated faults -----------------------------------------


def bundled(name: str) -> list[dict[str, Any]]:
    """The events `runwatch scenarios NAME` writes."""
    return [e.model_dump(mode="json", exclude_none=True) if hasattr(e, "model_dump") else e
            for e in SCENARIOS[name]()]  # fmt: skip


#: Per bundled scenario: the root of each incident it yields, in order.
BUNDLED = {
    "orchestrator_dies": [("heartbeat_lost", "orchestrator@node-3/5100")],
    "zero_reward": [("heartbeat_lost", "inference@node-5/sglang-0")],
    # step 4's idle gap grows while nothing that explains it fires: a root of its own
    "sandbox_hang": [("inference_idle_with_pending", None)] * 3
    + [("idle_gap_growing", None), ("inference_idle_with_pending", None)],
    "rank_divergence": [("ranks_stalled", None)],
    "rank_uniform": [("ranks_stalled", None)],
    "healthy_long_steps": [],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_bundled_incident_names_its_root(name: str) -> None:
    found = incidents(replayed(bundled(name)))
    assert [root_of(ts) for ts in found.values()] == BUNDLED[name]
    for transitions in found.values():  # each closes or stays open, once
        opens = [a.incident.open for a in transitions if a.incident is not None]
        assert all(opens[:-1]), opens


def test_each_simulated_fault_yields_one_incident_with_the_right_root() -> None:
    cluster = Cluster(len(KINDS) + 1, faults=list(KINDS), seed=7, duration=2400.0)
    events = cluster.events(1_773_496_800.0, 1.0)
    lines = (("s", i, json.dumps(e).encode()) for i, e in enumerate(events))
    alerts = list(replay(lines, Engine()))
    for spec in cluster.specs:
        mine = incidents([a for a in alerts if a.run == spec.run])
        if spec.fault not in EXPECTED_ROOT:
            assert mine == {}, spec.fault
            continue
        rule, component = EXPECTED_ROOT[spec.fault]
        first, *_ = mine.values()  # the fault's incident (a sandbox hang may recur)
        got_rule, subject = root_of(first)
        assert got_rule == rule, (spec.fault, got_rule)
        if component is not None:
            assert subject is not None
            assert subject.startswith(f"{component}@"), subject
        assert len({a.rule for a in first}) >= 2 or spec.fault == "rank_divergence", (
            "the fault's symptoms join its incident",
            spec.fault,
            [a.rule for a in first],
        )


# -- one root, and symptoms only along the table's direction (issue 45, item 6) -------------


def test_the_sandbox_hang_s_fourth_step_has_one_root_per_incident() -> None:
    """The idle gap grows (step 4's step.done) while nothing that explains it fires; the GPU
    goes idle with trajectories pending 19 minutes later. The table says the second explains
    the first, so the first cannot be its root: they were two roots of one incident."""
    alerts = replayed(bundled("sandbox_hang"))
    roots = roots_by_incident(alerts)
    assert all(len(keys) == 1 for keys in roots.values()), roots
    gap = next(a for a in alerts if a.rule == "idle_gap_growing")
    idle = [a for a in alerts if a.rule == "inference_idle_with_pending" and a.ts > gap.ts]
    assert gap.incident is not None
    assert idle[0].incident is not None
    assert gap.incident.role == "root"  # nothing that explains it fires
    assert idle[0].incident.id != gap.incident.id
    assert idle[0].incident.role == "root"


def test_a_frozen_bar_is_no_symptom_of_a_zero_reward() -> None:
    """zero_reward explains degenerate groups only: a progress bar frozen while the reward is
    zero is its own incident (a family through component_failed made it a symptom)."""
    events = beats(TRAINER, 0, 600)
    events += [make_event("reward", 10.0 * s, src=TRAINER, step=s, mean=0.0) for s in range(1, 9)]
    events += [make_event("progress", 10.0 * n, src=TRAINER, name="Rollout", n=n, total=100)
               for n in (1, 2, 3)]  # fmt: skip
    alerts = feed(make_engine(), by_ts(events))
    fired = {a.rule: a.incident for a in alerts if a.firing}
    zero, stuck = fired["zero_reward"], fired["stuck_progress"]
    assert zero is not None
    assert stuck is not None
    assert (zero.role, stuck.role) == ("root", "root")
    assert zero.id != stuck.id


def test_an_upstream_failure_read_late_opens_its_own_incident() -> None:
    """heartbeat_lost was reported as a root; the failure that explains it, read later,
    cannot make it a symptom after the fact: it roots an incident of its own, and a stall
    that both explain joins the upstream one."""
    events = orchestrator_dies(failure_at=200)
    alerts = feed(make_engine(), events)
    lost = next(a for a in alerts if a.rule == "heartbeat_lost")
    failed = next(a for a in alerts if a.rule == "component_failed")
    stalled = next(a for a in alerts if a.rule == "ranks_stalled")
    assert lost.incident is not None
    assert failed.incident is not None
    assert stalled.incident is not None
    assert lost.ts < failed.ts < stalled.ts
    assert (lost.incident.role, failed.incident.role) == ("root", "root")
    assert lost.incident.id != failed.incident.id
    assert (stalled.incident.id, stalled.incident.role) == (failed.incident.id, "symptom")


def test_evidence_is_printed_as_evidence() -> None:
    from runwatch.console import alert_line

    engine = make_engine()
    src = [{"component": "trainer", "host": "node-0", "pid": 100 + r, "rank": r} for r in (0, 1)]
    feed(engine, [make_event("rank.status", 10, src=s, rank=r, world_size=2, phase="recv")
                  for r, s in enumerate(src)])  # fmt: skip
    (stalled,) = engine.advance(320)
    assert stalled.incident is not None
    frames = [{"file": "/w/train.py", "line": 42, "function": "step"}]
    answers = [make_event("process.stacks", 321, src=s, request=stalled.incident.id,
                          how="emitter", threads=[{"name": "MainThread", "frames": frames}])
               for s in src]  # fmt: skip
    feed(engine, answers)
    (evidence,) = engine.advance(360)
    assert evidence.incident is not None
    assert evidence.incident.role == "evidence"
    assert alert_line(evidence).endswith("  (incident 1: evidence for ranks_stalled)")


# -- evidence that arrives late, and unrelated faults ------------------------------------


def orchestrator_dies(failure_at: float | None) -> list[dict[str, Any]]:
    """The orchestrator beats until 100 and goes silent; the trainer waits in wait_batch."""
    events = beats(ORCH, 0, 100) + beats(TRAINER, 0, 1000)
    events += [make_event("rank.status", 100, src={**TRAINER, "rank": r}, rank=r, world_size=2,
                          phase="wait_batch", since=100.0) for r in range(2)]  # fmt: skip
    if failure_at is not None:
        events.append(make_event("component.failed", failure_at, src=ORCH, how="exception",
                                 error="KeyError: 'teacher_logprobs'"))  # fmt: skip
    return by_ts(events)


def test_unrelated_faults_of_one_run_are_separate_incidents() -> None:
    events = [
        *orchestrator_dies(None),
        make_event("step.metrics", 150, src=TRAINER, step=3, metrics={"loss": float("nan")}),
    ]
    alerts = feed(make_engine(), by_ts(events))
    roots = sorted(root_of(ts)[0] for ts in incidents(alerts).values())
    assert roots == ["heartbeat_lost", "non_finite_metric"]


def test_an_incident_closes_when_its_last_alert_resolves_and_the_next_one_is_new() -> None:
    events = beats(ROLLOUT, 0, 100) + beats(ROLLOUT, 300, 400) + beats(ROLLOUT, 600, 700)
    alerts = feed(make_engine(), events)
    found = incidents(alerts)
    assert list(found) == ["incident|r1|1", "incident|r1|2"]
    for transitions in found.values():
        assert [a.incident.open for a in transitions if a.incident] == [True, False]


# -- the table in the config -------------------------------------------------------------


def test_a_custom_rule_can_explain_a_built_in_one() -> None:
    """Both see the orchestrator go silent at one instant: two roots, two incidents (neither
    was firing when the other fired). The trainer's stall joins the root that explains it --
    of two, the upstream one: the custom rule once it explains heartbeat_lost too."""
    custom = [{"type": "absent", "id": "reward_service_down", "kind": "heartbeat",
               "component": "orchestrator", "for": 60, "explains": ["ranks_stalled"]}]  # fmt: skip

    def stall_root() -> str:
        found = incidents(feed(make_engine(custom=custom), orchestrator_dies(None)))
        assert sorted(root_of(ts)[0] for ts in found.values()) == [
            "heartbeat_lost", "reward_service_down"]  # fmt: skip
        (stall,) = [ts for ts in found.values() if any(a.rule == "ranks_stalled" for a in ts)]
        return root_of(stall)[0]

    # neither root explains the other: the incident opened first
    assert stall_root() == "heartbeat_lost"
    custom[0]["explains"] = ["ranks_stalled", "heartbeat_lost"]
    assert stall_root() == "reward_service_down"


def test_explains_names_known_rules_and_is_not_set_per_run() -> None:
    with pytest.raises(ConfigError, match=r"rules.zero_reward.explains: no rule 'nope'"):
        RulesConfig.from_mapping({"rules": {"zero_reward": {"explains": ["nope"]}}})
    with pytest.raises(ConfigError, match="cannot be changed per run"):
        RulesConfig.default().run_params({"zero_reward": {"explains": []}})


def test_the_graph_reaches_through_rules_and_survives_cycles() -> None:
    g = IncidentGraph({"a": {"b"}, "b": {"c"}, "x": {"y"}, "y": {"x"}})
    assert g.explains("a", "c")
    assert not g.explains("c", "a")
    assert not g.explains("a", "x")
    assert g.explains("x", "x")  # a cycle: each is explained, the earliest is the root


def test_every_built_in_explains_only_built_in_rules() -> None:
    ids = {r.rule_id for r in RulesConfig.default().rules}
    for rule in RulesConfig.default().rules:
        assert rule.explained() <= ids, rule.rule_id


# -- through a checkpoint -------------------------------------------------------------------


def test_incident_state_goes_through_a_checkpoint() -> None:
    from runwatch.stream import checkpoint
    from runwatch.stream.live import LiveDriver

    events = orchestrator_dies(failure_at=400)
    whole = make_engine()
    want = [a.to_dict() for a in feed(whole, events)]
    for split in (len(events) // 3, len(events) // 2, len(events) - 5):
        first = LiveDriver()
        got = [a.to_dict() for e in events[:split] for a in first.engine.apply(decoded(e))]
        second = LiveDriver()
        checkpoint.load(checkpoint.dump(first, {"offset": split}), second)
        got += [a.to_dict() for e in events[split:] for a in second.engine.apply(decoded(e))]
        assert got == want, split


def test_the_printed_line_says_the_incident_and_the_role() -> None:
    from runwatch.console import alert_line

    alerts = feed(make_engine(), orchestrator_dies(failure_at=None))
    lines = [alert_line(a) for a in alerts if a.firing]
    assert lines[0].endswith("  (incident 1: root cause)")
    assert any(x.endswith("  (incident 1: symptom of heartbeat_lost)") for x in lines[1:])

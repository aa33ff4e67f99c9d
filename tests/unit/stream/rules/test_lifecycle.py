"""The alert lifecycle and format (contract §3), across every rule."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from helpers import (
    ROLLOUT,
    TRAINER,
    VLLM,
    beats,
    by_ts,
    decoded,
    feed,
    make_engine,
    make_event,
)

from runwatch.stream.alerts import Alert
from runwatch.stream.rules import BUILTIN_RULES

ORCH = {"component": "orchestrator", "host": "node-5", "pid": 500}
CUSTOM = [
    {"id": "loss_high", "type": "metric", "metric": "loss", "op": ">", "value": 5.0},
    {
        "id": "no_reward",
        "type": "absent",
        "kind": "reward",
        "component": "trainer",
        "for": 900,
        "severity": "critical",
    },
]
#: the built-in rules' severities (held to the contract by tests/unit/test_rule_docs.py)
SEVERITY = {
    **{rule.id: rule.severity for rule in BUILTIN_RULES},
    "loss_high": "warning",
    "no_reward": "critical",
}
WITH_SUBJECT = {
    "heartbeat_lost",
    "stuck_progress",
    "emitter_dropping",
    "restart_loop",
    "staleness_growing",
    "component_failed",
    "collective_timeout",
    "inference_stalled",
}


def busy_run(run: str = "r1") -> list[dict[str, Any]]:
    """One run in which every rule fires and resolves, some of them several times."""

    def ev(kind: str, ts: float, src: dict[str, Any] = TRAINER, **f: Any) -> dict[str, Any]:
        return make_event(kind, ts, run=run, src=src, **f)

    events = [ev("run.started", 0)]
    # the orchestrator comes and goes: heartbeat_lost fires and resolves twice
    events += beats(ORCH, 0, 100, run=run) + beats(ORCH, 300, 400, run=run)
    events += beats(ORCH, 600, 700, run=run)
    # the rollout's emitter drops events twice: emitter_dropping fires and resolves twice
    # (its beats say `final`, so heartbeat_lost does not judge its silences)
    events += [ev("heartbeat", t, src=ROLLOUT, dropped_events=n, final=True)
               for t, n in [(0, 0), (100, 5), (800, 5), (900, 9), (1600, 9)]]  # fmt: skip
    # rewards: five zeros, a recovery, five zeros again; a NaN in between
    for s in range(1, 15):
        mean = 0.5 if s in (6, 12) else 0.0
        events.append(ev("reward", 50.0 * s, step=s, mean=mean))
        loss = math.nan if s == 8 else (10.0 if s in (3, 4) else 1.0)
        lag = 5.0 if s <= 6 else 1.0  # rollouts 5 versions old: staleness_growing, resolved
        metrics = {"loss": loss, "off_policy/mean": lag}
        events.append(ev("step.metrics", 50.0 * s + 1, step=s, metrics=metrics))
    # a progress bar that stalls, advances, stalls again
    events += [ev("progress", t, src=ROLLOUT, name="gen", n=n) for n, t in enumerate([0, 5, 10])]
    events += [ev("progress", 900, src=ROLLOUT, name="gen", n=3)]
    # ranks: stuck in a collective, then move on
    events += [ev("rank.status", 10, rank=r, world_size=2, phase="all_reduce") for r in (0, 1)]
    events += [ev("rank.status", 800, rank=0, world_size=2, phase="forward")]
    # inference idle while a trajectory sits in the sandbox
    events += [
        ev("inference.stats", 20, src=VLLM, server="vllm-0", running=0, waiting=0),
        ev("trajectory.started", 30, src=ROLLOUT, traj="t1"),
        ev("trajectory.done", 500, src=ROLLOUT, traj="t1", status="ok"),
    ]
    # steps 1-5: every GRPO group all-zero (degenerate_groups); step 6 mixed (resolved)
    for s in range(1, 7):
        for g in range(4):
            for k in range(2):
                traj, reward = f"s{s}-g{g}-{k}", float(k) if s == 6 else 0.0
                events += [ev("trajectory.started", 50.0 * s + 1.5, src=ROLLOUT, traj=traj,
                              step=s, group=f"p{g}"),
                           ev("trajectory.done", 50.0 * s + 1.5, src=ROLLOUT, traj=traj,
                              status="ok", reward=reward)]  # fmt: skip
        events.append(ev("step.done", 50.0 * s + 2, step=s))
    # the trainer publishes weights the server loads 800 s later: weight_sync_stalled
    events += [
        ev("weights.loaded", 20, src=VLLM, version=0, server="vllm-0"),
        ev("weights.published", 100, version=1, step=2),
        ev("weights.loaded", 900, src=VLLM, version=1, server="vllm-0"),
    ]
    # a sandbox that crashes every minute for a while: restart_loop
    for i, start in enumerate(range(0, 400, 75)):
        sandbox = {"component": "sandbox", "host": "node-0", "pid": 700 + i}
        events += [ev("heartbeat", t, src=sandbox, final=True) for t in (start, start + 60)]
    # the orchestrator's console says it failed; a step ends after: component_failed resolves
    events.append(ev("component.failed", 140, src=ORCH, error="KeyError: 'x'", how="exception"))
    # rank 1's NCCL collective times out in group 1; the next step resolves it
    events.append(ev("collective.timeout", 240, backend="nccl", rank=1, pg="1", op="ALLREDUCE",
                     seq=5))  # fmt: skip
    # the engine holds requests and makes no tokens, then makes them again
    events += [ev("inference.stats", t, src=VLLM, server="vllm-0", running=2, waiting=0,
                  gen_tokens_per_s=g, prompt_tokens_per_s=0.0)
               for t, g in [(1000, 0.0), (1100, 0.0), (1300, 40.0)]]  # fmt: skip
    events.append(ev("run.finished", 2000, status="killed"))
    return by_ts(events)


def run_busy(runs: tuple[str, ...] = ("r1",)) -> list[Alert]:
    engine = make_engine(custom=CUSTOM)
    alerts = feed(engine, by_ts(*(busy_run(r) for r in runs)))
    return alerts + engine.advance(1e6)


#: what the busy run was written to make fire: the contract's lifecycle on many rules at once
#: (each rule's own test holds its own transitions to the contract: `helpers.lawful`);
#: idle_gap_growing needs steps with gaps, the dynamics rules 20 steps of warm-up,
#: process_stacks processes that answer a request: their own tests have them
BUSY = {"inference_idle_with_pending", "zero_reward", "stuck_progress", "heartbeat_lost",
        "ranks_stalled", "non_finite_metric", "emitter_dropping", "weight_sync_stalled",
        "restart_loop", "staleness_growing", "degenerate_groups", "collective_timeout",
        "component_failed", "inference_stalled", "loss_high", "no_reward"}  # fmt: skip


def test_the_busy_run_fires_what_it_was_written_for() -> None:
    fired = {a.rule for a in run_busy() if a.state == "firing"}
    assert fired >= BUSY


def test_every_built_in_rule_has_its_own_test() -> None:
    """Where a rule's transitions are seen by a lawful engine: a test module of this folder
    that names the rule."""
    texts = [p.read_text() for p in Path(__file__).parent.glob("test_*.py")]
    for rule in BUILTIN_RULES:
        assert any(f'"{rule.id}"' in t for t in texts), f"{rule.id}: no test names it"


def test_transitions_alternate_per_key_starting_with_firing() -> None:
    by_key: dict[str, list[str]] = defaultdict(list)
    for alert in run_busy(("r1", "r2")):
        by_key[alert.key].append(alert.state)
    assert any(len(states) >= 4 for states in by_key.values())
    for key, states in by_key.items():
        expected = ["firing", "resolved"] * len(states)
        assert states == expected[: len(states)], key


def test_every_alert_ends_resolved_once_the_run_is_finished() -> None:
    last: dict[str, str] = {}
    for alert in run_busy():
        last[alert.key] = alert.state
    assert set(last.values()) == {"resolved"}


def test_ids_are_unique_and_reproducible() -> None:
    alerts = run_busy(("r1", "r2"))
    ids = [a.id for a in alerts]
    assert len(ids) == len(set(ids))
    assert all(len(i) == 32 for i in ids)
    assert [a.id for a in run_busy(("r1", "r2"))] == ids  # a replay reproduces them


def test_transition_times_never_go_backwards() -> None:
    ts = [a.ts for a in run_busy()]
    assert ts == sorted(ts)


def test_alert_dicts_carry_every_contract_field() -> None:
    alerts = run_busy()
    assert alerts
    for alert in alerts:
        d = alert.to_dict()
        required = {"v", "id", "ts", "rule", "run", "state", "severity", "key", "since"}
        required |= {"summary", "details"}
        assert required <= d.keys()
        assert set(d) - required <= {"subject", "incident"}
        assert d["v"] == 1
        assert isinstance(d["id"], str)
        assert d["id"]
        assert isinstance(d["ts"], float)
        assert isinstance(d["since"], float)
        assert d["since"] <= d["ts"]
        assert d["run"] == "r1"
        assert d["state"] in ("firing", "resolved")
        assert d["severity"] == SEVERITY[d["rule"]]
        assert d["key"].startswith(f"{d['rule']}|r1")
        assert isinstance(d["summary"], str)
        assert d["summary"]
        assert "\n" not in d["summary"]
        assert isinstance(d["details"], dict)
        if d["rule"] in WITH_SUBJECT:
            assert d["subject"]
            assert d["key"] == f"{d['rule']}|r1|{d['key'].split('|', 2)[2]}"
        else:
            assert "subject" not in d
            assert d["key"] == f"{d['rule']}|r1"
        json.dumps(d, allow_nan=False)  # plain JSON on the wire


def test_the_key_is_the_same_for_every_transition_of_one_alert() -> None:
    alerts = [a for a in run_busy() if a.rule == "heartbeat_lost"]
    assert [a.state for a in alerts] == ["firing", "resolved"] * 3
    assert {a.key for a in alerts} == {"heartbeat_lost|r1|orchestrator@node-5/500"}
    assert {a.subject for a in alerts} == {"orchestrator@node-5/500"}


def test_a_duplicate_event_is_applied_once() -> None:
    engine = make_engine()
    event = make_event("reward", 10, step=1, mean=0.0)
    feed(engine, [event])
    assert feed(engine, [event]) == []
    assert engine.duplicates == 1
    assert engine.runs["r1"].state.events == 1


def test_a_late_event_fires_now_not_in_the_past() -> None:
    engine = make_engine()
    feed(engine, [make_event("heartbeat", 1000, src=TRAINER)])
    late = [make_event("reward", 10.0 * s, step=s, mean=0.0) for s in range(1, 6)]
    alerts = feed(engine, late)
    assert [(a.rule, a.ts, a.since) for a in alerts] == [("zero_reward", 1000.0, 10.0)]


def test_apply_with_an_explicit_now_uses_that_time() -> None:
    engine = make_engine()
    for s in range(1, 5):
        engine.apply(decoded(make_event("reward", 10.0 * s, step=s, mean=0.0)))
    alerts = engine.apply(decoded(make_event("reward", 50, step=5, mean=0.0)), now=75.0)
    assert [(a.rule, a.ts) for a in alerts] == [("zero_reward", 75.0)]
    assert engine.now == 75.0


def test_firing_lists_what_is_firing_now() -> None:
    engine = make_engine()
    feed(engine, beats(ORCH, 0, 100))
    engine.advance(200)
    ((run, rule, cond),) = engine.firing()
    assert (run, rule, cond.subject) == ("r1", "heartbeat_lost", "orchestrator@node-5/500")
    feed(engine, [make_event("run.finished", 300, status="ok")])
    assert engine.firing() == []

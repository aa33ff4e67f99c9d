"""Golden tests: the scenarios, the incidents runwatch exists for (docs/architecture.md),
with their published numbers, through replay."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from runwatch.dev import scenarios
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

MIN = 60.0


def run_incident(events: list[dict], config: RulesConfig | None = None, until=None) -> list[Alert]:
    lines = [("incident", i, orjson.dumps(e)) for i, e in enumerate(events, 1)]
    return list(replay(lines, Engine(config), until=until))


def at(hh: int, mm: int, ss: int = 0) -> float:
    return datetime(2026, 3, 14, hh, mm, ss, tzinfo=UTC).timestamp()


def only(alerts: list[Alert], rule: str, state: str | None = None) -> list[Alert]:
    return [a for a in alerts if a.rule == rule and (state is None or a.state == state)]


@pytest.fixture(scope="module")
def sandbox() -> list[Alert]:
    return run_incident(scenarios.sandbox_hang())


def test_sandbox_gaps_grow_20_21_26_and_alert_at_step_3(sandbox):
    (fired,) = only(sandbox, "idle_gap_growing", "firing")
    assert fired.details["gaps"] == {"1": 20 * MIN, "2": 21 * MIN, "3": 26 * MIN}
    assert fired.severity == "warning"
    # checked at step 3's step.done: 16:24 in the incident's clock
    assert fired.ts == at(16, 24)


def test_sandbox_stuck_511_of_512_fires_two_minutes_after_vllm_goes_idle(sandbox):
    firings = only(sandbox, "inference_idle_with_pending", "firing")
    last = firings[-1]
    assert last.ts == at(16, 43)  # vLLM at 0/0 from 16:41, idle_for = 120 s
    assert last.since == at(16, 41)
    assert "511 of 512 trajectories done" in last.summary
    assert "sandbox" in last.summary
    assert last.details["pending"] == 1
    assert last.details["pending_by_phase"] == {"sandbox": 1}
    assert last.details["oldest"]["traj"] == "s4-t511"
    assert last.details["oldest"]["phase"] == "sandbox"
    assert last.details["idle_servers"] == ["vllm-0"]
    # resolved when someone pressed Ctrl-C, 99 minutes after vLLM went idle
    resolved = only(sandbox, "inference_idle_with_pending", "resolved")[-1]
    assert resolved.ts == at(16, 41) + 99 * MIN
    assert resolved.key == last.key


def test_sandbox_each_earlier_gap_fires_and_resolves_too(sandbox):
    idle = only(sandbox, "inference_idle_with_pending")
    assert [a.state for a in idle] == ["firing", "resolved"] * 4
    durations = [r.ts - f.since for f, r in zip(idle[::2], idle[1::2], strict=True)]
    assert durations == [20 * MIN, 21 * MIN, 26 * MIN, 99 * MIN]


def test_sandbox_rollout_bar_stuck_at_511(sandbox):
    stuck = only(sandbox, "stuck_progress", "firing")[-1]
    assert stuck.subject == "Rollout"
    assert (stuck.details["n"], stuck.details["total"]) == (511, 512)


def test_zero_reward_from_step_188_fires_at_step_192():
    events = scenarios.zero_reward(last_step=260)
    alerts = run_incident(events)
    (fired,) = only(alerts, "zero_reward", "firing")
    assert fired.details["first_zero_step"] == 188
    assert fired.details["count"] == 5
    metrics_192 = next(e["ts"] for e in events if e["kind"] == "step.metrics" and e["step"] == 192)
    assert fired.ts == metrics_192
    # the dead SGLang server is named too
    (lost,) = only(alerts, "heartbeat_lost", "firing")
    assert lost.details["component"] == "inference"
    assert "sglang-0" in lost.subject


def test_zero_reward_threshold_10_moves_the_alert_five_steps_later():
    events = scenarios.zero_reward(last_step=260)
    config = RulesConfig.from_mapping({"rules": {"zero_reward": {"steps": 10}}})
    (fired,) = only(run_incident(events, config), "zero_reward", "firing")
    metrics_197 = next(e["ts"] for e in events if e["kind"] == "step.metrics" and e["step"] == 197)
    assert fired.ts == metrics_197
    assert fired.details["first_zero_step"] == 188


def test_zero_reward_runs_through_step_680_without_repeating():
    alerts = run_incident(scenarios.zero_reward())
    assert len(only(alerts, "zero_reward", "firing")) == 1
    assert only(alerts, "zero_reward", "firing")[0].details["first_zero_step"] == 188


def test_orchestrator_death_is_named_within_a_minute():
    events = scenarios.orchestrator_dies()
    alerts = run_incident(events)
    last_beat = max(
        e["ts"]
        for e in events
        if e["kind"] == "heartbeat" and e["src"]["component"] == "orchestrator"
    )
    lost = only(alerts, "heartbeat_lost", "firing")
    assert [a.details["component"] for a in lost] == ["orchestrator"]
    assert lost[0].ts == last_beat + 60
    assert lost[0].since == last_beat


@pytest.mark.parametrize(
    ("pattern", "phases"),
    [
        ("divergent", {"recv": [0, 1, 2, 4, 5, 6, 7], "destroy_process_group": [3]}),
        ("uniform", {"all_reduce": list(range(8))}),
    ],
)
def test_rank_hang_patterns(pattern, phases):
    events = scenarios.rank_hang(pattern)
    (fired,) = only(run_incident(events), "ranks_stalled", "firing")
    assert fired.details["pattern"] == pattern
    assert fired.details["phases"] == phases
    assert fired.details["missing"] == []
    hang = max(e["since"] for e in events if e["kind"] == "rank.status" and e["phase"] in phases)
    assert fired.since == hang
    assert fired.ts == hang + 300


def test_healthy_two_hour_steps_with_validation_and_checkpoint_raise_nothing():
    events = scenarios.healthy_long_steps()
    end = max(e["ts"] for e in events)
    assert run_incident(events, until=end + 6 * 3600) == []


def test_transitions_alternate_per_key_across_all_incidents():
    for build in scenarios.SCENARIOS.values():
        last: dict[str, str] = {}
        for alert in run_incident(build()):
            assert last.get(alert.key) != alert.state, alert
            last[alert.key] = alert.state

"""The training-dynamics rules stay quiet on healthy runs: 2,000 steps with realistic noise
(heavy-tailed gradient norms with rare one-step spikes, a KL that grows and settles, an
entropy that falls as the policy learns, responses that lengthen) raise none of them at the
default thresholds."""

from __future__ import annotations

import pytest
from helpers import feed, make_engine, make_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runwatch.dev.dynamics import FAULTS, curves, events

DYNAMICS = set(FAULTS.values())


def healthy_run(seed: int, n: int = 2000) -> list[dict]:
    return events(f"healthy-{seed}", curves(seed, n), start=0.0)


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.slow
def test_healthy_runs_of_2000_steps_raise_no_dynamics_alert(seed: int) -> None:
    alerts = feed(make_engine(), healthy_run(seed))
    assert [a for a in alerts if a.rule in DYNAMICS] == []


@pytest.mark.slow
def test_every_generated_fault_is_caught_by_its_rule() -> None:
    for fault, rule in FAULTS.items():
        metrics = curves(7, n=600, fault=fault, at=400)
        alerts = feed(make_engine(), events(fault, metrics, start=0.0))
        fired = [a for a in alerts if a.rule == rule and a.firing]
        assert fired, fault
        assert fired[0].ts >= 30.0 * 400, fault  # not before the fault


#: verl's key -> the same metric as AReaL (4aef98d) and PRIME-RL (559b447) log it
SPELLINGS = {
    "areal": {"actor/ppo_kl": "ppo_actor/update/approx_kl/avg",
              "actor/grad_norm": "ppo_actor/update/grad_norm",
              "actor/entropy": "ppo_actor/update/entropy/avg",
              "response_length/clip_ratio": "ppo_actor/no_eos_ratios/avg"},
    "prime-rl": {"actor/ppo_kl": "mismatch_kl/all/mean", "actor/grad_norm": "optim/grad_norm",
                 "actor/entropy": "entropy/all/mean"},
}  # fmt: skip


@pytest.mark.slow
def test_areal_and_prime_rl_spellings_are_read_by_default() -> None:
    for framework, names in SPELLINGS.items():
        for fault, rule in FAULTS.items():
            if fault in ("length_collapse", "slowdown", "stale_rollouts"):
                continue  # no response length of their own (response_length.py); not metrics
            if fault == "length_clipping" and "response_length/clip_ratio" not in names:
                continue
            metrics = [{names[k]: v for k, v in m.items() if k in names}
                       for m in curves(7, n=600, fault=fault, at=400)]  # fmt: skip
            alerts = feed(make_engine(), [make_event("step.metrics", 30.0 * t, step=t, metrics=m)
                                          for t, m in enumerate(metrics, 1)])  # fmt: skip
            fired = [a for a in alerts if a.rule == rule and a.firing]
            assert fired, (framework, fault)
            assert fired[0].subject in (*names.values(), "clipped"), (framework, fired[0].subject)

"""weight_sync_stalled, restart_loop and degenerate_groups at their defaults on generated
histories (harness.histories): healthy runs -- slow loads now and then, a rare worker
restart, easy and hard batches -- raise none of them; each injected fault is caught."""

from __future__ import annotations

import pytest
from helpers import feed, make_engine

from harness.histories import FAULTS, STEP_S, T0, history

RULES = set(FAULTS.values())


def replay(events: list[dict]) -> list:
    return feed(make_engine(), events)


@pytest.mark.slow
def test_healthy_histories_raise_none_of_them() -> None:
    for seed in (11, 12):
        fired = [a.rule for a in replay(history(f"h{seed}", seed)) if a.firing]
        assert RULES.isdisjoint(fired), fired


@pytest.mark.slow
def test_each_fault_is_caught_by_its_rule_after_it_starts() -> None:
    for fault, rule in FAULTS.items():
        fired = [a for a in replay(history(fault, 3, fault=fault, at=100))
                 if a.rule == rule and a.firing]  # fmt: skip
        assert fired, fault
        assert fired[0].ts >= T0 + STEP_S * 100, fault

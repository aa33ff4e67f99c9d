"""`runwatch backtest` judges the fleet too: over every run, the fleet incidents a rules
change would open, moved or not; over one run, none (one run says nothing of the fleet)."""

from __future__ import annotations

from pathlib import Path

from runwatch.store import Store
from runwatch.store.backtest import run_backtest
from runwatch.stream.config import RulesConfig


def test_the_fleet_incidents_are_replayed_and_compared(fleet_db: Path) -> None:
    with Store.reader(fleet_db) as store:
        same = run_backtest(store, RulesConfig.default())
        stricter = run_backtest(store, RulesConfig.from_mapping(
            {"rules": {"shared_cause": {"min_share": 0.9}}}))  # fmt: skip
        one = run_backtest(store, RulesConfig.default(), run="fleet-000")
    assert sorted(t.subject or "" for t in same.fleet) == [
        "dep:reward@rm-1:8000", "host:rollout-node-7"]  # fmt: skip
    assert same.count("added") == same.count("removed") == same.count("moved") == 0
    fleet = [c for c in same.changes if c.run == "@fleet"]
    assert len(fleet) == 4  # two fleet incidents, firing and resolved, recorded and replayed
    # all 4 users of rm-1 must stall: its fleet incident opens later, or not at all
    changed = {(c.kind, c.subject_text, c.state) for c in stricter.changes if c.kind != "same"}
    assert changed
    assert all(subject == "dep:reward@rm-1:8000" for _, subject, _ in changed)
    assert [c for c in one.changes if c.run == "@fleet"] == []
    assert one.fleet == []

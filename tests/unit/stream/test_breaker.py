"""The circuit breaker in the engine: alerts carry their rule's `action`, `run.resumed` lifts
the alerts firing now (all, or one rule's), a resolution and a new firing undo the lift, the
run view is what the guard reads, and all of it survives a checkpoint."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import decoded, make_engine, make_event

from runwatch.stream import checkpoint
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import ConfigError, InvalidEvent
from runwatch.stream.live import LiveDriver

T0 = 1_700_000_000.0


def rewards(engine: Engine, steps: range, mean: float, run: str = "r1") -> list[Any]:
    out = []
    for s in steps:
        out += engine.apply(decoded(make_event("reward", T0 + s, run=run, step=s, mean=mean)))
    return out


def nan_metric(engine: Engine, step: int) -> list[Any]:
    event = make_event("step.metrics", T0 + step, step=step, metrics={"loss": float("nan")})
    return engine.apply(decoded(event))


def resume(engine: Engine, ts: float, run: str = "r1", **fields: Any) -> None:
    assert engine.apply(decoded(make_event("run.resumed", ts, run=run, component="operator",
                                           **fields))) == []  # fmt: skip


def paused_by(engine: Engine, run: str = "r1") -> list[tuple[str, Any]]:
    view = engine.run_view(run)
    assert view is not None
    return [(a.rule, a.action) for a in view.alerts]


def test_alerts_carry_the_configured_action_and_the_view_lists_what_fires() -> None:
    engine = make_engine({"zero_reward": {"steps": 3, "action": "pause"},
                          "non_finite_metric": {"action": "stop"}})  # fmt: skip
    engine.apply(decoded(make_event("run.started", T0)))
    fired = rewards(engine, range(3), 0.0)
    assert [(a.rule, a.action) for a in fired] == [("zero_reward", "pause")]
    assert fired[0].to_dict()["action"] == "pause"
    nan_metric(engine, 3)
    assert sorted(paused_by(engine)) == [("non_finite_metric", "stop"), ("zero_reward", "pause")]
    assert engine.run_view("nobody") is None


def test_a_rule_without_an_action_has_none_and_no_field_on_its_alerts() -> None:
    engine = make_engine({"zero_reward": {"steps": 3}})
    fired = rewards(engine, range(3), 0.0)
    assert fired[0].action is None
    assert "action" not in fired[0].to_dict()
    assert paused_by(engine) == [("zero_reward", None)]  # the guard's own list decides


def test_resume_lifts_what_fires_now_and_a_new_firing_pauses_again() -> None:
    engine = make_engine({"zero_reward": {"steps": 3, "action": "pause"}})
    rewards(engine, range(3), 0.0)
    resume(engine, T0 + 3, by="alice")
    view = engine.run_view("r1")
    assert view is not None
    assert view.to_dict() == {"v": 1, "run": "r1", "ts": T0 + 3, "alerts": [], "lifted": 1,
                              "resumed": {"ts": T0 + 3, "by": "alice", "rule": None}}  # fmt: skip
    rewards(engine, range(3, 6), 0.0)  # the same alert goes on firing: still lifted
    assert paused_by(engine) == []
    resolved = rewards(engine, range(6, 7), 1.0)
    assert [a.state for a in resolved] == ["resolved"]
    view = engine.run_view("r1")
    assert view is not None
    assert view.lifted == 0
    rewards(engine, range(7, 10), 0.0)  # a new firing: a new alert, which pauses
    assert paused_by(engine) == [("zero_reward", "pause")]


def test_resume_of_one_rule_leaves_the_others() -> None:
    engine = make_engine({"zero_reward": {"steps": 3, "action": "pause"},
                          "non_finite_metric": {"action": "stop"}})  # fmt: skip
    rewards(engine, range(3), 0.0)
    nan_metric(engine, 3)
    resume(engine, T0 + 4, rule="zero_reward")
    assert paused_by(engine) == [("non_finite_metric", "stop")]


def test_resume_of_a_run_not_tracked_creates_nothing() -> None:
    engine = make_engine()
    resume(engine, T0, run="ghost")
    assert "ghost" not in engine.runs


def test_the_views_that_changed_are_taken_once_each() -> None:
    engine = make_engine({"zero_reward": {"steps": 3}})
    engine.views_changed = set()
    rewards(engine, range(2), 0.0, run="a")
    rewards(engine, range(3), 1.0, run="b")
    assert engine.take_run_views() == []  # no transition, no resume
    rewards(engine, range(2, 3), 0.0, run="a")
    assert [v.run for v in engine.take_run_views()] == ["a"]
    assert engine.take_run_views() == []
    resume(engine, T0 + 9, run="b")
    views = engine.take_run_views()
    assert [(v.run, v.resumed.by if v.resumed else "") for v in views] == [("b", None)]


def test_lifts_survive_a_checkpoint() -> None:
    config = RulesConfig.from_mapping({"rules": {"zero_reward": {"steps": 3, "action": "pause"}}})
    driver = LiveDriver(config, topic="t")
    rewards(driver.engine, range(3), 0.0)
    resume(driver.engine, T0 + 3, by="bob")
    data = checkpoint.dump(driver, {"offset": 1})
    fresh = LiveDriver(config, topic="t")
    checkpoint.load(data, fresh)
    assert fresh.engine.run_view("r1") == driver.engine.run_view("r1")
    rewards(fresh.engine, range(3, 5), 0.0)
    assert paused_by(fresh.engine) == []


def test_action_is_checked_in_the_config_and_per_run() -> None:
    with pytest.raises(ConfigError, match=r"rules.zero_reward.action"):
        RulesConfig.from_mapping({"rules": {"zero_reward": {"action": "halt"}}})
    engine = make_engine()
    bad = make_event("run.started", T0, config={"zero_reward": {"action": "explode"}})
    with pytest.raises(InvalidEvent, match=r"config\.zero_reward\.action"):
        engine.apply(decoded(bad))
    engine.apply(decoded(make_event("run.started", T0, config={"zero_reward": {"action": "stop"}})))
    rewards(engine, range(5), 0.0)
    assert paused_by(engine) == [("zero_reward", "stop")]


def test_a_custom_rule_takes_an_action_too() -> None:
    engine = make_engine(custom=[{"id": "loss_high", "type": "metric", "metric": "loss",
                                  "op": ">", "value": 10.0, "for_steps": 1,
                                  "action": "pause"}])  # fmt: skip
    event = make_event("step.metrics", T0, step=1, metrics={"loss": 11.0})
    assert [(a.rule, a.action) for a in engine.apply(decoded(event))] == [("loss_high", "pause")]

"""Rule configuration: the TOML file (contract §6) and per-run `run.started.config`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import decoded, feed, make_engine, make_event
from pydantic import ValidationError

from runwatch import configfile
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import ConfigError, InvalidEvent
from runwatch.stream.params_check import checked, quick
from runwatch.stream.rules import BUILTIN_RULES
from runwatch.stream.rules.base import dumped
from runwatch.stream.rules.custom_absent import AbsentRule
from runwatch.stream.rules.custom_metric import MetricThresholdRule

#: The example of contract §6, verbatim.
CONTRACT_EXAMPLE = """\
[rules.zero_reward]
steps = 10

[rules.stuck_progress.stall_after]
"Training Progress" = 14400

[[rules.custom]]
id = "grad_norm_high"
type = "metric"          # a step metric compared with a value for some consecutive steps
metric = "actor/grad_norm"
op = ">"                 # one of < <= > >= == !=
value = 100.0
for_steps = 3
severity = "warning"

[[rules.custom]]
id = "no_step_in_3h"
type = "absent"          # no event of `kind` from `component` for `for` seconds while the run is live
kind = "step.done"
component = "trainer"
for = 10800
severity = "warning"
"""  # noqa: E501

BUILTIN_IDS = [r.id for r in BUILTIN_RULES]
METRIC = {"id": "m", "type": "metric", "metric": "loss", "op": ">", "value": 1.0}
ABSENT = {"id": "a", "type": "absent", "kind": "step.done", "component": "trainer", "for": 60}


def load(tmp_path: Path, text: str) -> RulesConfig:
    path = tmp_path / "runwatch.toml"
    path.write_text(text, encoding="utf-8")
    return configfile.rules(path)


def config_error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        RulesConfig.from_mapping(data)
    return str(info.value)


# --- defaults and the contract's example ---------------------------------------------------------


def test_defaults_are_the_rules_own() -> None:
    """The defaults themselves are held to docs/contract.md by tests/unit/test_rule_docs.py."""
    rules = RulesConfig.default().by_id()
    assert list(rules) == BUILTIN_IDS
    for rule in rules.values():
        assert rule.params == type(rule.params)()
        # every rule takes the circuit breaker's `action` (unset) and `enabled` (on)
        assert (rule.params.action, rule.params.enabled) == (None, True)


def test_defaults_built_without_validation_are_what_validation_gives() -> None:
    """A rule without a table of its own gets its model's defaults unvalidated (start-up
    builds no validator for them): each default must already be what validating it gives,
    down to the type (a `Seconds` written `1800` would stay an int)."""
    for rule in RulesConfig.default().rules:
        validated = checked(type(rule.params), {})
        assert rule.params == validated
        for name in validated.__struct_fields__:
            made, value = getattr(rule.params, name), getattr(validated, name)
            assert (type(made), made) == (type(value), value), f"{rule.rule_id}.{name}"


@pytest.mark.parametrize("enabled", [False, True])
def test_a_rule_only_switched_is_built_as_validation_builds_it(enabled: bool) -> None:
    """A table that only turns a rule on or off (`enabled = false`) is built unvalidated
    too: the same parameters, and the same keys set, as validating the table gives."""
    tables = {rule_id: {"enabled": enabled} for rule_id in BUILTIN_IDS}
    for rule in RulesConfig.from_mapping({"rules": tables}).rules:
        validated = checked(type(rule.params), {"enabled": enabled})
        assert rule.params == validated, rule.rule_id
        assert rule.params.enabled is enabled
        assert dumped(rule.params) == dumped(validated)


def test_every_parameter_set_as_written_is_taken_back() -> None:
    """The checking model is derived from each rule's record (`params_check`): a table that
    sets every parameter to what the record holds gives the record back, the names a config
    uses (`for`) included, and every key it does not know is refused by name."""
    for rule in RulesConfig.from_mapping({"rules": {"custom": [METRIC, ABSENT]}}).rules:
        table = dumped(rule.params)
        assert checked(type(rule.params), table) == rule.params, rule.rule_id
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            checked(type(rule.params), {**table, "nope": 1})


#: values of every type a table may give a parameter, the awkward ones included
GRID: list[Any] = [0, 1, -1, 2, 3.0, 0.5, 1.5, -0.0, math.nan, math.inf, -math.inf, True,
                   False, None, "x", "3", "a\n", [], ["a"], ["x\n"], [1], {}, {"a": 1.0},
                   {"a": 0}, {"a\n": 1.0}, 2**70, "pause", "notify", "bogus"]  # fmt: skip


def test_the_quick_check_takes_nothing_the_full_one_refuses() -> None:
    """`quick` (msgspec, no pydantic) reads a table into the record; where it takes one,
    pydantic's check (`checked`, what words a refusal) takes it too and makes the same
    record: every parameter of every rule, set to each value of `GRID`, and a key no rule
    has."""
    rules = RulesConfig.from_mapping({"rules": {"custom": [METRIC, ABSENT]}}).rules
    for rule in rules:
        kind, table = type(rule.params), dumped(rule.params)
        assert quick(kind, {**table, "nope": 1}) is None
        for name in [f.encode_name for f in msgspec.structs.fields(kind)]:
            for value in GRID:
                made = quick(kind, {**table, name: value})
                if made is None:
                    continue
                full = checked(kind, {**table, name: value})  # (raises if it refuses)
                assert msgspec.json.encode(made) == msgspec.json.encode(full), (name, value)


def test_the_contract_example_loads(tmp_path: Path) -> None:
    rules = load(tmp_path, CONTRACT_EXAMPLE).by_id()
    assert list(rules) == [*BUILTIN_IDS, "grad_norm_high", "no_step_in_3h"]
    assert rules["zero_reward"].params.steps == 10
    assert rules["stuck_progress"].params.stall_after == {"Training Progress": 14400.0}
    assert rules["stuck_progress"].params.min_stall == 300.0  # the rest stays default
    grad = rules["grad_norm_high"]
    assert isinstance(grad, MetricThresholdRule)
    assert (grad.params.metric, grad.params.op, grad.params.value) == ("actor/grad_norm", ">", 100)
    assert (grad.params.for_steps, grad.severity_of(grad.params)) == (3, "warning")
    absent = rules["no_step_in_3h"]
    assert isinstance(absent, AbsentRule)
    assert (absent.params.kind, absent.params.component, absent.params.for_) == (
        "step.done",
        "trainer",
        10800.0,
    )


def test_the_contract_example_drives_the_engine(tmp_path: Path) -> None:
    engine = Engine(load(tmp_path, CONTRACT_EXAMPLE))
    events = [make_event("reward", 10.0 * s, step=s, mean=0.0) for s in range(1, 10)]
    assert [a.rule for a in feed(engine, events)] == []  # steps = 10 now
    assert [a.rule for a in feed(engine, [make_event("reward", 100, step=10, mean=0.0)])] == [
        "zero_reward"
    ]


def test_other_top_level_sections_are_ignored() -> None:
    config = RulesConfig.from_mapping({"kafka": {"bootstrap": "x:9092"}, "slack": {}})
    assert [r.rule_id for r in config.rules] == BUILTIN_IDS


# --- errors name the bad key ---------------------------------------------------------------------


def test_unknown_rule_id() -> None:
    text = config_error({"rules": {"zero_rewards": {"steps": 3}}})
    assert text.startswith("rules.zero_rewards: no such rule")
    assert "zero_reward" in text  # lists the real ones


def test_unknown_param() -> None:
    assert config_error({"rules": {"zero_reward": {"step": 3}}}) == (
        "rules.zero_reward.step: unknown key (did you mean steps?)"
    )


@pytest.mark.parametrize(
    ("rule", "param", "value"),
    [
        ("zero_reward", "steps", "ten"),
        ("zero_reward", "steps", 2.5),
        ("zero_reward", "steps", 0),
        ("zero_reward", "reward_keys", "reward"),
        ("heartbeat_lost", "timeout", -1),
        ("heartbeat_lost", "timeout", [60]),
        ("inference_idle_with_pending", "idle_for", 0),
        ("idle_gap_growing", "steps", 1),
        ("stuck_progress", "stall_after", 5),
        ("zero_reward", "enabled", 0),  # strict: a bool, and the switch alone is checked too
        ("ranks_stalled", "enabled", "false"),
    ],
)
def test_wrong_type_or_range(rule: str, param: str, value: Any) -> None:
    assert config_error({"rules": {rule: {param: value}}}).startswith(f"rules.{rule}.{param}")


def test_nested_param_errors_name_the_nested_key() -> None:
    text = config_error({"rules": {"stuck_progress": {"stall_after": {"bar": "soon"}}}})
    assert text.startswith("rules.stuck_progress.stall_after.bar:")


def test_a_rule_section_that_is_not_a_table() -> None:
    assert config_error({"rules": {"zero_reward": 5}}) == (
        "rules.zero_reward: expected a table of parameters, got int"
    )


def test_custom_rules_must_be_an_array_of_tables() -> None:
    assert config_error({"rules": {"custom": METRIC}}).startswith("rules.custom:")
    assert config_error({"rules": {"custom": [METRIC, 3]}}).startswith("rules.custom[1]:")


@pytest.mark.parametrize("kind", ["threshold", None, 3])
def test_bad_custom_type(kind: Any) -> None:
    spec = {**METRIC, "type": kind}
    if kind is None:
        del spec["type"]
    text = config_error({"rules": {"custom": [spec]}})
    assert text.startswith("rules.custom[0].type: must be one of absent, metric")


def test_duplicate_custom_id() -> None:
    text = config_error({"rules": {"custom": [ABSENT, {**METRIC, "id": "a"}]}})
    assert text == "rules.custom[1].id: 'a' is already a rule id"


def test_custom_id_may_not_shadow_a_builtin() -> None:
    text = config_error({"rules": {"custom": [{**METRIC, "id": "zero_reward"}]}})
    assert text == "rules.custom[0].id: 'zero_reward' is already a rule id"


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({**METRIC, "op": "=~"}, "rules.custom[0].op"),
        ({**METRIC, "value": "high"}, "rules.custom[0].value"),
        ({**METRIC, "for_steps": 0}, "rules.custom[0].for_steps"),
        ({**METRIC, "severity": "fatal"}, "rules.custom[0].severity"),
        ({**METRIC, "metrc": "loss"}, "rules.custom[0].metrc"),
        ({k: v for k, v in METRIC.items() if k != "metric"}, "rules.custom[0].metric"),
        ({k: v for k, v in ABSENT.items() if k != "for"}, "rules.custom[0].for"),
        ({**ABSENT, "for": -5}, "rules.custom[0].for"),
        ({k: v for k, v in ABSENT.items() if k != "kind"}, "rules.custom[0].kind"),
    ],
)
def test_bad_custom_params(spec: dict[str, Any], where: str) -> None:
    assert config_error({"rules": {"custom": [spec]}}).startswith(where + ":")


def test_load_names_the_file_and_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"runwatch\.toml:2: rules\.zero_reward\.steps"):
        load(tmp_path, "[rules.zero_reward]\nsteps = 0\n")


def test_load_rejects_invalid_toml_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, "[rules.zero_reward\nsteps = 3\n")
    with pytest.raises(ConfigError, match="no such config file"):
        configfile.rules(tmp_path / "missing.toml")


# --- per run: run.started.config -----------------------------------------------------------------


def test_run_params_merge_over_the_global_ones() -> None:
    config = RulesConfig.from_mapping({"rules": {"zero_reward": {"epsilon": 0.01}}})
    params = config.run_params({"zero_reward": {"steps": 10}})
    assert list(params) == ["zero_reward"]
    assert (params["zero_reward"].steps, params["zero_reward"].epsilon) == (10, 0.01)
    assert config.run_params(None) == {}
    assert config.run_params({}) == {}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"zero_rewards": {"steps": 3}}, "config.zero_rewards: no such rule"),
        (
            {"zero_reward": {"step": 3}},
            "config.zero_reward.step: unknown key (did you mean steps?)",
        ),
        ({"zero_reward": {"steps": "many"}}, "config.zero_reward.steps: Input should be"),
        ({"zero_reward": {"steps": 0}}, "config.zero_reward.steps: Input should be greater"),
        ({"heartbeat_lost": {"timeout": None}}, "config.heartbeat_lost.timeout:"),
    ],
)
def test_bad_run_params_name_the_key(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        RulesConfig.default().run_params(config)
    assert str(info.value).startswith(message)


def test_a_bad_run_started_config_is_an_invalid_event_that_changes_nothing() -> None:
    engine = make_engine()
    feed(engine, [make_event("heartbeat", 10), make_event("reward", 11, step=1, mean=0.0)])
    tracked = engine.runs["r1"]
    before = (engine.now, tracked.state.events, tracked.state.clock, dict(tracked.overrides))
    bad = make_event("run.started", 20, config={"zero_reward": {"steps": -3}})
    with pytest.raises(InvalidEvent) as info:
        engine.apply(decoded(bad))
    assert info.value.reason.startswith("run.started config.zero_reward.steps:")
    assert (
        engine.now,
        tracked.state.events,
        tracked.state.clock,
        dict(tracked.overrides),
    ) == before
    assert tracked.state.started_ts is None
    assert bad["id"] not in engine.seen
    # a run never seen before is not created by a bad start either
    other = make_event("run.started", 20, run="r2", config={"nope": {}})
    with pytest.raises(InvalidEvent, match=r"config\.nope: no such rule"):
        engine.apply(decoded(other))
    assert "r2" not in engine.runs
    # the corrected event is accepted, and the override takes effect
    good = make_event("run.started", 21, config={"zero_reward": {"steps": 2}})
    alerts = feed(engine, [good, make_event("reward", 22, step=2, mean=0.0)])
    assert [(a.rule, a.ts) for a in alerts] == [("zero_reward", 22.0)]


def test_per_run_overrides_change_what_the_state_keeps() -> None:
    engine = make_engine(custom=[METRIC])
    start = make_event(
        "run.started",
        0,
        config={
            "zero_reward": {"steps": 80, "reward_keys": ["env/ok"]},
            "heartbeat_lost": {"timeout": 15},
            "stuck_progress": {"window": 4},
        },
    )
    feed(engine, [start])
    cfg = engine.runs["r1"].state.config
    assert cfg.keep_steps == 81  # more than the spike rules keep (53)
    assert {"env/ok", "loss"} <= cfg.watched_metrics
    assert "reward" not in cfg.watched_metrics
    assert cfg.heartbeat_timeout == 15
    assert cfg.progress_window == 4


def test_global_config_decides_what_the_state_keeps() -> None:
    config = RulesConfig.from_mapping(
        {"rules": {"idle_gap_growing": {"steps": 70}, "custom": [METRIC, ABSENT]}}
    )
    cfg = config.state_config()
    assert cfg.keep_steps == 71  # more than the spike rules keep (53)
    assert "loss" in cfg.watched_metrics
    assert "critic/score/mean" in cfg.watched_metrics
    assert cfg.watched_arrivals == {("trainer", "step.done")}
    assert cfg.heartbeat_timeout == 60


# --- enabled = false ------------------------------------------------------------------------------


def _zeros(run: str, start: float = 10.0) -> list[dict[str, Any]]:
    return [make_event("reward", start + 10.0 * s, run=run, step=s, mean=0.0) for s in range(8)]


def test_a_rule_turned_off_globally_never_fires_and_is_never_evaluated() -> None:
    engine = make_engine({"zero_reward": {"enabled": False}})
    index = [r.rule_id for r in engine.rules].index("zero_reward")
    assert all(index not in rules for rules in engine._by_kind.values())
    assert [a.rule for a in feed(engine, _zeros("r1"))] == []
    # what it would keep is not kept either
    assert "critic/score/mean" not in engine.runs["r1"].state.config.watched_metrics


def test_a_rule_turned_off_for_one_run_only() -> None:
    engine = make_engine()
    off = make_event("run.started", 0, run="quiet", config={"zero_reward": {"enabled": False}})
    feed(engine, [off, make_event("run.started", 0, run="loud")])
    assert [a.run for a in feed(engine, _zeros("quiet") + _zeros("loud"))] == ["loud"]


def test_a_rule_turned_on_for_one_run_when_off_for_all() -> None:
    engine = make_engine({"zero_reward": {"enabled": False}})
    on = make_event("run.started", 0, run="on", config={"zero_reward": {"enabled": True}})
    feed(engine, [on, make_event("run.started", 0, run="off")])
    assert [a.run for a in feed(engine, _zeros("on") + _zeros("off"))] == ["on"]


def test_turning_a_rule_off_for_a_run_resolves_its_alert() -> None:
    engine = make_engine()
    fired = feed(engine, _zeros("r1"))
    assert [(a.rule, a.state) for a in fired] == [("zero_reward", "firing")]
    off = make_event("run.started", 200, run="r1", config={"zero_reward": {"enabled": False}})
    assert [(a.rule, a.state) for a in feed(engine, [off])] == [("zero_reward", "resolved")]


def test_a_rule_turned_off_survives_a_checkpoint() -> None:
    from runwatch.stream.config import RulesConfig
    from runwatch.stream.engine import Engine

    engine = make_engine()
    feed(engine, [make_event("run.started", 0, config={"zero_reward": {"enabled": False}})])
    again = Engine(RulesConfig.default())
    again.load_state(engine.dump_state())
    assert [a.rule for a in feed(again, _zeros("r1"))] == []

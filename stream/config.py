"""Rule configuration: the TOML file (global) and `run.started.config` (per run).

Both are validated up front with errors that name the bad key, e.g.
``rules.zero_reward.steps: Input should be greater than 0``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runwatch.emitters.events import describe_errors
from runwatch.stream.exceptions import ConfigError
from runwatch.stream.incidents import IncidentGraph
from runwatch.stream.rules import BUILTIN_RULES, CUSTOM_RULE_TYPES, Params, Rule
from runwatch.stream.state.run import StateConfig


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a table of parameters, got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True)
class RulesConfig:
    """Every rule that runs, each with its global parameters."""

    rules: tuple[Rule[Any], ...]

    @classmethod
    def default(cls) -> RulesConfig:
        return cls.from_mapping({})

    @classmethod
    def load_or_default(cls, path: str | Path | None) -> RulesConfig:
        """The config in `path`, or the built-in defaults when no path is given."""
        return cls.load(path) if path else cls.default()

    @classmethod
    def load(cls, path: str | Path) -> RulesConfig:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{p}: no such config file") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"{p}: not valid TOML: {err}") from None
        try:
            return cls.from_mapping(data)
        except ConfigError as err:
            raise ConfigError(f"{p}: {err}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RulesConfig:
        """Build from a parsed config document (other top-level sections are ignored here)."""
        section = _table(data.get("rules", {}), "rules")
        custom_specs = section.pop("custom", [])
        rules: list[Rule[Any]] = []
        for rule_cls in BUILTIN_RULES:
            raw = _table(section.pop(rule_cls.id, {}), f"rules.{rule_cls.id}")
            try:
                params = rule_cls.params_model.model_validate(raw)
            except ValidationError as err:
                raise ConfigError(
                    describe_errors(err, f"rules.{rule_cls.id}", limit=None)
                ) from None
            rules.append(rule_cls(params))
        if section:
            known = ", ".join(sorted(r.id for r in BUILTIN_RULES))
            raise ConfigError(
                f"rules.{sorted(section)[0]}: no such rule (built-in rules: {known}; "
                "custom rules go in [[rules.custom]])"
            )
        if not isinstance(custom_specs, list):
            raise ConfigError("rules.custom: expected an array of tables ([[rules.custom]])")
        ids = {r.rule_id for r in rules}
        for i, spec in enumerate(custom_specs):
            where = f"rules.custom[{i}]"
            spec = _table(spec, where)
            kind = spec.get("type")
            rule_type = CUSTOM_RULE_TYPES.get(kind) if isinstance(kind, str) else None
            if rule_type is None:
                types = ", ".join(sorted(CUSTOM_RULE_TYPES))
                raise ConfigError(f"{where}.type: must be one of {types}, got {kind!r}")
            try:
                params = rule_type.params_model.model_validate(spec)
            except ValidationError as err:
                raise ConfigError(describe_errors(err, where, limit=None)) from None
            rule = rule_type(params)
            if rule.rule_id in ids:
                raise ConfigError(f"{where}.id: {rule.rule_id!r} is already a rule id")
            ids.add(rule.rule_id)
            rules.append(rule)
        for rule in rules:
            unknown = sorted(set(rule.params.explains or ()) - ids)
            if unknown:
                raise ConfigError(f"rules.{rule.rule_id}.explains: no rule {unknown[0]!r}")
        return cls(tuple(rules))

    @functools.cached_property
    def incidents(self) -> IncidentGraph:
        """Which rule's alert explains which: the incidents' grouping and roots."""
        return IncidentGraph({rule.rule_id: rule.explained() for rule in self.rules})

    def by_id(self) -> dict[str, Rule[Any]]:
        return {r.rule_id: r for r in self.rules}

    def run_params(self, config: Mapping[str, Any] | None) -> dict[str, Params]:
        """Parameters for one run: `run.started.config` merged over the global ones.

        Returns only the rules the run overrides; raises ConfigError naming the bad key.
        """
        if not config:
            return {}
        rules = self.by_id()
        out: dict[str, Params] = {}
        for rule_id, raw in config.items():
            where = f"config.{rule_id}"
            rule = rules.get(rule_id)
            if rule is None:
                raise ConfigError(f"{where}: no such rule")
            override = _table(raw, where)
            for fixed in ("explains", *getattr(rule, "fixed_fields", ())):
                if fixed in override and override[fixed] != getattr(rule.params, fixed, None):
                    raise ConfigError(f"{where}.{fixed}: cannot be changed per run")
            merged = {**rule.params.model_dump(by_alias=True), **override}
            try:
                out[rule_id] = rule.parse_params(merged)
            except ValidationError as err:
                raise ConfigError(describe_errors(err, where, limit=None)) from None
        return out

    def state_config(self, overrides: Mapping[str, Params] | None = None) -> StateConfig:
        """What a run's state must keep, given the parameters in force for it."""
        cfg = StateConfig()
        for rule in self.rules:
            params = (overrides or {}).get(rule.rule_id, rule.params)
            if params.enabled:
                cfg = rule.state_needs(params, cfg)
        return cfg

"""Rule configuration: the TOML file (global) and `run.started.config` (per run).

Both are validated up front with errors that name the bad key, e.g.
``rules.zero_reward.steps: Input should be greater than 0``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin

import msgspec

from runwatch.stream.exceptions import ConfigError
from runwatch.stream.incidents import IncidentGraph
from runwatch.stream.params_check import checked, model_of, quick
from runwatch.stream.rules import BUILTIN_RULES, CUSTOM_RULE_TYPES, Params, Rule
from runwatch.stream.rules.base import dumped
from runwatch.stream.state.run import StateConfig
from runwatch.stream.suggest import did_you_mean

if TYPE_CHECKING:  # (pydantic is imported where a table is refused: `params_check`)
    from pydantic import BaseModel, ValidationError

P = TypeVar("P", bound=Params)


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a table of parameters, got {type(value).__name__}",
                          tuple(where.split(".")))  # fmt: skip
    return dict(value)


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that holds the last key of `loc` (list indices and optionals passed)."""
    from pydantic import BaseModel

    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        if part not in fields:
            return None
        kind = fields[part].annotation
        while get_origin(kind) in (list, Union, types.UnionType):
            kind = next((a for a in get_args(kind) if a is not type(None)), None)
        if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            return None
        current = kind
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def dotted(path: tuple[str | int, ...]) -> str:
    """`rules.custom[0].metric`: a key's path as a person writes it."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def invalid(
    err: ValidationError, path: tuple[str | int, ...], model: type[BaseModel]
) -> ConfigError:
    """pydantic's verdict on the table at `path` as one ConfigError that names the bad key
    (an unknown one as such, with the known key it is most like), with its path."""
    from runwatch.emitters.events import describe_errors

    errors = err.errors(include_url=False)
    unknown = next((e for e in errors if e["type"] == "extra_forbidden"), None)
    if unknown is not None:
        loc = tuple(unknown["loc"])
        holder = _model_at(model, loc)
        known = _keys(holder) if holder is not None else []
        hint = did_you_mean(str(loc[-1]), known) or (
            f" (known: {', '.join(known)})" if known else "")  # fmt: skip
        return ConfigError(f"{dotted(path + loc)}: unknown key{hint}", path + loc)
    return ConfigError(
        describe_errors(err, dotted(path), limit=None), path + tuple(errors[0]["loc"])
    )


def unknown_rule(rule_id: str) -> str:
    """`no such rule (did you mean X?)`; the built-in rules listed when none is close."""
    ids = sorted(r.id for r in BUILTIN_RULES)
    hint = did_you_mean(rule_id, ids)
    return f"no such rule{hint}" if hint else f"no such rule (built-in rules: {', '.join(ids)})"


def _params(model: type[P], raw: dict[str, Any], path: tuple[str | int, ...]) -> P:
    """A built-in rule's parameters from its table at `path`. The defaults, and a rule only
    turned on or off (`enabled = false`, nothing else), are the record's own (no rule's
    parameters have a check beyond their fields' bounds): no check at all. Any other table
    is checked (`_checked`)."""
    if not raw:
        return model()
    if raw.keys() == {"enabled"} and type(raw["enabled"]) is bool:
        return model(enabled=raw["enabled"])
    return _checked(model, raw, path)


def _checked(model: type[P], raw: dict[str, Any], path: tuple[str | int, ...]) -> P:
    """`model` from the table at `path`, checked (`params_check`: msgspec, and pydantic
    where msgspec refuses); ConfigError naming the bad key."""
    made = quick(model, raw)
    if made is not None:
        return made
    from pydantic import ValidationError

    try:
        return checked(model, raw)
    except ValidationError as err:
        raise invalid(err, path, model_of(model)) from None


class RulesConfig(msgspec.Struct, frozen=True, dict=True):
    """Every rule that runs, each with its global parameters. (A record made without
    generated code, as `StateConfig`; `dict`: room for its cached `incidents`.)"""

    rules: tuple[Rule[Any], ...]

    @classmethod
    def default(cls) -> RulesConfig:
        return cls.from_mapping({})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RulesConfig:
        """Build from a parsed config document: its `rules` table (the file's other tables
        are checked by `runwatch.configfile`, which reads the file)."""
        section = _table(data.get("rules", {}), "rules")
        custom_specs = section.pop("custom", [])
        rules: list[Rule[Any]] = []
        for rule_cls in BUILTIN_RULES:
            raw = _table(section.pop(rule_cls.id, {}), f"rules.{rule_cls.id}")
            params = _params(rule_cls.params_model, raw, ("rules", rule_cls.id))
            rules.append(rule_cls(params))
        if section:
            bad = sorted(section)[0]
            raise ConfigError(f"rules.{bad}: {unknown_rule(bad)}; custom rules go in "
                              "[[rules.custom]]", ("rules", bad))  # fmt: skip
        if not isinstance(custom_specs, list):
            raise ConfigError("rules.custom: expected an array of tables ([[rules.custom]])",
                              ("rules", "custom"))  # fmt: skip
        ids = {r.rule_id for r in rules}
        for i, spec in enumerate(custom_specs):
            where = f"rules.custom[{i}]"
            spec = _table(spec, where)
            kind = spec.get("type")
            rule_type = CUSTOM_RULE_TYPES.get(kind) if isinstance(kind, str) else None
            if rule_type is None:
                names = ", ".join(sorted(CUSTOM_RULE_TYPES))
                hint = did_you_mean(str(kind), CUSTOM_RULE_TYPES)
                raise ConfigError(f"{where}.type: must be one of {names}, got {kind!r}{hint}",
                                  ("rules", "custom", i, "type"))  # fmt: skip
            params = _checked(rule_type.params_model, spec, ("rules", "custom", i))
            rule = rule_type(params)
            if rule.rule_id in ids:
                raise ConfigError(f"{where}.id: {rule.rule_id!r} is already a rule id",
                                  ("rules", "custom", i, "id"))  # fmt: skip
            ids.add(rule.rule_id)
            rules.append(rule)
        for rule in rules:
            unknown = sorted(set(rule.params.explains or ()) - ids)
            if unknown:
                raise ConfigError(f"rules.{rule.rule_id}.explains: no rule {unknown[0]!r}"
                                  f"{did_you_mean(unknown[0], ids)}",
                                  ("rules", rule.rule_id, "explains"))  # fmt: skip
        return cls(tuple(rules))

    @functools.cached_property
    def incidents(self) -> IncidentGraph:
        """Which rule's alert explains which: the incidents' grouping and roots."""
        return IncidentGraph({rule.rule_id: rule.explained() for rule in self.rules})

    def by_id(self) -> dict[str, Rule[Any]]:
        return {r.rule_id: r for r in self.rules}

    def check_rule_id(self, rule_id: str) -> None:
        """ConfigError naming `rule_id` (and the id most like it) unless it is a rule here."""
        ids = self.by_id()
        if rule_id not in ids:
            raise ConfigError(f"no rule {rule_id!r}{did_you_mean(rule_id, ids)}")

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
                raise ConfigError(f"{where}: no such rule{did_you_mean(rule_id, rules)}")
            override = _table(raw, where)
            for fixed in ("explains", *getattr(rule, "fixed_fields", ())):
                if fixed in override and override[fixed] != getattr(rule.params, fixed, None):
                    raise ConfigError(f"{where}.{fixed}: cannot be changed per run")
            merged = {**dumped(rule.params), **override}
            out[rule_id] = _checked(rule.params_model, merged, ("config", rule_id))
        return out

    def state_config(self, overrides: Mapping[str, Params] | None = None) -> StateConfig:
        """What a run's state must keep, given the parameters in force for it."""
        cfg = StateConfig()
        for rule in self.rules:
            params = (overrides or {}).get(rule.rule_id, rule.params)
            if params.enabled:
                cfg = rule.state_needs(params, cfg)
        return cfg

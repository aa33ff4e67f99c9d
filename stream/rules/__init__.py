"""Built-in and custom alert rules: one module each, pure functions of state and time.

A built-in rule is found, not listed: every `Rule` subclass with an `id` defined in a module
of this package is one (docs/architecture.md, "Adding a rule").
"""

import importlib
import pkgutil
from typing import Any

from runwatch.stream.rules.base import Condition, Description, Params, Rule, Verdict
from runwatch.stream.rules.custom_absent import AbsentRule
from runwatch.stream.rules.custom_metric import MetricThresholdRule

#: The contract's seven rules (section 4), in its order: they are evaluated first, then
#: runwatch's additions (section 7) by id.
CONTRACT_RULES = (
    "inference_idle_with_pending",
    "zero_reward",
    "stuck_progress",
    "heartbeat_lost",
    "ranks_stalled",
    "non_finite_metric",
    "idle_gap_growing",
)


def _order(rule: type[Rule[Any]]) -> tuple[int, str]:
    return (CONTRACT_RULES.index(rule.id), "") if rule.id in CONTRACT_RULES else (99, rule.id)


def _builtin_rules() -> tuple[type[Rule[Any]], ...]:
    """Every built-in rule of this package's modules, in evaluation order; two rules with
    one id are an error at import, not a rule silently shadowed."""
    found: dict[str, type[Rule[Any]]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if not (isinstance(obj, type) and issubclass(obj, Rule) and obj.id):
                continue
            if obj.__module__ == module.__name__ and found.setdefault(obj.id, obj) is not obj:
                first = found[obj.id].__qualname__
                raise TypeError(f"two built-in rules have the id {obj.id!r}: {first} and "
                                f"{obj.__qualname__}")  # fmt: skip
    missing = set(CONTRACT_RULES) - set(found)
    if missing:
        raise TypeError(f"the contract's rules {sorted(missing)} have no module")
    return tuple(sorted(found.values(), key=_order))


#: Every built-in rule, in the order they are evaluated.
BUILTIN_RULES: tuple[type[Rule[Any]], ...] = _builtin_rules()

#: `type` of a `[[rules.custom]]` entry -> its rule class.
CUSTOM_RULE_TYPES: dict[str, type[Rule[Any]]] = {
    "metric": MetricThresholdRule,
    "absent": AbsentRule,
}

__all__ = [
    "BUILTIN_RULES",
    "CUSTOM_RULE_TYPES",
    "Condition",
    "Description",
    "Params",
    "Rule",
    "Verdict",
]

"""Custom rule type `metric`: a step metric compared with a value for some consecutive steps."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Literal

from msgspec.structs import replace

from runwatch.stream.alerts import Severity
from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    PositiveInt,
    Rule,
    RuleId,
    Verdict,
)
from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState, StateConfig

Op = Literal["<", "<=", ">", ">=", "==", "!="]
OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class MetricRuleParams(Params, frozen=True, kw_only=True):
    id: RuleId
    type: Literal["metric"]
    metric: str
    op: Op
    value: float
    for_steps: PositiveInt = 1
    severity: Severity = "warning"
    summary: str | None = None


class MetricThresholdRule(Rule[MetricRuleParams]):
    """Fires when `metric op value` held for `for_steps` reported steps in a row."""

    params_model = MetricRuleParams
    watches = frozenset({"step.metrics"})
    #: what a run may not change through run.started.config
    fixed_fields = ("id", "type", "metric")

    @property
    def rule_id(self) -> str:
        return self.params.id

    def state_needs(self, params: MetricRuleParams, base: StateConfig) -> StateConfig:
        return replace(
            base,
            watched_metrics=base.watched_metrics | {params.metric},
            keep_steps=max(base.keep_steps, params.for_steps + 1),
        )

    def _streak(self, run: RunState, params: MetricRuleParams) -> tuple[float, list[int]]:
        op, value, key = OPS[params.op], params.value, params.metric
        streak = trailing_streak(
            run.steps.recent(run.steps.keep),
            lambda s: s.metrics.get(key),
            lambda v: op(v, value),
        )
        if len(streak.steps) < params.for_steps:
            return 0.0, []
        ripe = streak.steps[params.for_steps - 1].metrics_ts
        return (ripe if ripe is not None else 0.0), [s.number for s in streak.steps]

    def check(self, run: RunState, now: float, params: MetricRuleParams) -> Verdict:
        ripe, numbers = self._streak(run, params)
        if not numbers:
            return QUIET
        first = run.steps.by_number[numbers[0]].metrics_ts
        since = first if first is not None else ripe
        return Verdict((Condition("", since, max(since, ripe)),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: MetricRuleParams
    ) -> Description:
        _, numbers = self._streak(run, params)
        last = run.steps.by_number[numbers[-1]].metrics.get(params.metric) if numbers else None
        text = params.summary or (
            f"{params.metric} {params.op} {params.value:g} for {len(numbers)} steps "
            f"(latest: {last})"
        )
        return Description(
            text,
            {"metric": params.metric, "value": last, "steps": numbers, "threshold": params.value},
        )

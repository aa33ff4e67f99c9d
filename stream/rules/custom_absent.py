"""Custom rule type `absent`: no event of a kind from a component for too long."""

from __future__ import annotations

from typing import Literal

from msgspec import field
from msgspec.structs import replace

from runwatch.stream.alerts import Severity
from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    Rule,
    RuleId,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState, StateConfig


class AbsentRuleParams(Params, frozen=True, kw_only=True):
    id: RuleId
    type: Literal["absent"]
    kind: str
    component: str
    for_: Seconds = field(name="for")
    severity: Severity = "warning"
    summary: str | None = None


class AbsentRule(Rule[AbsentRuleParams]):
    """Fires when `component` sent no `kind` event for `for` seconds while the run is live."""

    params_model = AbsentRuleParams
    fixed_fields = ("id", "type", "kind", "component")
    silence = True

    def __init__(self, params: AbsentRuleParams) -> None:
        super().__init__(params)
        self.watches = frozenset({params.kind, "run.started", "run.finished"})

    @property
    def rule_id(self) -> str:
        return self.params.id

    def state_needs(self, params: AbsentRuleParams, base: StateConfig) -> StateConfig:
        pair = (params.component, params.kind)
        return replace(base, watched_arrivals=base.watched_arrivals | {pair})

    def _last(self, run: RunState, params: AbsentRuleParams) -> float | None:
        return run.last_arrival.get((params.component, params.kind), run.first_ts)

    def check(self, run: RunState, now: float, params: AbsentRuleParams) -> Verdict:
        last = self._last(run, params)
        if run.finished or last is None:
            return QUIET
        return Verdict((Condition("", last, last + params.for_),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: AbsentRuleParams
    ) -> Description:
        seen = (params.component, params.kind) in run.last_arrival
        text = params.summary or (
            f"no {params.kind} from {params.component} for {fmt_duration(now - cond.since)}"
            + ("" if seen else " (none seen in this run)")
        )
        return Description(
            text,
            {"kind": params.kind, "component": params.component, "silent_s": now - cond.since},
        )

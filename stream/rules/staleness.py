"""`staleness_growing`: in asynchronous RL, the rollouts the trainer consumes were generated
by a policy more and more updates old -- inference cannot keep up, or a queue grows -- and
off-policy noise (or dropped samples) rises with it.

The lag is the first of `lag_keys` the run logs in `step.metrics`, in policy versions (steps)
behind the one trained: PRIME-RL's `off_policy/mean` (src/prime_rl/orchestrator/
orchestrator.py at 559b447: the shipped cohort's staleness, in-flight and in-queue time
included; it drops episodes past its `max_off_policy_steps`, 8 by default, so a lag half way
there is worth a look). It fires when the lag is at least `max_lag` for `steps` reporting
steps in a row, and resolves at the first step below.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, field
from msgspec.structs import replace

from runwatch.stream.rules.base import (
    Condition,
    Description,
    Params,
    PositiveFloat,
    PositiveInt,
    Rule,
    Verdict,
)
from runwatch.stream.rules.levels import held_at_least, values_of
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step

LAG_KEYS = ("off_policy/mean",)


class StalenessParams(Params, frozen=True):
    lag_keys: Annotated[list[str], Meta(min_length=1)] = field(
        default_factory=lambda: list(LAG_KEYS)
    )
    max_lag: PositiveFloat = 4.0
    steps: PositiveInt = 5


class StalenessGrowingRule(Rule[StalenessParams]):
    id = "staleness_growing"
    severity = "warning"
    fires_when = (
        "async RL: the consumed rollouts are at least `max_lag` ({max_lag:g}) policy versions"
        " old (`off_policy/mean`, PRIME-RL; `lag_keys` adds yours) for `steps` ({steps}) "
        "steps in a row"
    )
    params_model = StalenessParams
    watches = frozenset({"step.metrics"})

    def state_needs(self, params: StalenessParams, base: StateConfig) -> StateConfig:
        return replace(base, watched_metrics=base.watched_metrics | frozenset(params.lag_keys),
                       keep_steps=max(base.keep_steps, params.steps + 1))  # fmt: skip

    def _stale(self, run: RunState, params: StalenessParams) -> tuple[str, tuple[Step, ...]] | None:
        found = held_at_least(run, params.lag_keys, params.max_lag)
        return found if found is not None and len(found[1]) >= params.steps else None

    def check(self, run: RunState, now: float, params: StalenessParams) -> Verdict:
        found = self._stale(run, params)
        if found is None:
            return Verdict()
        key, steps = found
        since = steps[0].metrics_ts if steps[0].metrics_ts is not None else now
        fire_at = steps[params.steps - 1].metrics_ts
        return Verdict((Condition(key, since, fire_at or now, key),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: StalenessParams
    ) -> Description:
        found = self._stale(run, params)
        if found is None:
            return Description(f"rollouts are stale ({cond.key})", {})
        key, steps = found
        return Description(
            f"rollouts are {steps[-1].metrics.get(key):.3g} policy versions old ({key}), at least "
            f"{params.max_lag:g} for {len(steps)} steps ({steps[0].number}–{steps[-1].number}): "
            "inference is not keeping up with training",
            {"metric": key, "first_step": steps[0].number, "count": len(steps),
             "series": values_of(steps, key)},
        )  # fmt: skip

"""`entropy_collapse`: the policy's entropy fell to a small fraction of its own early-training
level and stays there -- the policy has stopped exploring (mode collapse), and what training
goes on to do is sharpen the few answers it already gives.

The early level is the median of the first `early_steps` values the run logged (kept for the
run's life: the state keeps them apart from its recent steps). It fires when the latest
`steps` reporting steps all are below `fraction` of it; a dip for a few steps does not. The
metric is the first of `metric_keys` the run logs: verl's `actor/entropy`
(verl/workers/actor/dp_actor.py at b178a3c), OpenRLHF's `entropy_loss` -- the entropy
itself, subtracted times entropy_coef from the loss; `train/entropy_loss` in its W&B logs
(openrlhf/trainer/ray/ppo_actor.py at 3c3be62), AReaL's `ppo_actor/update/entropy/avg`
(areal/trainer/ppo/actor.py at 4aef98d), PRIME-RL's `entropy/all/mean`
(src/prime_rl/trainer/rl/train.py at 559b447), TRL's `entropy` (trl/trainer/grpo_trainer.py,
1.16.0).
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, field

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    PositiveInt,
    Rule,
    Verdict,
)
from runwatch.stream.rules.levels import keeping_early, sunk, values_of
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step

ENTROPY_KEYS = ("actor/entropy", "train/entropy_loss", "entropy_loss",
                "ppo_actor/update/entropy/avg", "entropy/all/mean", "entropy")  # fmt: skip


class EntropyParams(Params, frozen=True):
    metric_keys: Annotated[list[str], Meta(min_length=1)] = field(
        default_factory=lambda: list(ENTROPY_KEYS)
    )
    early_steps: PositiveInt = 20
    # 0.15: healthy runs settle at 50-70% of their early entropy; a fall to 10-15% that
    # stays is a collapse a person would call, and 0.1 let it pass (issue 32)
    fraction: Annotated[float, Meta(gt=0, lt=1)] = 0.15
    steps: PositiveInt = 10


class EntropyCollapseRule(Rule[EntropyParams]):
    id = "entropy_collapse"
    severity = "warning"
    fires_when = (
        "the policy entropy (`actor/entropy`, `train/entropy_loss`, ...) below `fraction` "
        "({fraction:.0%}) of its early-training level (the median of its first `early_steps`,"
        " {early_steps}, values) for `steps` ({steps}) steps in a row"
    )
    params_model = EntropyParams
    watches = frozenset({"step.metrics"})

    def state_needs(self, params: EntropyParams, base: StateConfig) -> StateConfig:
        return keeping_early(base, params.metric_keys, params.early_steps, params.steps + 1)

    def _collapse(
        self, run: RunState, params: EntropyParams
    ) -> tuple[str, float, tuple[Step, ...]] | None:
        """(key, early level, the low steps) when entropy sits below the fraction."""
        found = sunk(run, params.metric_keys, params.early_steps, params.fraction)
        if found is None or len(found[2]) < params.steps:
            return None
        return found

    def check(self, run: RunState, now: float, params: EntropyParams) -> Verdict:
        found = self._collapse(run, params)
        if found is None:
            return QUIET
        key, _, low = found
        since = low[0].metrics_ts if low[0].metrics_ts is not None else now
        fire_at = low[params.steps - 1].metrics_ts
        return Verdict((Condition(key, since, fire_at if fire_at is not None else now, key),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: EntropyParams
    ) -> Description:
        found = self._collapse(run, params)
        if found is None:  # described at the moment it fired: always found then
            return Description(f"policy entropy ({cond.key}) collapsed", {})
        key, level, low = found
        latest = low[-1].metrics.get(key)
        return Description(
            f"policy entropy ({key}) has been below {params.fraction:.0%} of its early-training "
            f"level for {len(low)} steps ({low[0].number}–{low[-1].number}): {latest:.4g} "
            f"against {level:.4g} early on -- the policy has stopped exploring",
            {
                "metric": key,
                "early_level": level,
                "first_step": low[0].number,
                "count": len(low),
                "series": values_of(low, key),
            },
        )

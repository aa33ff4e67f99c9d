"""`zero_reward`: the step reward is exactly zero for many steps in a row.

The incident: the SGLang server died at step 188 and training went on with every rollout
failing and reward 0 until step 680.
"""

from __future__ import annotations

from msgspec import field
from msgspec.structs import replace

from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    NonNegativeFloat,
    Params,
    PositiveInt,
    Rule,
    Verdict,
)
from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step


class ZeroRewardParams(Params, frozen=True):
    steps: PositiveInt = 5
    epsilon: NonNegativeFloat = 1e-9
    reward_keys: list[str] = field(default_factory=lambda: list(DEFAULT_REWARD_KEYS))


def reward_ts(step: Step) -> float:
    """When the step's reward became known."""
    ts = step.reward_ts if step.reward_mean is not None else step.metrics_ts
    return ts if ts is not None else float("-inf")


class ZeroRewardRule(Rule[ZeroRewardParams]):
    id = "zero_reward"
    severity = "critical"
    fires_when = "step reward exactly 0 for `steps` ({steps}) steps in a row"
    params_model = ZeroRewardParams
    watches = frozenset({"reward", "step.metrics"})
    explains = frozenset({"degenerate_groups"})

    def state_needs(self, params: ZeroRewardParams, base: StateConfig) -> StateConfig:
        return replace(
            base,
            watched_metrics=base.watched_metrics | frozenset(params.reward_keys),
            keep_steps=max(base.keep_steps, params.steps + 1),
        )

    def _streak(self, run: RunState, params: ZeroRewardParams) -> tuple[Step, ...]:
        keys = params.reward_keys
        eps = params.epsilon
        streak = trailing_streak(
            run.steps.recent(run.steps.keep),
            lambda s: s.reward(keys),
            lambda r: abs(r) <= eps,
        )
        return streak.steps

    def check(self, run: RunState, now: float, params: ZeroRewardParams) -> Verdict:
        zeros = self._streak(run, params)
        if len(zeros) < params.steps:
            return QUIET
        since = reward_ts(zeros[0])
        fire_at = max(since, reward_ts(zeros[params.steps - 1]))
        return Verdict((Condition("", since, fire_at),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: ZeroRewardParams
    ) -> Description:
        zeros = self._streak(run, params)
        first, last = zeros[0].number, zeros[-1].number
        return Description(
            f"reward has been 0 for {len(zeros)} consecutive steps ({first}–{last}): "
            "rollouts may be failing (is the inference server alive?)",
            {"first_zero_step": first, "last_zero_step": last, "count": len(zeros)},
        )

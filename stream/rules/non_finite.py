"""`non_finite_metric`: a logged metric or the step reward is NaN or infinite."""

from __future__ import annotations

from runwatch.stream.rules.base import QUIET, Condition, Description, Params, Rule, Verdict
from runwatch.stream.state.run import RunState
from runwatch.stream.state.steps import Step


class NonFiniteParams(Params, frozen=True):
    pass


def _latest_bad(run: RunState) -> Step | None:
    """The latest step with a non-finite value, unless a later step reported all finite."""
    for step in reversed(run.steps.recent(run.steps.keep)):
        if step.nonfinite:
            return step
        if step.metrics_ts is not None or step.reward_ts is not None:
            return None
    return None


class NonFiniteMetricRule(Rule[NonFiniteParams]):
    id = "non_finite_metric"
    severity = "critical"
    fires_when = "a logged metric or the reward is NaN or infinite"
    params_model = NonFiniteParams
    watches = frozenset({"step.metrics", "reward"})
    explains = frozenset(
        {
            "grad_norm_spike",
            "kl_spike",
            "entropy_collapse",
            "response_length_drift",
        }
    )

    def check(self, run: RunState, now: float, params: NonFiniteParams) -> Verdict:
        step = _latest_bad(run)
        if step is None:
            return QUIET
        ts = step.nonfinite_ts
        assert ts is not None  # set together with `nonfinite`
        return Verdict((Condition("", ts, ts),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: NonFiniteParams
    ) -> Description:
        step = _latest_bad(run)
        keys = list(step.nonfinite or ()) if step is not None else []
        number = step.number if step is not None else None
        return Description(
            f"non-finite value at step {number}: {', '.join(keys)}",
            {"step": number, "keys": keys},
        )

"""`kl_spike` and `grad_norm_spike`: a training metric far above its own robust band for
several steps in a row -- the policy is running away, or the optimizer is blowing up.

The band is the run's own recent past: the median and the median absolute deviation (MAD)
of the `window` steps before the latest `steps`, so one spike in the baseline moves it
little (a mean and a standard deviation would be poisoned by it). A step is "far above" when
its robust z-score, (value - median) / (1.4826 × MAD), exceeds `z` and the value is also at
least `min_rise` (a fraction) above the median -- a series so steady that its MAD is ~0
does not fire on noise. It fires when the latest `steps` steps all are; one-off spikes (RL
gradients have many) do not. Nothing fires before `warmup` steps have reported the metric.
The metric is the first of `metric_keys` the run logs (each framework names it its own way).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import Meta, field
from msgspec.structs import replace

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    PositiveFloat,
    PositiveInt,
    Rule,
    Verdict,
)
from runwatch.stream.rules.levels import spiking, values_of
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step

#: Per framework, from their own source: verl (verl/trainer/ppo/core_algos.py,
#: verl/workers/actor/dp_actor.py at b178a3c), OpenRLHF (openrlhf/trainer/ray/ppo_actor.py
#: status keys, logged as train/<key> by openrlhf/utils/logging_utils.py at 3c3be62), AReaL
#: (areal/trainer/ppo/actor.py: stats_tracker scopes ppo_actor/update, `stat` keys exported
#: with /avg, areal/utils/stats_tracker.py at 4aef98d), PRIME-RL
#: (src/prime_rl/trainer/rl/train.py, its W&B overview's stability metrics at 559b447; its KL
#: is the trainer-inference mismatch, whose spike is the same instability).
KL_KEYS = ("actor/ppo_kl", "actor/kl_loss", "train/kl", "ppo_actor/update/approx_kl/avg",
           "mismatch_kl/all/mean", "kl")  # fmt: skip
GRAD_NORM_KEYS = ("actor/grad_norm", "train/actor_grad_norm", "actor_grad_norm",
                  "ppo_actor/update/grad_norm", "optim/grad_norm", "grad_norm")  # fmt: skip


class SpikeParams(Params, frozen=True, kw_only=True):
    metric_keys: Annotated[list[str], Meta(min_length=1)]
    steps: PositiveInt = 3
    window: PositiveInt = 50
    warmup: PositiveInt = 20
    z: PositiveFloat = 8.0
    min_rise: PositiveFloat = 0.5


class KlSpikeParams(SpikeParams, frozen=True):
    metric_keys: Annotated[list[str], Meta(min_length=1)] = field(
        default_factory=lambda: list(KL_KEYS)
    )


class GradNormSpikeParams(SpikeParams, frozen=True):
    metric_keys: Annotated[list[str], Meta(min_length=1)] = field(
        default_factory=lambda: list(GRAD_NORM_KEYS)
    )


class MetricSpikeRule(Rule[SpikeParams]):
    """The rule for one kind of metric; subclasses name it and its keys."""

    severity = "warning"
    watches = frozenset({"step.metrics"})
    what: ClassVar[str] = ""

    def state_needs(self, params: SpikeParams, base: StateConfig) -> StateConfig:
        return replace(
            base,
            watched_metrics=base.watched_metrics | frozenset(params.metric_keys),
            # the baseline reads only the metric, and the latest `steps` when it came
            metric_steps=max(base.metric_steps, params.window + params.steps),
        )

    def _series(
        self, run: RunState, params: SpikeParams
    ) -> tuple[str, list[Step], list[float]] | None:
        """The metric the run logs, the steps that reported it and their values, oldest
        first."""
        logged = run.steps.logged
        keys = [key for key in params.metric_keys if key in logged]
        if not keys:  # (most runs log one of the keys, or none)
            return None
        steps = run.steps.recent(params.window + params.steps)
        for key in keys:
            pairs = [(s, v) for s in steps if (v := s.metrics.get(key)) is not None]
            if pairs:
                return key, [s for s, _ in pairs], [float(v) for _, v in pairs]
        return None

    def _spike(
        self, run: RunState, params: SpikeParams
    ) -> tuple[str, list[Step], float, float] | None:
        """(key, the spiking steps, baseline median, baseline MAD) when the latest `steps`
        steps are all far above the band, else None."""
        found = self._series(run, params)
        if found is None:
            return None
        key, reported, values = found
        p = params
        band = spiking(values, p.steps, p.window, p.warmup, p.z, p.min_rise)
        if band is None:
            return None
        mid, mad = band
        recent = reported[-p.steps :]
        return key, recent, mid, mad

    def check(self, run: RunState, now: float, params: SpikeParams) -> Verdict:
        spike = self._spike(run, params)
        if spike is None:
            return QUIET
        key, recent, _, _ = spike
        since = recent[0].metrics_ts
        since = now if since is None else since
        return Verdict((Condition(key, since, since, key),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: SpikeParams
    ) -> Description:
        spike = self._spike(run, params)
        found = self._series(run, params)
        series = values_of(found[1], found[0], params.steps + 10) if found else {}
        if spike is None:  # described at the moment it fired: always found then
            return Description(f"{self.what} ({cond.key}) far above its usual band", {})
        key, recent, mid, mad = spike
        latest = recent[-1].metrics.get(key)
        return Description(
            f"{self.what} ({key}) has been far above its usual band for {len(recent)} steps "
            f"({recent[0].number}–{recent[-1].number}): {latest:.4g} against a median of "
            f"{mid:.4g}",
            {
                "metric": key,
                "first_step": recent[0].number,
                "median": mid,
                "mad": mad,
                "series": series,
            },
        )


_SPIKE = (
    "{what} far above the run's own robust band (median ± MAD of the last `window`, "
    "{{window}}, steps; robust z > `z`, {{z:g}}, and ≥ {{min_rise:.0%}} above the median) for "
    "`steps` ({{steps}}) steps in a row, after `warmup` ({{warmup}}) steps"
)


class KlSpikeRule(MetricSpikeRule):
    id = "kl_spike"
    what = "KL divergence"
    fires_when = _SPIKE.format(what="the KL (`actor/ppo_kl`, `train/kl`, ...)")
    params_model = KlSpikeParams


class GradNormSpikeRule(MetricSpikeRule):
    id = "grad_norm_spike"
    what = "gradient norm"
    fires_when = _SPIKE.format(
        what="the gradient norm (`actor/grad_norm`, `train/actor_grad_norm`, ...)"
    )
    params_model = GradNormSpikeParams

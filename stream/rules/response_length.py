"""`response_length_drift`: the responses the policy writes collapse toward nothing, or run
into the maximum length -- both mean the reward is being gamed or the policy is degenerating,
and neither shows in the reward for a while.

Two conditions, each with its own subject:
- `collapse`: the mean response length below `collapse_fraction` of its own early-training
  level (the median of its first `early_steps` values) for `steps` steps in a row;
- `clipped`: the fraction of responses cut at the maximum length at least `max_clip_ratio`
  for `steps` steps in a row.
Keys, from the frameworks' own source: verl logs `response_length/mean` and
`response_length/clip_ratio` (verl/trainer/ppo/metric_utils.py at b178a3c); OpenRLHF logs the
mean as `response_length` (`train/response_length` in W&B; openrlhf/trainer/ray/ppo_actor.py
at 3c3be62) and no clip ratio in training; AReaL logs the share of sequences that end
without EOS at the maximum length as `ppo_actor/no_eos_ratios/avg`
(areal/trainer/ppo/actor.py at 4aef98d), a clip ratio, and its `seq_len` counts the prompt
too, so it is not a length key here; TRL's GRPOTrainer logs `completions/mean_length` and
`completions/clipped_ratio`, the share that hit `max_completion_length` without EOS
(trl/trainer/grpo_trainer.py, 1.16.0).
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, field
from msgspec.structs import replace

from runwatch.stream.rules.base import Condition, Description, Params, PositiveInt, Rule, Verdict
from runwatch.stream.rules.levels import held_at_least, keeping_early, sunk, values_of
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step

LENGTH_KEYS = ("response_length/mean", "train/response_length", "response_length",
               "completions/mean_length")  # fmt: skip
CLIP_KEYS = ("response_length/clip_ratio", "ppo_actor/no_eos_ratios/avg",
             "completions/clipped_ratio")  # fmt: skip


class ResponseLengthParams(Params, frozen=True):
    length_keys: Annotated[list[str], Meta(min_length=1)] = field(
        default_factory=lambda: list(LENGTH_KEYS)
    )
    clip_keys: list[str] = field(default_factory=lambda: list(CLIP_KEYS))
    early_steps: PositiveInt = 20
    collapse_fraction: Annotated[float, Meta(gt=0, lt=1)] = 0.2
    max_clip_ratio: Annotated[float, Meta(gt=0, le=1)] = 0.5
    steps: PositiveInt = 10


class ResponseLengthDriftRule(Rule[ResponseLengthParams]):
    id = "response_length_drift"
    severity = "warning"
    fires_when = (
        "the mean response length (`response_length/mean`, `train/response_length`) below "
        "`collapse_fraction` ({collapse_fraction:.0%}) of its early-training level, or the "
        "share cut at the maximum length (`response_length/clip_ratio`) ≥ `max_clip_ratio` "
        "({max_clip_ratio:.0%}), for `steps` ({steps}) steps in a row"
    )
    params_model = ResponseLengthParams
    watches = frozenset({"step.metrics"})

    def state_needs(self, params: ResponseLengthParams, base: StateConfig) -> StateConfig:
        needs = keeping_early(base, params.length_keys, params.early_steps, params.steps + 1)
        return replace(needs, watched_metrics=needs.watched_metrics | frozenset(params.clip_keys))

    def _collapsed(
        self, run: RunState, params: ResponseLengthParams
    ) -> tuple[str, float, tuple[Step, ...]] | None:
        found = sunk(run, params.length_keys, params.early_steps, params.collapse_fraction)
        return found if found is not None and len(found[2]) >= params.steps else None

    def _clipped(
        self, run: RunState, params: ResponseLengthParams
    ) -> tuple[str, tuple[Step, ...]] | None:
        found = held_at_least(run, params.clip_keys, params.max_clip_ratio)
        return found if found is not None and len(found[1]) >= params.steps else None

    def check(self, run: RunState, now: float, params: ResponseLengthParams) -> Verdict:
        held = []
        for subject, steps in (
            ("collapse", (c := self._collapsed(run, params)) and c[2]),
            ("clipped", (k := self._clipped(run, params)) and k[1]),
        ):
            if steps:
                since = steps[0].metrics_ts if steps[0].metrics_ts is not None else now
                fire_at = steps[params.steps - 1].metrics_ts
                held.append(Condition(subject, since, fire_at or now, subject))
        return Verdict(tuple(held))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: ResponseLengthParams
    ) -> Description:
        collapsed, clipped = self._collapsed(run, params), self._clipped(run, params)
        if cond.key == "collapse" and collapsed is not None:
            key, level, low = collapsed
            return Description(
                f"responses have collapsed: {key} below {params.collapse_fraction:.0%} of its "
                f"early-training level for {len(low)} steps ({low[0].number}–{low[-1].number}): "
                f"{low[-1].metrics.get(key):.4g} against {level:.4g} early on",
                {"metric": key, "early_level": level, "first_step": low[0].number,
                 "count": len(low), "series": values_of(low, key)},
            )  # fmt: skip
        if cond.key == "clipped" and clipped is not None:
            key, high = clipped
            return Description(
                f"responses run into the maximum length: {key} at least "
                f"{params.max_clip_ratio:.0%} for {len(high)} steps "
                f"({high[0].number}–{high[-1].number}), {high[-1].metrics.get(key):.0%} now",
                {"metric": key, "first_step": high[0].number, "count": len(high),
                 "series": values_of(high, key)},
            )  # fmt: skip
        return Description(f"response length drift ({cond.key})", {})

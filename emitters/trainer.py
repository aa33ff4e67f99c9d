"""A trainer's metrics dict as events: `TrainerLogger.log(data, step)`, shaped like verl's
`Tracking.log(data=..., step=...)` and wandb-style loggers.

One call gives `step.metrics` (every numeric value), `reward` (the first reward key present)
and, when the dict carries verl's `timing_s/*` keys, `step.done` with those as `timing` (and
`timing_s/step` as `duration_s`) followed by `step.started` for the next step, since verl logs
once at the very end of a step. `step_events` is the pure half, shared with `runwatch watch`,
which reads the same dicts back from verl's console lines.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runwatch.emitters.emitter import Emitter

#: Where trainers put the step reward (contract §4 `zero_reward.reward_keys`); the rule
#: imports this tuple, so the emitters and the rule agree on the default.
DEFAULT_REWARD_KEYS: tuple[str, ...] = (
    "critic/score/mean",
    "critic/rewards/mean",
    "task_reward/avg",
    "reward/mean",
    "reward",
)
TIMING_PREFIX = "timing_s/"

Fields = dict[str, Any]


def metric_value(value: Any) -> float | bool | None:
    """A metric as a float (NaN/inf kept), None for None; False when it is not a number
    (strings, tables, histograms: what wandb takes and the contract does not)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):  # a one-element array or tensor too; a larger one raises
        try:
            got = item()
        except (TypeError, ValueError, RuntimeError):
            return False
        if isinstance(got, numbers.Real):
            return float(got)
    return False


def step_events(
    data: Mapping[str, Any],
    step: int,
    reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
    *,
    done: bool | None = None,
) -> list[tuple[str, Fields]]:
    """(kind, fields) for one logged step. `done`: True / False to force or skip
    `step.done`; None emits it when the dict has `timing_s/*` keys."""
    metrics: dict[str, float | None] = {}
    timing: dict[str, float] = {}
    for key, raw in data.items():
        value = metric_value(raw)
        if value is False:
            continue
        assert not isinstance(value, bool)
        metrics[key] = value
        if key.startswith(TIMING_PREFIX) and value is not None and math.isfinite(value):
            timing[key[len(TIMING_PREFIX) :]] = value
    out: list[tuple[str, Fields]] = []
    if metrics:
        out.append(("step.metrics", {"step": step, "metrics": metrics}))
    for key in reward_keys:
        reward = metrics.get(key)
        if reward is not None:
            out.append(("reward", {"step": step, "mean": reward}))
            break
    if done if done is not None else bool(timing):
        fields: Fields = {"step": step}
        if (duration := timing.pop("step", None)) is not None:
            fields["duration_s"] = duration
        if timing:
            fields["timing"] = timing
        out.append(("step.done", fields))
        out.append(("step.started", {"step": step + 1}))
    return out


class TrainerLogger:
    """A metrics logger for a training loop: `log(data, step)` as verl and wandb call it.

    Non-numeric values are skipped; numpy/torch scalars become floats. `done` as in
    `step_events`; `done_extra()` adds fields to each `step.done` (e.g. CUDA memory). Never
    raises for a value it cannot use.
    """

    def __init__(
        self,
        emitter: Emitter,
        *,
        reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
        done: bool | None = None,
        done_extra: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.emitter = emitter
        self.reward_keys = tuple(reward_keys)
        self.done = done
        self.done_extra = done_extra

    def log(self, data: Mapping[str, Any], step: int, backend: Any = None) -> None:
        """Emit the step's events (`backend` is accepted, and ignored, as verl passes it)."""
        for kind, fields in step_events(data, int(step), self.reward_keys, done=self.done):
            if kind == "step.done" and self.done_extra is not None:
                fields.update(self.done_extra())
            self.emitter.emit(kind, **fields)

    def finish(self, exit_code: int = 0) -> None:
        """What verl calls when its tracker goes away: deliver what is queued."""
        self.emitter.flush(timeout=5.0)

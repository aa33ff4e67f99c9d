"""A trainer's metrics dict as events: `TrainerLogger.log(data, step)`, shaped like verl's
`Tracking.log(data=..., step=...)` and wandb-style loggers.

One call gives `step.metrics` (every numeric value; a validation pass's keys, `EVAL_PREFIXES`,
as `eval.metrics`), `reward` (the first reward key present)
and, when the dict carries verl's `timing_s/*` keys, `step.done` with those as `timing` (and
`timing_s/step` as `duration_s`) followed by `step.started` for the next step, since verl logs
once at the very end of a step. `step_events` is the pure half, shared with `runwatch watch`,
which reads the same dicts back from verl's console lines.
"""

from __future__ import annotations

import logging
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runwatch.emitters import env
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.guard import Decision, Guard, StopTraining, rules_from_env
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS

log = logging.getLogger("runwatch.emitters")

#: How often a paused loop says it is still paused.
STILL_PAUSED_EVERY_S = 600.0

TIMING_PREFIX = "timing_s/"
#: Metrics of a validation or evaluation pass (verl's `val-core/`, `val-aux/`; `eval/`,
#: transformers' `eval_`): not the training step's, so they go out as `eval.metrics` --
#: a NaN among them (verl logs `val-aux/...: nan` at step 0 of a healthy run) is no training
#: fault, and the training rules never read them.
EVAL_PREFIXES: tuple[str, ...] = ("val/", "val-core/", "val-aux/", "val_", "eval/", "eval_",
                                  "test/")  # fmt: skip

#: an evaluation's key that measures the model's predictions against their targets -- a loss,
#: or the error measures boosting and regression libraries print in its place (xgboost's and
#: LightGBM's `rmse`, `mae`, `logloss`, `...-nloglik`, `...-deviance`): not finite, the model's
#: forward is not, as for a validation loss. Not a ranking's or a rate's (`auc`, `ndcg`), which
#: a validation set of one class or no query leaves undefined in a healthy run
_ERROR_MEASURE = re.compile(
    r"(?i)loss|(?:^|[\W_])(?:nll|rmse|mse|mae|nloglik|deviance)(?:$|[\W_\d])"
)

#: The keys of transformers' summary at the end of `train()`: a dict that is no step.
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second"})

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
    evals: dict[str, float | None] = {}
    timing: dict[str, float] = {}
    for key, raw in data.items():
        value = metric_value(raw)
        if value is False:
            continue
        assert not isinstance(value, bool)
        if key.startswith(EVAL_PREFIXES):
            evals[key] = value
            if value is not None and not math.isfinite(value) and _ERROR_MEASURE.search(key):
                # a validation loss (or error measure) that is not finite: the model's forward
                # is not (verl's `val-aux/...: nan` of a healthy run is no loss)
                metrics[key] = value
            continue
        metrics[key] = value
        if key.startswith(TIMING_PREFIX) and value is not None and math.isfinite(value):
            timing[key[len(TIMING_PREFIX) :]] = value
    out: list[tuple[str, Fields]] = []
    if metrics:
        out.append(("step.metrics", {"step": step, "metrics": metrics}))
    if evals:
        out.append(("eval.metrics", {"step": step, "metrics": evals}))
    for key in reward_keys:
        if key in metrics:
            if metrics[key] is None:
                # no sample had a score (TRL: every reward function returned None or NaN):
                # a non-finite reward, in the step's metrics too, so it is reported at once
                metrics[key] = math.nan
            out.append(("reward", {"step": step, "mean": metrics[key]}))
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

    The circuit breaker: with a `guard` (`Emitter.guard`), or `RUNWATCH_GUARD` set when
    `guard` is None (`runwatch.emitters.guard.rules_from_env`), `log` is where the loop obeys
    the run's alerts: on pause it calls `on_pause(decision)` (save a checkpoint) and blocks
    until the run is resumed or the alert resolves; on stop it calls `on_stop(decision)` and
    raises `StopTraining`. `guard=False`: never.
    """

    def __init__(
        self,
        emitter: Emitter,
        *,
        reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
        done: bool | None = None,
        done_extra: Callable[[], Mapping[str, Any]] | None = None,
        guard: Guard | bool | None = None,
        on_pause: Callable[[Decision], None] | None = None,
        on_stop: Callable[[Decision], None] | None = None,
    ) -> None:
        self.emitter = emitter
        self.reward_keys = tuple(reward_keys)
        self.done = done
        self.done_extra = done_extra
        if guard is None or guard is True:
            rules = rules_from_env(env.get(env.GUARD))
            if rules is None and guard is True:
                rules = {}
            guard = emitter.guard(rules) if rules is not None else None
        self.guard: Guard | None = guard or None
        self.on_pause, self.on_stop = on_pause, on_stop

    def log(self, data: Mapping[str, Any], step: int, backend: Any = None) -> None:
        """Emit the step's events (`backend` is accepted, and ignored, as verl passes it),
        then obey the guard, if any."""
        for kind, fields in step_events(data, int(step), self.reward_keys, done=self.done):
            if kind == "step.done" and self.done_extra is not None:
                fields.update(self.done_extra())
            self.emitter.emit(kind, **fields)
        if self.guard is not None and self.guard.should_pause():
            self.obey(int(step))

    def obey(self, step: int) -> None:
        """Pause here while the guard says pause; raise StopTraining when it says stop."""
        guard, run = self.guard, self.emitter.run
        assert guard is not None
        decision = guard.decision
        self.emitter.flush(timeout=5.0)  # what the person looking at the run should see
        if decision.action == "pause":
            log.warning("runwatch: pausing run %s after step %d: %s. `runwatch resume %s` "
                        "lifts it", run, step, decision.reason, run)  # fmt: skip
            _call(self.on_pause, decision)
            while (decision := guard.wait(STILL_PAUSED_EVERY_S)).action == "pause":
                if guard.closed:  # the emitter is closing: the process is on its way out
                    return
                log.warning("runwatch: run %s still paused: %s", run, decision.reason)
        if decision.action == "stop":
            log.error("runwatch: stopping run %s after step %d: %s", run, step, decision.reason)
            _call(self.on_stop, decision)
            raise StopTraining(f"runwatch: run {run} stopped by its alerts after step {step}: "
                               f"{decision.reason}")  # fmt: skip
        log.warning("runwatch: run %s goes on after step %d (%s)", run, step,
                    "resumed" if decision.reachable else "runwatch cannot be reached")  # fmt: skip

    def finish(self, exit_code: int = 0) -> None:
        """What verl calls when its tracker goes away: deliver what is queued."""
        self.emitter.flush(timeout=5.0)


def _call(hook: Callable[[Decision], None] | None, decision: Decision) -> None:
    """A user's hook: its failure is logged, and the breaker still does its job."""
    if hook is not None:
        try:
            hook(decision)
        except Exception:
            log.exception("runwatch: the circuit breaker's hook %r failed", hook)

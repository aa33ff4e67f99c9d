"""TRL (and any `transformers.Trainer`): a callback that reports the run to runwatch.

    from runwatch.emitters.trl import Callback
    trainer = GRPOTrainer(model=..., reward_funcs=..., callbacks=[Callback()])

With no argument the callback finds its emitter in the environment (`RUNWATCH_RUN` and
`RUNWATCH_URL` / `RUNWATCH_KAFKA`, as the tqdm bar and verl's backend do) and does nothing
without one; or `Callback(emitter)`. What goes out, read from TRL 1.16's GRPOTrainer:

- `run.started` (with `total_steps`) when training begins; `step.started` / `step.done`
  (with its duration) around each optimizer step -- `state.global_step` numbers the steps,
  as TRL's logs and checkpoints do -- and the step count as the `progress` of `train`
  (what TRL's bar shows: `stuck_progress` sees a step that never ends); `run.finished`
  when training ends;
- an exception that ends the process during training (a reward function that raises) as
  `component.failed` and `run.finished` failed, before Python prints it;
- each logging step's dict (`reward`, `reward_std`, `rewards/<func>/mean`, `kl`, `entropy`,
  `grad_norm`, `completions/mean_length`, `completions/clipped_ratio`,
  `frac_reward_zero_std`, `step_time`, ...) as `step.metrics` and `reward`, through the
  same `TrainerLogger` as verl's backend, so the rules read TRL's keys by default. TRL logs
  `reward` as None when every reward function returned None for every sample (it treats
  NaN as unscorable): that step's reward goes out as NaN, which `non_finite_metric` reports;
- heartbeats, from the emitter's own thread;
- the circuit breaker (`RUNWATCH_GUARD`, or `guard=`): on `pause` the trainer waits in
  `on_log` (after `on_pause(decision)`, e.g. a checkpoint) until `runwatch resume` or the
  alert resolves; on `stop` (after `on_stop`) it sets `control.should_training_stop`, so
  the trainer ends the step and stops as it would at its last step.

Only the main process (`state.is_world_process_zero`) reports steps; every process that
has an emitter beats.

A reward function is a callable, so only its user knows the service it calls:
`waiting_on(score, endpoint="http://rm-1:8000/score")` (or `dep="reward@rm-1:8000"`) is
`score` that reports each of its calls as a trajectory of the step in phase `reward`,
waiting on that service (`dep`, contract section 8). A reward server that hangs then leaves
that trajectory pending, and the stalled step's alert names the server.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError:  # no transformers, so no Trainer to call it: the module still imports
    TrainerCallback = object

from runwatch.emitters.default import default_emitter
from runwatch.emitters.deps import dep_of
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.guard import Decision, Guard, StopTraining
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.trainer import SUMMARY_KEYS, TrainerLogger

__all__ = ["Callback", "waiting_on"]


class Callback(TrainerCallback):  # type: ignore[misc]
    """Reports a transformers / TRL training run to runwatch; see the module docstring."""

    def __init__(
        self,
        emitter: Emitter | None = None,
        *,
        reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
        guard: Guard | bool | None = None,
        on_pause: Callable[[Decision], None] | None = None,
        on_stop: Callable[[Decision], None] | None = None,
    ) -> None:
        self.emitter = emitter if emitter is not None else default_emitter()
        self.logger: TrainerLogger | None = None
        if self.emitter is not None:
            self.logger = TrainerLogger(self.emitter, reward_keys=reward_keys, done=False,
                                        guard=guard, on_pause=on_pause,
                                        on_stop=on_stop)  # fmt: skip
        self.stopped: StopTraining | None = None  # the breaker's stop, once it said so
        self._began: float | None = None
        self._hook: Any = None  # the excepthook ours replaced, while training

    def _main(self, state: Any) -> bool:
        return self.logger is not None and bool(getattr(state, "is_world_process_zero", True))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._main(state):
            assert self.emitter is not None
            total = int(state.max_steps) if getattr(state, "max_steps", 0) else None
            self.emitter.emit("run.started", total_steps=total)
            if self._hook is None:
                self._hook, sys.excepthook = sys.excepthook, self._excepthook

    def _excepthook(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        """The exception that ends the process, reported before Python prints it."""
        if self.emitter is not None and not issubclass(kind, KeyboardInterrupt):
            self.emitter.emit("component.failed", error=f"{kind.__name__}: {value}"[:2000],
                              how="exception")  # fmt: skip
            self.emitter.emit("run.finished", status="failed")
            self.emitter.flush(timeout=5.0)
        (self._hook or sys.__excepthook__)(kind, value, tb)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._main(state):
            assert self.emitter is not None
            self._began = time.monotonic()
            self.emitter.emit("step.started", step=int(state.global_step) + 1)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._main(state):
            assert self.emitter is not None
            step = int(state.global_step)
            fields: dict[str, Any] = {"step": step}
            if self._began is not None:
                fields["duration_s"] = time.monotonic() - self._began
            self.emitter.emit("step.done", **fields)
            total = int(state.max_steps) if getattr(state, "max_steps", 0) else None
            self.emitter.emit("progress", name="train", n=step, total=total)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not self._main(state) or not logs or SUMMARY_KEYS & logs.keys():
            return
        assert self.logger is not None
        try:
            self.logger.log(logs, int(state.global_step))
        except StopTraining as stop:
            self.stopped = stop
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._main(state):
            assert self.emitter is not None
            self.emitter.emit("run.finished", status="killed" if self.stopped else "ok")
            self.emitter.flush(timeout=5.0)
        if self._hook is not None and sys.excepthook == self._excepthook:
            sys.excepthook, self._hook = self._hook, None


_calls = itertools.count(1)


def waiting_on(
    reward_func: Callable[..., Any],
    dep: str | None = None,
    *,
    endpoint: str | None = None,
    emitter: Emitter | None = None,
) -> Callable[..., Any]:
    """`reward_func` (sync or async, its name kept: TRL names its metrics by it), each call
    reported as a trajectory of the step in phase `reward` waiting on `dep` or on the service
    at `endpoint` (module docstring). Without an emitter (given, or in the environment) it
    is `reward_func` as it was."""
    waits_on = dep_of(dep, endpoint, "reward", node=None if emitter is None else emitter.machine)
    name = getattr(reward_func, "__name__", type(reward_func).__name__)

    def begin(kwargs: dict[str, Any]) -> Any:
        em = emitter if emitter is not None else default_emitter()
        if em is None:
            return None
        state = kwargs.get("trainer_state")  # TRL passes it to every reward function
        step = int(state.global_step) + 1 if state is not None else None
        return em.trajectory(f"s{step}-{name}-{next(_calls)}", step=step)

    if inspect.iscoroutinefunction(reward_func):

        @functools.wraps(reward_func)
        async def reward_async(*args: Any, **kwargs: Any) -> Any:
            traj = begin(kwargs)
            if traj is None:
                return await reward_func(*args, **kwargs)
            with traj:
                traj.phase("reward", dep=waits_on)
                return await reward_func(*args, **kwargs)

        return reward_async

    @functools.wraps(reward_func)
    def reward(*args: Any, **kwargs: Any) -> Any:
        traj = begin(kwargs)
        if traj is None:
            return reward_func(*args, **kwargs)
        with traj:
            traj.phase("reward", dep=waits_on)
            return reward_func(*args, **kwargs)

    return reward

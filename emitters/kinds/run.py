"""The kinds of a run's life and its training steps: run.started / finished / resumed, every
process's heartbeat, step.started / done / metrics, eval.metrics and reward."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from runwatch.emitters.envelope import Event, Examples
from runwatch.emitters.fields import Ident, Int64, MetricValue, Name, note


class RunStarted(Event):
    emitted_when = "a run begins"
    pinned = ("labels", "config", "total_steps")
    examples = Examples(
        full={"labels": {"team": "rl", "model": "qwen"}, "total_steps": 680,
              "config": {"zero_reward": {"steps": 10},
                         "stuck_progress": {"stall_after": {"x": 5}}}},
        minimal={},
    )  # fmt: skip

    kind: Literal["run.started"]
    labels: dict[str, str] | None = None
    config: dict[str, dict[str, Any]] | None = note(shape="{rule id: {param: value}}")
    total_steps: Int64 | None = None


class RunFinished(Event):
    emitted_when = "a run ends"
    pinned = ("status",)
    examples = Examples(full={"status": "failed", "exit_code": 1}, minimal={"status": "ok"})

    kind: Literal["run.finished"]
    status: Literal["ok", "failed", "killed"]
    exit_code: Int64 | None = note("the exit status of a command run under `runwatch watch`")


class RunResumed(Event):
    """A person lifts the circuit breaker of a run (`runwatch resume RUN`): the alerts firing
    now stop pausing it (an addition to the contract)."""

    emitted_when = "a person lifts the circuit breaker of a run (`runwatch resume RUN`)"
    examples = Examples(
        full={"rule": "zero_reward", "by": "alice@node-1", "reason": "sandbox fixed"}, minimal={}
    )

    kind: Literal["run.resumed"]
    rule: Ident | None = note("only this rule's alerts; all of them when absent")
    by: Name | None = None
    reason: Name | None = None


class Heartbeat(Event):
    emitted_when = "every `heartbeat_interval` (default 10 s) from each live emitting process"
    pinned = ("final",)
    examples = Examples(full={"final": True, "dropped_events": 3}, minimal={})

    kind: Literal["heartbeat"]
    final: bool | None = note("true = this process is shutting down cleanly")
    dropped_events: Int64 | None = note("events the process has dropped so far")


class StepStarted(Event):
    emitted_when = "the trainer starts a training step"
    pinned = ("step",)
    examples = Examples(full={"step": 3}, minimal={"step": 0})

    kind: Literal["step.started"]
    step: Int64


class StepDone(Event):
    emitted_when = "the trainer finishes a step"
    pinned = ("step", "duration_s", "timing")
    examples = Examples(
        full={"step": 3, "duration_s": 12.5, "timing": {"gen": 7.0, "update_actor": 5}},
        minimal={"step": 0},
    )

    kind: Literal["step.done"]
    step: Int64
    duration_s: float | None = None
    timing: dict[str, float] | None = note(
        "e.g. `gen`, `old_log_prob`, `update_actor`, `testing`, `save_checkpoint`",
        shape="{phase: seconds}",
    )


class StepMetrics(Event):
    emitted_when = "the trainer logs a step's metrics (the dict it would hand to wandb)"
    pinned = ("step", "metrics")
    examples = Examples(
        full={"step": 3, "metrics": {"actor/grad_norm": 0.5, "loss": None, "n": 4}},
        minimal={"step": 0, "metrics": {}},
    )

    kind: Literal["step.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class EvalMetrics(Event):
    """A validation or evaluation pass's metrics at a step (addition): kept apart from the
    training step's `step.metrics`, which the rules read."""

    emitted_when = "a validation or evaluation pass logs its metrics at a step"
    examples = Examples(
        full={"step": 0, "metrics": {"val-core/acc": 0.31, "val-aux/n": None}},
        minimal={"step": 0, "metrics": {}},
    )

    kind: Literal["eval.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class Reward(Event):
    emitted_when = "a step's aggregated reward is known"
    pinned = ("step", "mean", "count")
    examples = Examples(
        full={"step": 3, "mean": 0.25, "count": 512}, minimal={"step": 0, "mean": 0}
    )

    kind: Literal["reward"]
    step: Int64
    mean: Annotated[float, Field(allow_inf_nan=True)]
    count: Int64 | None = None

"""verl, without importing verl until asked: its metrics per step and its trajectories.

verl's `Tracking` keeps its backends in `self.logger` ({name: object with `log(data, step)`})
and calls each on every `Tracking.log`. `attach(tracking)` adds ours to one instance;
`patch_tracking()` makes every `Tracking` verl builds get it (call it before the trainer
starts, e.g. at the top of your main script).

`patch_agent_loop()` makes every sample verl's agent loop runs a trajectory (verl 0.9.1,
`verl/experimental/agent_loop/`): `AgentLoopWorker._run_agent_loop` is one trajectory
(`trajectory.started` with the step and its prompt's group, `trajectory.done` with status
and `reward_score`), `ToolAgentLoop._handle_generating_state` is phase `generate`,
`_handle_processing_tools_state` (the tool calls: a sandbox, a search) phase `tool`, and
`AgentLoopWorker._compute_score` phase `reward`. Validation samples are not trajectories of
a training step and are left out. Call it in the process that runs the agent loop workers
(verl starts them as Ray actors: `ray_init.runtime_env` or the worker's own module).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from runwatch.emitters.default import default_emitter
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.rollout import Trajectory
from runwatch.emitters.trainer import DEFAULT_REWARD_KEYS, TrainerLogger

BACKEND = "runwatch"


def attach(
    tracking: Any,
    emitter: Emitter | None = None,
    reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
) -> TrainerLogger | None:
    """Add the runwatch backend to a verl `Tracking`; None when no emitter is configured."""
    emitter = emitter if emitter is not None else default_emitter()
    if emitter is None:
        return None
    backend = TrainerLogger(emitter, reward_keys=reward_keys)
    tracking.logger[BACKEND] = backend
    return backend


def patch_tracking(
    emitter: Emitter | None = None, module: str = "verl.utils.tracking"
) -> Callable[..., None]:
    """Wrap `Tracking.__init__` so every tracker gets the backend; returns the original."""
    tracking_cls = importlib.import_module(module).Tracking
    original: Callable[..., None] = tracking_cls.__init__
    if getattr(original, "_runwatch", False):
        return original

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        original(self, *args, **kwargs)
        attach(self, emitter)

    __init__._runwatch = True  # type: ignore[attr-defined]
    tracking_cls.__init__ = __init__
    return original


#: The trajectory the running agent-loop task belongs to (each sample runs in a task of its
#: own, and a task's context is its own).
_CURRENT: contextvars.ContextVar[Trajectory | None] = contextvars.ContextVar(
    "runwatch_verl_trajectory", default=None
)
AGENT_LOOP = "verl.experimental.agent_loop"


def _marked(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._runwatch = True  # type: ignore[attr-defined]
    return fn


def _in_phase(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """An async method of the agent loop that marks the sample's phase as it starts."""

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        traj = _CURRENT.get()
        if traj is not None:
            traj.phase(name)
        return await original(self, *args, **kwargs)

    return _marked(wrapper)


def patch_agent_loop(emitter: Emitter | None = None, module: str = AGENT_LOOP) -> bool:
    """Make every training sample of verl's agent loop a trajectory (module docstring).
    False when no emitter is configured (nothing is patched); patching twice is harmless."""
    emitter = emitter if emitter is not None else default_emitter()
    if emitter is None:
        return False
    worker_cls = importlib.import_module(f"{module}.agent_loop").AgentLoopWorker
    tool_cls = importlib.import_module(f"{module}.tool_agent_loop").ToolAgentLoop
    run = worker_cls._run_agent_loop
    if getattr(run, "_runwatch", False):
        return True

    @functools.wraps(run)
    async def _run_agent_loop(self: Any, sampling_params: Any, trajectory: dict[str, Any],
                              *args: Any, **kwargs: Any) -> Any:  # fmt: skip
        if trajectory.get("validate"):
            return await run(self, sampling_params, trajectory, *args, **kwargs)
        step = int(trajectory["step"])
        index, n = trajectory.get("sample_index"), trajectory.get("rollout_n")
        group = kwargs.get("uid", index)
        traj = Trajectory(emitter, f"s{step}-i{index}-n{n}", step=step,
                          group=None if group is None else str(group))  # fmt: skip
        traj.start()
        traj.phase("generate")
        token = _CURRENT.set(traj)
        try:
            output = await run(self, sampling_params, trajectory, *args, **kwargs)
        except asyncio.CancelledError:
            traj.end("aborted")
            raise
        except BaseException as err:
            traj.end(error=err)
            raise
        finally:
            _CURRENT.reset(token)
        score = getattr(output, "reward_score", None)
        if isinstance(score, int | float):
            traj.reward = float(score)
        traj.end("ok")
        return output

    worker_cls._run_agent_loop = _marked(_run_agent_loop)
    worker_cls._compute_score = _in_phase("reward", worker_cls._compute_score)
    tool_cls._handle_generating_state = _in_phase("generate", tool_cls._handle_generating_state)
    tool_cls._handle_processing_tools_state = _in_phase(
        "tool", tool_cls._handle_processing_tools_state
    )
    return True

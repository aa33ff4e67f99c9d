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

Where verl's config names the service a phase waits on, the phase says it (`dep`, contract
section 8, named by `runwatch.emitters.deps.service`): the reward phase waits on the
sandbox of `reward.sandbox_fusion.url` (verl 0.9's place; `sandbox_fusion.url` before its
migration), and each tool call (`ToolAgentLoop._call_tool`) on the endpoint in its tool's
config (`url`, `endpoint`, `base_url`, or a key ending in `_url`, e.g. `sandbox_fusion_url`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runwatch.emitters.default import default_emitter
from runwatch.emitters.deps import service
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.rollout import Trajectory
from runwatch.emitters.trainer import TrainerLogger

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


#: where verl's config names the sandbox the reward phase calls (0.9; before its migration)
REWARD_ENDPOINTS = ("reward.sandbox_fusion.url", "sandbox_fusion.url")
#: the keys of a tool's config that name its endpoint (first found wins)
TOOL_ENDPOINT_KEYS = ("url", "endpoint", "base_url")


def _select(config: Any, path: str) -> Any:
    """`config`'s value at the dotted `path` (a DictConfig, a dict or attributes); None where
    it has none (an OmegaConf struct raises on a key it lacks)."""
    node = config
    for key in path.split("."):
        try:
            node = node.get(key) if hasattr(node, "get") else getattr(node, key, None)
        except Exception:  # any config that lacks it (OmegaConf raises its own)
            return None
        if node is None:
            return None
    return node


def _dep(endpoint: Any, role: str, node: str | None) -> str | None:
    """The service at a configured endpoint (a loopback one named by `node`: `service`);
    None when the config names none usable (a sample is never failed for a config runwatch
    cannot read)."""
    if not isinstance(endpoint, str) or not endpoint.strip():
        return None
    try:
        return service(endpoint, role, node=node)
    except ValueError:
        return None


def reward_dep(config: Any, node: str | None = None) -> str | None:
    """The service verl's reward phase waits on, from its trainer config, as named on
    `node` (default: this process's machine, `env.machine()`)."""
    for path in REWARD_ENDPOINTS:
        if (dep := _dep(_select(config, path), "reward", node)) is not None:
            return dep
    return None


def tool_dep(tool: Any, node: str | None = None) -> str | None:
    """The service a tool calls, from its config (module docstring), as named on `node`
    (default: this process's); None for a function tool or a config that names none."""
    config = getattr(tool, "config", None)
    if not isinstance(config, Mapping):
        return None
    keys = [*TOOL_ENDPOINT_KEYS, *sorted(k for k in config if str(k).endswith("_url"))]
    for key in keys:
        if (dep := _dep(config.get(key), "tool", node)) is not None:
            return dep
    return None


def _in_phase(
    name: str,
    original: Callable[..., Any],
    dep: Callable[[Any, str], str | None] | None = None,
) -> Callable[..., Any]:
    """An async method of the agent loop that marks the sample's phase as it starts (and,
    with `dep`, the service it waits on there, from the agent loop object and the machine of
    the trajectory's emitter)."""

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        traj = _CURRENT.get()
        if traj is not None:
            waits_on = dep(self, traj.emitter.machine) if dep is not None else None
            traj.phase(name, dep=waits_on)
        return await original(self, *args, **kwargs)

    return _marked(wrapper)


def _calling_tool(original: Callable[..., Any]) -> Callable[..., Any]:
    """`ToolAgentLoop._call_tool`: a call of a tool whose config names its endpoint is the
    phase `tool`, waiting on that service."""

    @functools.wraps(original)
    async def wrapper(self: Any, tool_call: Any, *args: Any, **kwargs: Any) -> Any:
        traj = _CURRENT.get()
        if traj is not None:
            agent_data = args[1] if len(args) > 1 else kwargs.get("agent_data")
            tools = getattr(agent_data, "_active_tools", None) or getattr(self, "tools", {})
            dep = tool_dep(tools.get(getattr(tool_call, "name", None)), traj.emitter.machine)
            if dep is not None:
                traj.phase("tool", dep=dep)
        return await original(self, tool_call, *args, **kwargs)

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
    worker_cls._compute_score = _in_phase(
        "reward", worker_cls._compute_score, lambda worker, node: reward_dep(worker.config, node)
    )
    tool_cls._call_tool = _calling_tool(tool_cls._call_tool)
    tool_cls._handle_generating_state = _in_phase("generate", tool_cls._handle_generating_state)
    tool_cls._handle_processing_tools_state = _in_phase(
        "tool", tool_cls._handle_processing_tools_state
    )
    return True

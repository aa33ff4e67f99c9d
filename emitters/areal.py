"""AReaL's stats as runwatch events, without importing AReaL until asked.

AReaL's trainers hand each step's exported stats to `StatsLogger.commit(epoch, step,
global_step, data)` (areal/utils/stats_logger.py at 4aef98d), which sends them to wandb,
swanlab and tensorboard. `patch_stats_logger()` wraps `commit` so that the same dicts also go
through a `TrainerLogger` (step.metrics, reward, and the circuit breaker from
`RUNWATCH_GUARD`); call it at the top of the training script.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from runwatch.emitters.default import default_emitter
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.trainer import TrainerLogger

#: AReaL's step reward: the mean task reward of the batch (`task_reward` in
#: areal/trainer/ppo/actor.py, exported under the ppo_actor scope with /avg).
REWARD_KEYS = ("ppo_actor/task_reward/avg", *DEFAULT_REWARD_KEYS)


def patch_stats_logger(
    emitter: Emitter | None = None, module: str = "areal.utils.stats_logger"
) -> Callable[..., None] | None:
    """Wrap `StatsLogger.commit`; returns the original (None without an emitter)."""
    emitter = emitter if emitter is not None else default_emitter()
    if emitter is None:
        return None
    cls = importlib.import_module(module).StatsLogger
    original: Callable[..., None] = cls.commit
    if getattr(original, "_runwatch", False):
        return original
    backend = TrainerLogger(emitter, reward_keys=REWARD_KEYS)

    def commit(self: Any, epoch: int, step: int, global_step: int, data: Any) -> None:
        original(self, epoch, step, global_step, data)
        items = [data] if isinstance(data, dict) else list(data)
        for i, item in enumerate(items):
            stats = {k: v for k, v in item.items() if not str(k).endswith("__count")}
            backend.log(stats, global_step + i)

    commit._runwatch = True  # type: ignore[attr-defined]
    cls.commit = commit
    return original

"""A verl tracking backend, without importing verl until asked.

verl's `Tracking` keeps its backends in `self.logger` ({name: object with `log(data, step)`})
and calls each on every `Tracking.log`. `attach(tracking)` adds ours to one instance;
`patch_tracking()` makes every `Tracking` verl builds get it (call it before the trainer
starts, e.g. at the top of your main script).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from runwatch.emitters.default import default_emitter
from runwatch.emitters.emitter import Emitter
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

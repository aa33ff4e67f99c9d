"""Rank status for torch.distributed training (extra `torch`): which phase each rank is in,
and since when, sent beside each heartbeat as `rank.status`.

    status = RankStatus(em)                 # rank and world size from torch.distributed / env
    status.watch_collectives()              # opt-in: all_reduce, recv, barrier, ... and
                                            # destroy_process_group mark their own phase
    with status.phase("forward"): ...       # or @status.phase("backward") on a function
    status.step = 12

Phases nest; leaving one returns to the one outside (or `running`). Marking a phase is a
couple of attribute writes; events go out only every `interval` seconds (default: the
emitter's heartbeat interval), never one per collective call, so `ranks_stalled` can tell
ranks that all sit in one collective (uniform) from ranks split between an exception path
and a collective (divergent). At exit the rank reports `exited`.

`cuda_memory()` gives allocated/reserved/peak bytes when CUDA is there, and
`trainer_logger(em)` a TrainerLogger that adds them to each `step.done`. torch is imported
here only: importing `runwatch.emitters` never pulls it in.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from runwatch.emitters.emitter import Emitter
from runwatch.emitters.trainer import TrainerLogger

F = TypeVar("F", bound=Callable[..., Any])

#: The blocking torch.distributed calls `watch_collectives()` wraps (those that exist).
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "monitored_barrier",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "destroy_process_group",
)
BASE_PHASE = "running"


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class _Phase:
    """Context manager and decorator for one phase name."""

    def __init__(self, status: RankStatus, name: str) -> None:
        self.status, self.name = status, name

    def __enter__(self) -> None:
        self.status._push(self.name)

    def __exit__(self, *exc: object) -> None:
        self.status._pop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class RankStatus:
    """One rank's current phase, reported as `rank.status` every `interval` seconds."""

    def __init__(
        self,
        emitter: Emitter,
        rank: int | None = None,
        world_size: int | None = None,
        interval: float | None = None,
    ) -> None:
        got_rank, got_world = _world()
        self.emitter = emitter
        self.rank = got_rank if rank is None else rank
        self.world_size = got_world if world_size is None else world_size
        self.interval = interval if interval is not None else emitter._interval
        self.step: int | None = None
        self._stack: list[tuple[str, float]] = [(BASE_PHASE, time.time())]
        self._undo: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runwatch-rank-status", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        # also when the emitter closes first (its own atexit, or the caller's close()), so
        # that `exited` goes out with its last events instead of into the spool after them
        emitter.before_close(self.close)

    # --- phases ----------------------------------------------------------------------------

    def phase(self, name: str) -> _Phase:
        """`with status.phase("forward"):` or `@status.phase("backward")`."""
        return _Phase(self, name)

    @property
    def current(self) -> tuple[str, float]:
        """(phase, since): the innermost phase and when the rank entered it."""
        return self._stack[-1]

    def _push(self, name: str) -> None:
        self._stack.append((name, time.time()))

    def _pop(self) -> None:
        if len(self._stack) > 1:
            self._stack.pop()
            outer, _ = self._stack[-1]
            self._stack[-1] = (outer, time.time())  # back in the outer phase from now on

    # --- collectives -----------------------------------------------------------------------

    def watch_collectives(self, names: tuple[str, ...] = COLLECTIVES) -> None:
        """Wrap torch.distributed's blocking calls so each marks its own phase.

        Code that imported a function by name before this call keeps the unwrapped one.
        `unwatch_collectives()` restores them.
        """
        for name in names:
            original = getattr(dist, name, None)
            if original is None or getattr(original, "_runwatch", False):
                continue
            wrapped = self.phase(name)(original)
            wrapped._runwatch = True
            setattr(dist, name, wrapped)
            self._undo.append(functools.partial(setattr, dist, name, original))

    def unwatch_collectives(self) -> None:
        while self._undo:
            self._undo.pop()()

    # --- reporting -------------------------------------------------------------------------

    def report(self, phase: str | None = None) -> None:
        """Emit `rank.status` now (the thread does it every `interval`)."""
        name, since = self.current if phase is None else (phase, time.time())
        fields: dict[str, Any] = {
            "rank": self.rank,
            "world_size": self.world_size,
            "phase": name,
            "since": since,
        }
        if self.step is not None:
            fields["step"] = self.step
        self.emitter.emit("rank.status", **fields)

    def _run(self) -> None:
        while True:
            self.report()
            if self._stop.wait(self.interval):
                return

    def close(self) -> None:
        """Stop reporting and say `exited` (also at interpreter exit)."""
        if self._stop.is_set():
            return
        self._stop.set()
        atexit.unregister(self.close)
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.unwatch_collectives()
        self.report("exited")


def cuda_memory() -> dict[str, int]:
    """Allocated, reserved and peak CUDA memory of this process's device, in bytes; {} without
    CUDA."""
    if not torch.cuda.is_available():
        return {}
    return {
        "allocated": int(torch.cuda.memory_allocated()),
        "reserved": int(torch.cuda.memory_reserved()),
        "peak": int(torch.cuda.max_memory_allocated()),
    }


def trainer_logger(emitter: Emitter, **kwargs: Any) -> TrainerLogger:
    """A TrainerLogger whose `step.done` carries `cuda_memory` (bytes) when CUDA is there."""

    def extra() -> dict[str, Any]:
        memory = cuda_memory()
        return {"cuda_memory": memory} if memory else {}

    return TrainerLogger(emitter, done_extra=extra, **kwargs)

"""`runwatch worker` with CPU clocks around the parts of its path, for bench/worker_parts.py.

Run as the worker itself (`python bench/timed_worker.py worker --kafka ...`): before the
command starts, the synchronous parts of the per-record path are wrapped in the thread's CPU
clock (`time.thread_time`): the driver's feed (`LiveDriver.feed_records`: split, decode,
duplicate ids, clock offsets, run state and rules), aiokafka's record parsing
(`FetchResult.getall`), the fleet feed, the ticks, the metrics' batch call and a /metrics
exposition; the collector's passes (`gc.callbacks`); and every step the event loop runs
(`Handle._run`), by the task it is a step of -- so the consuming loop, the fleet stage,
aiokafka's fetcher and senders and the /metrics server each get their CPU, what they call
included. What none of those holds is the event loop's own polling and bookkeeping.

Unlike py-spy's samples, which count a busy thread's wall time (on a loaded machine, time it
waited for a core too), these are CPU seconds. The totals go to `$RUNWATCH_TIMED_OUT.start`
and `.end` when the bench makes `$RUNWATCH_TIMED_OUT.go` and `.stop` (the measured window).
A bench tool only: nothing of it is in `runwatch`.
"""

from __future__ import annotations

import asyncio.events
import gc
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from aiokafka.consumer.fetcher import FetchResult

from runwatch.stream import live
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.feed import FleetFeed
from runwatch.stream.fleet.merge import FleetMerge
from runwatch.stream.kafka import fleet_stage
from runwatch.stream.live import LiveDriver
from runwatch.stream.metrics.exporter import RunwatchMetrics
from runwatch.stream.metrics.worker import WorkerMetrics
from runwatch.stream.timekeeping.skew import ClockOffsets

#: part -> [CPU seconds, calls]
TOTALS: dict[str, list[float]] = {}
_clock = time.thread_time

#: the synchronous parts, timed around each call
PARTS: list[tuple[type, str, str]] = [
    (LiveDriver, "feed_records", "driver: feed_records"),
    (FetchResult, "getall", "aiokafka: records parsed"),
    (FleetFeed, "records", "fleet feed"),
    (LiveDriver, "tick", "driver: tick"),
    (WorkerMetrics, "batch", "metrics: batch"),
    (RunwatchMetrics, "exposition", "metrics: exposition"),
    (FleetMerge, "release", "fleet stage: release"),
    (FleetMerge, "dump_state", "fleet stage: state dumped"),
]
#: with $RUNWATCH_TIMED_FINE: the per-event calls too -- the core (the engine's apply and
#: advance: run state and rules) apart from the path around it -- each call's clock
#: overhead measured and taken off (`_calibrate`)
FINE: list[tuple[type, str, str]] = [
    (Engine, "apply", "core: Engine.apply"),
    (Engine, "advance", "core: Engine.advance"),
    (ClockOffsets, "held", "driver: clock offsets (shift)"),
]
#: the tasks whose steps are named by what they run (Faust wraps each in `_execute_task`)
TASKS = ("StreamWorker.consume", "FleetStageRole.run", "build_app.<locals>.tick",
         "build_app.<locals>.members")  # fmt: skip


def _add(part: str, seconds: float) -> None:
    total = TOTALS.setdefault(part, [0.0, 0])
    total[0] += seconds
    total[1] += 1


def _timed(cls: type, name: str, part: str) -> None:
    call = getattr(cls, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            return call(*args, **kwargs)
        finally:
            _add(part, _clock() - start)

    setattr(cls, name, timed)


def _timed_shifts() -> None:
    """The shifts the live driver makes (`ClockOffsets.shifter`'s callable: native where
    built, else `shift_held`), each call timed."""
    make = ClockOffsets.shifter

    def shifter(self: ClockOffsets, native: bool = True) -> Any:
        shift = make(self, native)

        def timed(*args: Any) -> Any:
            start = _clock()
            try:
                return shift(*args)
            finally:
                _add("driver: clock offsets (shift)", _clock() - start)

        return timed

    ClockOffsets.shifter = shifter  # type: ignore[method-assign]


def _calibrate(n: int = 200_000) -> tuple[float, float]:
    """CPU seconds one timed call counts inside its own clock, and what it adds in all (a
    no-op's, timed against plain)."""

    class Nothing:
        def call(self) -> None:
            return None

    thing = Nothing()
    start = _clock()
    for _ in range(n):
        thing.call()
    plain = _clock() - start
    _timed(Nothing, "call", "calibration")
    start = _clock()
    for _ in range(n):
        thing.call()
    timed = _clock() - start
    seconds, calls = TOTALS.pop("calibration")
    return seconds / calls, max(0.0, timed - plain) / n


def _task(handle: Any) -> str:
    """What an event loop step is for: its task's coroutine (inside Faust's wrapper, the
    worker's own), else the callback's name."""
    callback = handle._callback
    owner = getattr(callback, "__self__", None)
    if owner is not None and hasattr(owner, "get_coro"):
        coro, chain = owner.get_coro(), []
        while coro is not None and len(chain) < 6:
            chain.append(getattr(coro, "__qualname__", type(coro).__name__))
            coro = getattr(coro, "cr_await", None)
        named = next((name for name in chain if name in TASKS), chain[0] if chain else "?")
        return f"task {named}"
    return f"callback {getattr(callback, '__qualname__', type(callback).__name__)}"


def _steps() -> None:
    run: Callable[[Any], Any] = asyncio.events.Handle._run

    def timed(handle: Any) -> Any:
        start = _clock()
        try:
            return run(handle)
        finally:
            _add(_task(handle), _clock() - start)

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]


class _Packing:
    """`runwatch.stream.checkpoint` for the fleet stage, its `pack` timed."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def pack(self, *args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            return self._module.pack(*args, **kwargs)
        finally:
            _add("fleet stage: checkpoint packed", _clock() - start)


def _collector() -> None:
    began = [0.0]

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = _clock()
        else:
            _add(f"collector: generation {info['generation']}", _clock() - began[0])

    gc.callbacks.append(seen)


#: CPU seconds one timed call counts beyond what it times, and adds in all (FINE only)
OVERHEAD = [0.0, 0.0]


def dump(path: str) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    body = {
        **TOTALS,
        "calibration: a call's overhead": OVERHEAD,
        "process: user": [usage.ru_utime, 0],
        "process: system": [usage.ru_stime, 0],
        "process: page faults": [usage.ru_minflt, 0],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(body, f)


def _window(out: str) -> None:
    """The totals at the measured window's start and end (the bench makes the files)."""
    for mark, name in ((".go", ".start"), (".stop", ".end")):
        while not os.path.exists(out + mark):
            time.sleep(0.05)
        dump(out + name)


def main() -> int:
    # the fleet stage packs its checkpoints in the loop (the workers' are in forked children)
    fleet_stage.checkpoint = _Packing(fleet_stage.checkpoint)  # type: ignore[assignment]
    for cls, name, part in PARTS:
        _timed(cls, name, part)
    if os.environ.get("RUNWATCH_TIMED_FINE"):
        OVERHEAD[:] = _calibrate()
        for cls, name, part in FINE:
            _timed(cls, name, part)
        _timed_shifts()
        # (the records' lines and their decoding: `_fetched.c` and `decode.events_of`)
        _timed(live, "_plain", "driver: decode (_plain)")  # type: ignore[arg-type]
    _steps()
    _collector()
    out = os.environ["RUNWATCH_TIMED_OUT"]
    threading.Thread(target=_window, args=(out,), daemon=True).start()
    from runwatch.cli import main as runwatch

    return runwatch(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

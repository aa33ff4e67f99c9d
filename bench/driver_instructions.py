"""The live driver's per-record path, counted in instructions: `LiveDriver.feed_records` over
one partition's fetches, parsed beforehand, as `bench/live_path.py` builds them (the fleet's
run shape, batched and plain: what the emitters send).

On a shared machine CPU time moves 10-30% from run to run; an instruction count does not.
Each fetch is fed inside a `functools.reduce`, so that valgrind's callgrind counts only the
feeds (`--toggle-collect=functools_reduce`): not the set-up, the parsing or the ticks.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --toggle-collect=functools_reduce \\
        --callgrind-out-file=/tmp/cg.out .venv/bin/python bench/driver_instructions.py \\
        [--runs 250] [--seconds 60] [--core stub] [--base REV]
    callgrind_annotate /tmp/cg.out | head   # the total: instructions in the feeds

`--core stub`: the engine's `apply` replaced by a function that returns no alert, so that
what is counted is the driver around the core (the stub's call included). `--base REV`:
the driver as it was at REV -- this area's files (stream/live.py, stream/records.py,
stream/decode.py, stream/timekeeping/) loaded from git under other names -- so that one work
tree counts both builds. `--alternate REV`: no callgrind;
a driver of each build fed fetch by fetch in turn in one process, each fetch's CPU time to
its build (the load's drift falls on both alike), `--rounds` times.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.abc
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from benchinfo import machine
from live_path import NONE, TICK_S, events, fetches, parse, sends

from runwatch.stream.collector import tuned_for_consuming

ROOT = Path(__file__).resolve().parent.parent
#: this bench's area: the driver's modules around the core, as files and as modules
AREA = ["stream/live.py", "stream/records.py", "stream/decode.py", "stream/timekeeping"]
PREFIX = "_base_"


def _module(path: str) -> str:
    return "runwatch." + path.removesuffix(".py").replace("/", ".")


class _BaseFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `_base_<module>` from git: the area's files as they were at `rev`, their imports
    of each other renamed likewise (the rest is the work tree's)."""

    def __init__(self, rev: str) -> None:
        names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", *AREA],
                               cwd=ROOT, check=True, capture_output=True,
                               text=True).stdout.split()  # fmt: skip
        self.rev = rev
        #: every module of the area (a package's `__init__` is the work tree's)
        self.changed = {_module(p): p for p in names
                        if p.endswith(".py") and not p.endswith("__init__.py")}  # fmt: skip

    def alias(self, module: str) -> str:
        return PREFIX + module.replace(".", "_") if module in self.changed else module

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        for module in self.changed:
            if fullname == self.alias(module):
                return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        original = next(m for m in self.changed if self.alias(m) == module.__name__)
        source = subprocess.run(["git", "show", f"{self.rev}:{self.changed[original]}"],
                                cwd=ROOT, check=True, capture_output=True,
                                text=True).stdout  # fmt: skip
        for other in sorted(self.changed, key=len, reverse=True):
            source = source.replace(f"{other} import", f"{self.alias(other)} import")
        exec(compile(source, f"{self.rev}:{self.changed[original]}", "exec"), module.__dict__)


def driver_class(base: str | None) -> Any:
    """`LiveDriver` of the work tree, or of `base`."""
    if base is None:
        from runwatch.stream.live import LiveDriver

        return LiveDriver
    finder = _BaseFinder(base)
    sys.meta_path.insert(0, finder)
    return importlib.import_module(finder.alias("runwatch.stream.live")).LiveDriver


def prepared(runs: int, seconds: float) -> list[list[Any]]:
    """The partition's fetches, batched and plain, parsed as aiokafka's consumer parses them."""
    out, start = [], 0
    for buffer, count, _ in fetches(sends(events(runs, seconds)), True, NONE):
        out.append(parse(buffer, start))
        start += count
    return out


def _feed(driver: Any, records: list[Any]) -> Any:
    driver.feed_records(records)
    return driver


def _no_alerts(event: Any, now: float | None = None) -> list[Any]:
    return []


class Driven:
    """One build's driver over the fetches: the first third warms it up, the rest is
    counted; ticked every TICK_S of the records' time as the worker ticks it (uncounted)."""

    def __init__(self, cls: Any, stub: bool) -> None:
        self.driver = cls(arrival_gaps=True)
        self.driver.engine.views_changed = set()
        if stub:
            self.driver.engine.apply = _no_alerts
        self.last_tick = float("-inf")

    def fetch(self, records: list[Any], counted: bool = True) -> None:
        if counted:
            functools.reduce(_feed, (records,), self.driver)
        else:
            self.driver.feed_records(records)
        now = records[-1].timestamp / 1000.0
        if now - self.last_tick >= TICK_S:
            self.driver.tick(now)
            self.last_tick = now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=250, help="runs in the partition (250)")
    ap.add_argument("--seconds", type=float, default=60.0, help="schedule length (60)")
    ap.add_argument("--core", choices=["real", "stub"], default="real")
    ap.add_argument("--base", metavar="REV", help="count the driver as it was at REV")
    ap.add_argument("--alternate", metavar="REV", help="CPU time, REV against the work tree")
    ap.add_argument("--rounds", type=int, default=3, help="--alternate: passes of each (3)")
    args = ap.parse_args()
    print(machine())
    fetched = prepared(args.runs, args.seconds)
    third = len(fetched) // 3
    counted = sum(len(r) for r in fetched[third:])
    n_events = sum(
        len(r.value.split(b"\n")) if r.headers else 1 for f in fetched[third:] for r in f
    )  # (the bench's batch values hold no blank line)
    print(f"{args.runs:,} runs, {args.seconds:g} s: {len(fetched)} fetches, the last "
          f"{len(fetched) - third} counted: {counted:,} records, {n_events:,} events")  # fmt: skip
    with tuned_for_consuming():
        if args.alternate is None:
            driven = Driven(driver_class(args.base), args.core == "stub")
            for records in fetched[:third]:
                driven.fetch(records, counted=False)
            gc.collect()
            t0 = time.process_time()
            for records in fetched[third:]:
                driven.fetch(records)
            took = time.process_time() - t0
            print(f"{'base ' + args.base if args.base else 'work tree'}, core {args.core}: "
                  f"{took / n_events * 1e6:.2f} µs an event (CPU, with ticks)")  # fmt: skip
            return 0
        alternate(fetched, third, n_events, args)
    return 0


def alternate(fetched: list[list[Any]], third: int, n_events: int, args: Any) -> None:
    """Each round: a fresh driver of each build, fed the fetches in turn, CPU per build."""
    builds = {f"base {args.alternate}": driver_class(args.alternate), "work tree":
              driver_class(None)}  # fmt: skip
    clock = time.process_time
    for n in range(args.rounds):
        ways = {name: Driven(cls, False) for name, cls in builds.items()}
        took = dict.fromkeys(ways, 0.0)
        order = list(ways.items()) if n % 2 == 0 else list(reversed(ways.items()))
        for i, records in enumerate(fetched):
            for name, driven in order:
                t0 = clock()
                driven.fetch(records)
                if i >= third:
                    took[name] += clock() - t0
        with open("/proc/loadavg", encoding="utf-8") as f:
            load = f.read().split()[0]
        print(
            f"round {n + 1} (load {load}): "
            + ", ".join(f"{name} {t / n_events * 1e6:.2f} µs an event" for name, t in took.items())
        )


if __name__ == "__main__":
    sys.exit(main())

"""The pure core counted in instructions: `Engine.apply` over a trace's events, decoded
beforehand and in the order `runwatch replay` applies them, on either of replay's shapes.

On a shared machine CPU time moves 10-30% from run to run; an instruction count does not.
The events are applied in slices inside a `functools.reduce`, so that valgrind's callgrind
counts only the core (`--toggle-collect=functools_reduce`): not the decoding, the reorder
window, the set-up or the alerts' serialization. The order is replay's own: one replay of
the trace (uncounted) records each event as its engine is handed it.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --toggle-collect=functools_reduce \\
        --callgrind-out-file=/tmp/cg.out .venv/bin/python bench/core_instructions.py \\
        [--shape heartbeats|incidents|fleet] [--rules every|seven] [--hours 4] [--copies 8]
    callgrind_annotate /tmp/cg.out | head   # the total: instructions in the core

Without valgrind it prints the core's CPU time an event too (one pass; a figure of this
machine's load, not of the build). The alert transitions it makes are counted and hashed,
so that two builds can be seen to say the same.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import sys
import time
from typing import Any

import orjson
from benchinfo import machine
from heartbeat_trace import heartbeat_heavy
from replay import ONLY_SEVEN, fleet_trace, multi_run_stream, records

from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

#: events a counted slice applies (one `reduce` each)
SLICE = 1024


class _Recording(Engine):
    """An engine that notes each event it is handed, in replay's order."""

    def __init__(self, config: RulesConfig) -> None:
        super().__init__(config)
        self.handed: list[Any] = []

    def apply(self, event: Any, now: float | None = None) -> list[Any]:
        self.handed.append(event)
        return super().apply(event, now)


def in_replay_order(lines: list[bytes], config: RulesConfig) -> list[Any]:
    """The trace's events as replay hands them to its engine (decoded, in order)."""
    engine = _Recording(config)
    for _ in replay(records(lines), engine, fleet=False):
        pass
    return engine.handed


def _apply_slice(out: list[Any], events: list[Any]) -> list[Any]:
    apply = _engine.apply
    for event in events:
        alerts = apply(event)
        if alerts:
            out.extend(alerts)
    return out


_engine: Engine


def main() -> int:
    global _engine
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=["heartbeats", "incidents", "fleet"],
                    default="heartbeats")  # fmt: skip
    ap.add_argument("--rules", choices=["every", "seven"], default="every")
    ap.add_argument("--hours", type=float, default=4.0, help="heartbeat-heavy: hours (4)")
    ap.add_argument("--copies", type=int, default=8, help="incidents: copies of each (8)")
    ap.add_argument("--fleet-runs", type=int, default=100, help="fleet: runs (100)")
    ap.add_argument("--fleet-seconds", type=float, default=240.0, help="fleet: seconds (240)")
    args = ap.parse_args()
    print(machine())
    if args.shape == "heartbeats":
        lines = heartbeat_heavy(hours=args.hours)
    elif args.shape == "incidents":
        lines = multi_run_stream(args.copies)
    else:
        lines = fleet_trace(args.fleet_runs, args.fleet_seconds)
    config = ONLY_SEVEN if args.rules == "seven" else RulesConfig.default()
    events = in_replay_order(lines, config)
    slices = [events[i : i + SLICE] for i in range(0, len(events), SLICE)]
    with tuned_for_consuming():
        _engine = Engine(config)
        gc.collect()
        out: list[Any] = []
        t0 = time.process_time()
        for piece in slices:
            functools.reduce(_apply_slice, (piece,), out)
        took = time.process_time() - t0
    digest = hashlib.sha256(b"".join(orjson.dumps(a.to_dict()) for a in out)).hexdigest()
    print(f"{args.shape}, {args.rules} rule(s): {len(events):,} events applied, "
          f"{len(out)} transitions (sha256 {digest[:16]}); "
          f"{took / len(events) * 1e6:.2f} µs an event (CPU, one pass)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

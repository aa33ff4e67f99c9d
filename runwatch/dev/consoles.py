"""The consoles a run would have written, rendered from an incident's events with the
programs' own formats -- what `runwatch diagnose` reads, and what the sandbox-hang incident
was first diagnosed from by hand: the driver's stderr and the vLLM server's stdout.

- driver (stderr): a Python logging line, `%(asctime)s %(levelname)s %(message)s`
  (`2026-03-14 14:01:00,000 INFO ...`), when a step's rollout starts -- the only timestamps
  in the file --, and tqdm bars written the way tqdm writes to a file: `\\r` + real
  `tqdm.format_meter(...)` text, the rollout's "Generating trajectories" bar and verl's
  "Training Progress" bar (verl/trainer/ppo/ray_trainer.py at b178a3c).
- vLLM (stdout): the V1 engine stats line (`vllm/v1/metrics/loggers.py`, 0.8+) with vLLM's
  logging prefix, `%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] ` with date format
  `%m-%d %H:%M:%S`, for each queue snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

V1 = (
    "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
    "tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache "
    "hit rate: %.1f%%"
)
ROLLOUT_BAR = "Generating trajectories"


def _utc(ts: float, fmt: str) -> str:
    return time.strftime(fmt, time.gmtime(ts))


def _logged(ts: float) -> str:
    """Python logging's default time: `2026-03-14 14:01:00,000`."""
    return _utc(ts, "%Y-%m-%d %H:%M:%S") + f",{int(ts * 1000) % 1000:03d}"


def driver_err(events: Iterable[dict[str, Any]]) -> str:
    """The driver's stderr: a logging line per rollout, the rollout and training bars."""
    from tqdm import tqdm  # type: ignore[import-untyped]

    out: list[str] = []
    started: dict[str, float] = {}  # bar -> when it (re)started
    for e in events:
        kind, ts = e["kind"], e["ts"]
        if kind == "run.started":
            out.append(f"{_logged(ts)} INFO training starts: {e.get('total_steps')} steps\n")
        elif kind == "step.started":
            out.append(f"\n{_logged(ts)} INFO rollout for step {e['step']}: 512 prompts\n")
        elif kind == "progress":
            name = ROLLOUT_BAR if e["name"] == "Rollout" else e["name"]
            if e["n"] == 0 or name not in started:
                started[name] = ts
            bar = tqdm.format_meter(e["n"], e.get("total"), ts - started[name], prefix=name,
                                    ncols=100)  # fmt: skip
            out.append("\r" + bar)
        elif kind == "run.finished":
            out.append(f"\n{_logged(ts)} WARNING interrupted (Ctrl-C): stopping the run\n")
    return "".join(out) + "\n"


def vllm_out(events: Iterable[dict[str, Any]]) -> str:
    """The vLLM server's stdout: its stats line at each queue snapshot."""
    lines = []
    for e in events:
        if e["kind"] != "inference.stats":
            continue
        running, waiting = e["running"], e["waiting"]
        gen = 25.0 * running
        prefix = f"INFO {_utc(e['ts'], '%m-%d %H:%M:%S')} [loggers.py:123] "
        lines.append(prefix + V1 % (gen * 0.3, gen, running, waiting, min(99.0, running / 6),
                                    12.5))  # fmt: skip
    return "\n".join(lines) + "\n"

"""The consoles a run would have written, rendered from a scenario's events with the
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
- Ray's driver console (`ray_driver`): the same run under Ray, the driver's stderr written
  by a TaskRunner actor and the vLLM stdout by a vLLMHttpServer actor on another node, both
  forwarded to the driver the way Ray does it: its log monitor reads each worker's file with
  `readline()` (python/ray/_private/log_monitor.py), so what a worker wrote since the last
  read arrives as lines, an unfinished one included -- a bar's `\\r` refreshes come as one
  line that starts with `\\r` --, and the driver prints each as
  `{DIM}{CYAN}({actor} pid={pid}[, ip={ip}]){RESET_ALL} {line}` (python/ray/_private/
  worker.py, print_worker_logs).
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


Written = list[tuple[float, str]]  # (when, what a process wrote then)


def driver_writes(events: Iterable[dict[str, Any]]) -> Written:
    """What the driver writes to its stderr, and when: a logging line per rollout, the
    rollout and training bars."""
    from tqdm import tqdm  # type: ignore[import-untyped]

    out: Written = []
    started: dict[str, float] = {}  # bar -> when it (re)started
    ts = 0.0
    for e in events:
        kind, ts = e["kind"], e["ts"]
        if kind == "run.started":
            out.append((ts, f"{_logged(ts)} INFO training starts: {e.get('total_steps')} steps\n"))
        elif kind == "step.started":
            out.append((ts, f"\n{_logged(ts)} INFO rollout for step {e['step']}: 512 prompts\n"))
        elif kind == "progress":
            name = ROLLOUT_BAR if e["name"] == "Rollout" else e["name"]
            if e["n"] == 0 or name not in started:
                started[name] = ts
            bar = tqdm.format_meter(e["n"], e.get("total"), ts - started[name], prefix=name,
                                    ncols=100)  # fmt: skip
            out.append((ts, "\r" + bar))
        elif kind == "run.finished":
            out.append((ts, f"\n{_logged(ts)} WARNING interrupted (Ctrl-C): stopping the run\n"))
    return [*out, (ts, "\n")]


def vllm_writes(events: Iterable[dict[str, Any]]) -> Written:
    """What the vLLM server writes to its stdout, and when: its stats line at each queue
    snapshot."""
    out: Written = []
    for e in events:
        if e["kind"] != "inference.stats":
            continue
        running, waiting = e["running"], e["waiting"]
        gen = 25.0 * running
        prefix = f"INFO {_utc(e['ts'], '%m-%d %H:%M:%S')} [loggers.py:123] "
        out.append((e["ts"], prefix + V1 % (gen * 0.3, gen, running, waiting,
                                            min(99.0, running / 6), 12.5) + "\n"))  # fmt: skip
    return out


def driver_err(events: Iterable[dict[str, Any]]) -> str:
    """The driver's stderr (`driver_writes`) as a file."""
    return "".join(text for _, text in driver_writes(events))


def vllm_out(events: Iterable[dict[str, Any]]) -> str:
    """The vLLM server's stdout (`vllm_writes`) as a file."""
    return "".join(text for _, text in vllm_writes(events))


#: The run's processes under Ray: (actor, pid, node ip or "" for the driver's node)
TASK_RUNNER = ("TaskRunner", 3249149, "")
VLLM_SERVER = ("vLLMHttpServer", 3262000, "10.0.0.2")
_DIM, _CYAN, _RESET = "\x1b[2m", "\x1b[36m", "\x1b[0m"  # colorama's Style.DIM, Fore.CYAN, ...


def forwarded(worker: tuple[str, int, str], writes: Written) -> Written:
    """A worker's writes as the Ray driver prints them: at each read of Ray's log monitor
    (one per distinct time here) every line written since, the unfinished one too, with
    the worker's prefix."""
    actor, pid, ip = worker
    head = f"{_DIM}{_CYAN}({actor} pid={pid}{f', ip={ip}' if ip else ''}){_RESET} "
    out: Written = []
    i = 0
    while i < len(writes):
        ts = writes[i][0]
        text = ""
        while i < len(writes) and writes[i][0] == ts:
            text += writes[i][1]
            i += 1
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the read ended at a line end
        out.extend((ts, head + line + "\n") for line in lines)
    return out


def ray_driver(events: Iterable[dict[str, Any]]) -> str:
    """The Ray driver's console of the run: Ray's own first line, then the TaskRunner's
    and the vLLM server's output as forwarded, in the order it was written."""
    events = list(events)
    start = events[0]["ts"]
    own = [(start, f"{_logged(start)}\tINFO worker.py:1888 -- Started a local Ray instance.\n")]
    merged = sorted(
        [*own, *forwarded(TASK_RUNNER, driver_writes(events)),
         *forwarded(VLLM_SERVER, vllm_writes(events))],
        key=lambda w: w[0],
    )  # fmt: skip
    return "".join(text for _, text in merged)

"""What `emit()`'s field check costs, next to pydantic on the same fields, and what one
`emit()` costs with no network behind it.

`emit()` checks a known kind's fields with a cheap check (`runwatch.emitters.checks`) and asks
pydantic only when that check is unsure. Two figures per kind, on fixed fields of the kinds a
training or rollout loop emits most:

  check         `FIELD_CHECKS[kind](fields)`: what every emit() of the kind pays
  pydantic      `validate(json.loads(line))` on the wire form: the obvious alternative
  emit()        one `Emitter.emit()` into a spool directory (no broker, no heartbeats):
                stamping, encoding, the check and the queue; p50 / p99 of single calls

CPU time, best of `--repeat` rounds for the first two; the ratio is pydantic's time over the
check's. Figures only: nothing here asserts a timing.

    .venv/bin/python bench/emit_checks.py [--quick] [--n 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchinfo import SAID, machine, percentile, say, write_section

from runwatch.emitters import Emitter
from runwatch.emitters.checks import FIELD_CHECKS
from runwatch.emitters.events import validate

#: verl's step metrics have dozens of keys like these
METRICS = {f"actor/m{i}": 0.5 + i for i in range(30)} | {
    f"timing_s/t{i}": 1.25 * i for i in range(10)
}

#: fixed fields, so that a run before a change and one after it time the same work
FIELDS: dict[str, dict[str, Any]] = {
    "step.done": {"step": 7, "duration_s": 12.5, "timing": {"gen": 7.5, "update_actor": 4.0}},
    "step.metrics": {"step": 7, "metrics": METRICS},
    "trajectory.phase": {"traj": "t-12345", "phase": "sandbox"},
    "request.done": {"req": "q-12345", "server": "vllm-0", "prompt_tokens": 100,
                     "completion_tokens": 2000, "status": "ok"},
    "progress": {"name": "Training Progress", "n": 511, "total": 512},
    "inference.stats": {"server": "vllm-0", "running": 3, "waiting": 0, "kv_cache_usage": 0.5,
                        "gen_tokens_per_s": 1234.5},
}  # fmt: skip


def cpu_ns(call: Any, n: int, repeat: int) -> float:
    """Best of `repeat` rounds of `n` calls, in CPU ns per call."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time_ns()
        for _ in range(n):
            call()
        best = min(best, (time.process_time_ns() - start) / n)
    return best


def emit_times(em: Emitter, kind: str, fields: dict[str, Any], n: int) -> list[float]:
    """µs per single `emit()` call, `n` calls (flushed every 1,000 so the queue stays short)."""
    clock = time.perf_counter_ns
    out = []
    for i in range(n):
        t0 = clock()
        em.emit(kind, **fields)
        out.append((clock() - t0) / 1000)
        if i % 1000 == 999:
            em.flush(30)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="calls per kind and figure")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 calls, 2 rounds, no write")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeat = 2_000, 2
    say(machine())
    say(f"{args.n:,} calls per kind; check and pydantic: CPU time, best of {args.repeat}")
    say("")
    say(f"{'kind':18s} {'check ns':>9s} {'pydantic ns':>12s} {'ratio':>6s} "
        f"{'emit p50 µs':>12s} {'emit p99 µs':>12s}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="runwatch-bench-checks-"))
    em = Emitter(run="bench-run", component="trainer", path=work, heartbeat=False)
    try:
        for kind, fields in FIELDS.items():
            check = FIELD_CHECKS[kind]
            assert check(fields), kind  # the cheap path, not pydantic's
            envelope = {"v": 1, "id": "0" * 32, "ts": 1.7e9, "run": "bench-run",
                        "src": {"component": "trainer"}}  # fmt: skip
            line = json.dumps({**envelope, "kind": kind, **fields})
            checked = cpu_ns(lambda c=check, f=fields: c(f), args.n, args.repeat)
            slow = cpu_ns(lambda x=line: validate(json.loads(x)), args.n // 4, args.repeat)
            emit_times(em, kind, fields, 1000)  # warm
            times = emit_times(em, kind, fields, args.n)
            say(f"{kind:18s} {checked:9.0f} {slow:12.0f} {slow / checked:5.1f}x "
                f"{percentile(times, 0.5):12.2f} {percentile(times, 0.99):12.2f}")  # fmt: skip
    finally:
        em.close()
        shutil.rmtree(work, ignore_errors=True)
    if not args.quick:
        title = "## What `emit()`'s field checks cost (`bench/emit_checks.py`)"
        write_section("emit-checks", [title, "", "```", *SAID, "```"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

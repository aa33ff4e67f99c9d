"""Where a live worker's CPU goes, part by part, in CPU seconds (not samples).

One `runwatch worker` (checkpoints forked every 30 s, /metrics scraped every 15 s as
Prometheus does) holds every partition of a local broker's `runwatch.events`, live, while
`--runs` runs send the fleet's schedule (`bench/fleet_shape.py`) in real time for
`--seconds`. The worker runs under `bench/timed_worker.py`, which clocks the thread's CPU
around each step of the event loop (by the task it is for) and around the synchronous parts
of the per-record path. Printed: the worker's CPU per event applied (the kernel's count, its
forked checkpoint children's apart), then per event: each task's steps (what they call
included) and, inside the consuming loop, its parts; what no step holds is the event loop's
own polling. `bench/worker_profile.py` samples the same worker with py-spy, line by line;
its shares count a busy thread's wall time, these its CPU. Figures only: nothing asserts.

    .venv/bin/python bench/worker_parts.py [--runs 5000] [--seconds 60] [--partitions 4]
        [--no-write] [-- WORKER ARGS]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from benchinfo import SAID, children_cpu, machine, proc_stats, say, write_section
from fleet import _produce
from worker_profile import applied, scrape_every

from runwatch.dev.broker import KafkaBroker, free_port
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics

TIMED = Path(__file__).resolve().with_name("timed_worker.py")
#: the consuming loop's parts (inside its task's steps), in the order printed
INSIDE = ["driver: feed_records", "aiokafka: records parsed", "fleet feed", "metrics: batch"]
#: the fleet stage's parts (inside its task's steps)
FLEET = ["fleet stage: release", "fleet stage: state dumped", "fleet stage: checkpoint packed"]
#: the core's calls (`--fine`): run state and rules, the rest of the worker's CPU around them
CORE = ["core: Engine.apply", "core: Engine.advance"]
#: inside the driver's feed, around the core (`--fine`)
AROUND = ["driver: clock offsets (shift)", "driver: decode (_plain)"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--fine", action="store_true",
                    help="clock the core's calls too (each call's clock taken off), and print "
                         "the worker's CPU around the core")  # fmt: skip
    ap.add_argument("worker", nargs="*", help="more `runwatch worker` arguments (after --)")
    args = ap.parse_args()
    say(machine())
    with tempfile.TemporaryDirectory() as tmp, KafkaBroker(progress=lambda _: None) as broker:
        out = str(Path(tmp) / "parts.json")
        prefix = f"w{uuid.uuid4().hex[:8]}."
        topics = Topics(prefix)
        asyncio.run(ensure_topics(broker.bootstrap, topics, args.partitions))
        port = free_port()
        cmd = [sys.executable, str(TIMED), "worker", "--kafka", broker.bootstrap,
               "--topic-prefix", prefix, "--app-id", f"parts-{uuid.uuid4().hex[:6]}",
               "--partitions", "1", "--metrics-port", str(port), "--checkpoint-every", "30",
               *args.worker]  # fmt: skip
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, RUNWATCH_TIMED_OUT=out,
                                         RUNWATCH_TIMED_FINE="1" if args.fine else ""))  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
        reader.start()
        stop = threading.Event()
        try:
            deadline = time.monotonic() + 120
            while not any("live on partitions" in line for line in lines):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the worker did not go live:\n" + "".join(lines[-20:]))
                time.sleep(0.1)
            threading.Thread(target=scrape_every, args=(port, 15.0, stop), daemon=True).start()
            Path(out + ".go").touch()
            while not Path(out + ".start").exists():
                time.sleep(0.05)
            cpu0, done0, forked0 = proc_stats(proc.pid)[1], applied(port), children_cpu(proc.pid)
            runs = [f"run-{k}" for k in range(args.runs)]
            asyncio.run(_produce(broker.bootstrap, topics.events, runs, args.seconds, 1, [],
                                 queue.Queue()))  # fmt: skip
            time.sleep(3)  # the last records applied
            cpu, done = proc_stats(proc.pid)[1] - cpu0, applied(port) - done0
            forked = children_cpu(proc.pid) - forked0
            Path(out + ".stop").touch()
            while not Path(out + ".end").exists():
                time.sleep(0.05)
        finally:
            stop.set()
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        start = json.loads(Path(out + ".start").read_text())
        end = json.loads(Path(out + ".end").read_text())
    report(args, start, end, cpu, done, forked)
    if not args.no_write:
        write_section("worker-parts", ["## A live worker's CPU part by part "
                                       "(`bench/worker_parts.py`)", "", "```", *SAID,
                                       "```"])  # fmt: skip
    return 0


Totals = dict[str, list[float]]


def report(
    args: argparse.Namespace, start: Totals, end: Totals, cpu: float, done: float, forked: float
) -> None:
    """Per event: the whole, each task (the consuming loop's parts under it), the rest."""

    def per(name: str) -> tuple[float, int]:
        seconds, calls = end.get(name, [0.0, 0])
        before, called = start.get(name, [0.0, 0])
        return (seconds - before) / done * 1e6, int(calls - called)

    say(f"{args.runs:,} runs, {args.partitions} partitions, {args.seconds:g} s of the fleet's "
        f"schedule: {done:,.0f} events applied live; worker CPU {cpu:.1f} s = "
        f"{cpu / done * 1e6:.2f} µs an event, its forked checkpoint children "
        f"{forked / done * 1e6:.2f} µs more")  # fmt: skip
    steps = sorted((n for n in end if n.startswith(("task ", "callback "))),
                   key=lambda n: -per(n)[0])  # fmt: skip
    held = 0.0
    for name in steps:
        us, calls = per(name)
        held += us
        if us >= 0.01:
            say(f"  {name[:52]:<52} {us:6.2f} µs  ({calls:,} steps)")
        inside = {"task StreamWorker.consume": INSIDE, "task FleetStageRole.run": FLEET}
        for part in inside.get(name, []):
            us, calls = per(part)
            say(f"    {part:<50} {us:6.2f} µs  ({calls:,} calls)")
    for name in ("driver: tick", "metrics: exposition", "collector: generation 0",
                 "collector: generation 1", "collector: generation 2"):  # fmt: skip
        us, calls = per(name)
        say(f"  ... of which {name:<38} {us:6.2f} µs  ({calls:,} calls)")
    say(f"  {'the event loop itself (polls, timers; no step)':<52} "
        f"{cpu / done * 1e6 - held:6.2f} µs")  # fmt: skip
    user, system = per("process: user")[0], per("process: system")[0]
    faults = per("process: page faults")[0] / 1e6
    say(f"  (the kernel's count: user {user:.2f} µs, system {system:.2f} µs an event; "
        f"{faults * 1000:.1f} page faults a thousand events)")  # fmt: skip
    if args.fine:
        inner, added = end.get("calibration: a call's overhead", [0.0, 0.0])
        core = clocks = 0.0
        for name in AROUND:
            us, calls = per(name)
            us -= calls * inner / done * 1e6
            clocks += calls * added / done * 1e6
            say(f"  {name:<52} {us:6.2f} µs  ({calls:,} calls, each less {inner * 1e9:.0f} "
                "ns of clock)")  # fmt: skip
        for name in CORE:
            us, calls = per(name)
            us -= calls * inner / done * 1e6
            core += us
            clocks += calls * added / done * 1e6
            say(f"  {name:<52} {us:6.2f} µs  ({calls:,} calls, each less {inner * 1e9:.0f} "
                "ns of clock)")  # fmt: skip
        whole = cpu / done * 1e6 - clocks
        say(f"  the worker less the core's clocks ({clocks:.2f} µs): {whole:.2f} µs an event; "
            f"around the core (the whole less the core) {whole - core:.2f}, with the "
            f"checkpoint children {whole - core + forked / done * 1e6:.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

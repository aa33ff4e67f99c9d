"""Where a live worker's CPU goes per record, sampled with py-spy at the fleet's run shape.

One `runwatch worker` (checkpoints every 30 s, forked; /metrics scraped every 15 s, as
Prometheus does) holds every partition of a local broker's `runwatch.events`, live, while
`--runs` runs send the fleet's schedule (`bench/fleet_shape.py`) in real time for
`--seconds`. py-spy samples the worker -- and the children it forks to pickle checkpoints
-- the whole time (idle time, waiting in a poll, is not sampled), and each sample is put in
one category: first by whom the work is for (a checkpoint, /metrics, publishing, fetching),
else by the innermost frame of the per-event path:

  fetch/parse    aiokafka's fetcher, record parsing, connection reads; the consuming loop
  decode         stream/decode.py (msgspec; pydantic for a refusal's reason)
  duplicate id   the event-id check and the id ring (`Engine.seen`)
  clock offset   the host's clock-offset estimate and correction, the reading clock
  apply          the run state folding the event in (stream/state/), the engine's bookkeeping
  rules          the rules (stream/rules/), their evaluation and the alert lifecycle
  publish        the worker's publisher and the producer (faust's, aiokafka's)
  checkpoint     everything a checkpoint does in the worker, and its forked child
  metrics        stream/metrics/, prometheus-client (scrapes included)
  other          the event loop, timers, the rest

Printed: samples per category, their share, and CPU µs per record (the worker's own CPU time
over the records it applied, split by the shares; the forked children's samples beside
them). On a loaded machine py-spy also counts time a thread waited for a core, so shares are
shares of the worker's busy time. Figures only: nothing here asserts.

    .venv/bin/python bench/worker_profile.py [--runs 2500] [--seconds 120] [--partitions 4]
        [--kafka HOST:PORT] [--keep STACKS] [--analyze STACKS] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

from benchinfo import SAID, children_cpu, machine, say, write_section
from fleet import _produce
from processes import Worker

from runwatch.dev.broker import KafkaBroker, free_port
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))

#: Categories decided by any frame of a sample's stack, in this order: who the work is for.
OWNERS: list[tuple[str, re.Pattern[str]]] = [
    (
        "checkpoint",
        re.compile(
            r"stream/(checkpoint|checkpointer|recovery)\.py|stream/kafka/"
            r"(snapshot|checkpoints|checkpointing|handover)\.py|"
            r"output_ends|\._?checkpoint|_hand_over|_promise"
        ),
    ),
    ("metrics", re.compile(r"stream/metrics/|prometheus_client")),
    (
        "publish",
        re.compile(
            r"stream/kafka/publish\.py|aiokafka/producer/|faust/transport/"
            r"producer|_publish_for"
        ),
    ),
    (
        "fetch/parse",
        re.compile(
            r"aiokafka/consumer/|aiokafka/record/|ConsumingLoop\._fetch|"
            r"ConsumingLoop\._pass_markers|fed\.<locals>\.<listcomp>|"
            r"aiokafka/conn\.py|aiokafka/client\.py"
        ),
    ),
]
#: Categories of the per-event path, decided by the innermost frame that matches one.
INNER: list[tuple[str, re.Pattern[str]]] = [
    ("decode", re.compile(r"stream/decode\.py|msgspec|pydantic")),
    ("duplicate id", re.compile(r"RecentIds\.")),
    (
        "clock offset",
        re.compile(
            r"stream/(timekeeping/)?(skew|reading|timebounds|ahead)\.py|_shifted|"
            r"^_source "
        ),
    ),
    (
        "rules",
        re.compile(
            r"stream/rules/|stream/(alerts|incidents|breaker)\.py|"
            r"Engine\.(_evaluate|_transition|_alert|advance|restate|"
            r"_breaker_changed|take_breakers) "
        ),
    ),
    ("apply", re.compile(r"stream/state/|stream/engine\.py")),
]
#: Lines whose own samples (the call, not what it calls) belong to a category: the id
#: checks (`in seen`), the calls of the driver's per-event loop, the poll.
LINES: list[tuple[str, str, re.Pattern[str]]] = [
    ("duplicate id", "runwatch.stream.live", re.compile(r"event\.id in seen")),
    ("duplicate id", "runwatch.stream.engine",
     re.compile(r"event_?\.?id in (self\.)?seen|_add_id\(seen|seen\._order|"
                r"order\.append\(event_id\)|seen\.capacity|seen\.discard")),
    ("decode", "runwatch.stream.live", re.compile(r"decode\(raw\)")),
    ("clock offset", "runwatch.stream.live", re.compile(r"clocks\.observe\(|reading\.late")),
    ("apply", "runwatch.stream.live", re.compile(r"engine\.apply\(")),
    ("fetch/parse", "runwatch.stream.kafka.consume", re.compile(r"await self\._fetch\(\)")),
    ("checkpoint (forked child)", "runwatch.stream.kafka.snapshot",
     re.compile(r"_write_all\(write, _framed\(")),
]  # fmt: skip


def marked_lines() -> dict[str, str]:
    """py-spy's `(path:line)` of each of LINES, and its category."""
    import importlib

    out = {}
    for category, name, pattern in LINES:
        path = Path(importlib.import_module(name).__file__ or "")
        short = "/".join([*name.split(".")[1:-1], path.name])  # as py-spy names it
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(text):
                out[f"({short}:{n})"] = category
    return out


def categorize(stack: list[str], marked: dict[str, str]) -> str:
    def mark(frame: str) -> str | None:
        at = frame.rfind(" (")
        return marked.get(frame[at + 1 :]) if at >= 0 else None

    if any(mark(f) == "checkpoint (forked child)" for f in stack):
        return "checkpoint (forked child)"
    for name, pattern in OWNERS:
        if any(pattern.search(f) for f in stack):
            return name
    for frame in reversed(stack):  # the innermost first
        if (category := mark(frame)) is not None:
            return category
        for name, pattern in INNER:
            if pattern.search(frame):
                return name
    return "other"


def analyze(raw: Path) -> Counter[str]:
    marked = marked_lines()
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        parts = [p.strip() for p in stack.split(";")]
        if parts and parts[0].startswith("process "):
            parts = parts[1:]
        counts[categorize(parts, marked)] += int(n)
    return counts


def scrape_every(port: int, seconds: float, stop: threading.Event) -> None:
    while not stop.wait(seconds):
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()


def applied(port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith("runwatch_events_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2500)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    ap.add_argument("--kafka", metavar="HOST:PORT")
    ap.add_argument("--keep", metavar="FILE", help="keep py-spy's raw stacks here")
    ap.add_argument("--analyze", metavar="FILE", help="only sort the stacks of a kept run")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.analyze:
        report(analyze(Path(args.analyze)), float("nan"))
        return 0
    if not Path(PY_SPY).exists():
        raise SystemExit("py-spy is not installed (pip install py-spy)")
    say(machine())
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        bootstrap = (
            args.kafka or stack.enter_context(KafkaBroker(progress=lambda _: None)).bootstrap
        )
        prefix = f"p{uuid.uuid4().hex[:8]}."  # its own topics and group on a given broker
        topics = Topics(prefix)
        asyncio.run(ensure_topics(bootstrap, topics, args.partitions))
        port = free_port()
        worker = Worker(bootstrap, prefix, f"prof-{uuid.uuid4().hex[:6]}", None,
                        "--metrics-port", str(port), "--checkpoint-every", "30")  # fmt: skip
        raw = Path(args.keep or Path(tmp) / "stacks.txt")
        try:
            worker.wait_live()
            stop = threading.Event()
            scraper = threading.Thread(target=scrape_every, args=(port, 15.0, stop), daemon=True)
            scraper.start()
            cpu0, done0 = worker.cpu_s(), applied(port)
            forked0 = children_cpu(worker.proc.pid)
            spy = subprocess.Popen([PY_SPY, "record", "--pid", str(worker.proc.pid), "--rate",
                                    str(args.rate), "--subprocesses", "--format", "raw",
                                    "--output", str(raw), "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            out: queue.Queue[object] = queue.Queue()
            runs = [f"run-{k}" for k in range(args.runs)]
            asyncio.run(_produce(bootstrap, topics.events, runs, args.seconds, 1, [], out))
            time.sleep(3)  # the last records applied
            cpu, done = worker.cpu_s() - cpu0, applied(port) - done0
            forked = children_cpu(worker.proc.pid) - forked0
            stop.set()
            spy.send_signal(2)  # SIGINT: py-spy writes what it has
            spy.wait(60)
        finally:
            worker.stop()
        if not raw.exists() or not raw.stat().st_size:  # no ptrace here (a container without
            # CAP_SYS_PTRACE): said, not failed -- figures only
            assert spy.stderr is not None
            say(f"py-spy could not sample the worker: {spy.stderr.read().decode()[-500:]}")
            return 0
        counts = analyze(raw)
    per = cpu / done * 1e6 if done else float("nan")
    say(f"{args.runs:,} runs, {args.partitions} partitions, {args.seconds:g} s of the fleet's "
        f"schedule: {done:,.0f} records applied live, worker CPU {cpu:.1f} s = {per:.1f} µs a "
        f"record; its forked checkpoint children {forked:.1f} s = "
        f"{forked / done * 1e6 if done else float('nan'):.1f} µs a record more")  # fmt: skip
    report(counts, per)
    if not args.no_write:
        write_section("worker-profile", ["## Where a live worker's CPU goes per record "
                                         "(`bench/worker_profile.py`)", "", "```", *SAID,
                                         "```"])  # fmt: skip
    return 0


ORDER = ["fetch/parse", "decode", "duplicate id", "clock offset", "apply", "rules", "publish",
         "checkpoint", "metrics", "other"]  # fmt: skip


def report(counts: Counter[str], per: float) -> None:
    """The worker's own samples by category (a share of its CPU per record), then the
    forked children's, beside them."""
    own = sum(counts[name] for name in ORDER) or 1
    say(f"  {'':<26} {own:7,} samples of the worker itself")
    for name in ORDER:
        share = counts[name] / own
        say(f"  {name:<26} {counts[name]:7,} samples  {share:6.1%}  {share * per:6.2f} µs")
    child = counts["checkpoint (forked child)"]
    say(
        f"  {'checkpoint (forked child)':<26} {child:7,} samples  (off the live path: "
        f"{child / own:.0%} of the worker's own)"
    )


if __name__ == "__main__":
    sys.exit(main())

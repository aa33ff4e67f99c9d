"""What the benchmarks share: where and when they ran (figures mean little without it), the
RESULTS.md sections they write, a many-run event stream, and following alerts on Kafka.

Benchmarks run as `python bench/<name>.py`, so this module imports as `benchinfo`.
"""

from __future__ import annotations

import bisect
import heapq
import os
import platform
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# A bench stopped with SIGTERM (timeout, kill, CI) leaves through SystemExit, so the `finally`
# blocks and context managers that stop its brokers and workers run, as on Ctrl-C.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

#: Where `make bench` collects figures: each bench owns one section between its markers.
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    """CPUs, CPU model, Python, date and load average, e.g. for the first line of a report."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "?"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"machine: {os.cpu_count()} CPUs ({cpu}); Python {platform.python_version()} "
        f"({platform.python_implementation()}); {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average {load}"
    )


#: the lines a bench said (`say`), for its section of RESULTS.md
SAID: list[str] = []


def say(line: str, flush: bool = True) -> None:
    """Print a line of a bench's figures, and keep it for its section of RESULTS.md."""
    print(line, flush=flush)
    SAID.append(line)


def write_section(name: str, body: list[str]) -> None:
    """Replace (or append) this bench's section of RESULTS.md, between its markers."""
    start, end = f"<!-- bench:{name} start -->", f"<!-- bench:{name} end -->"
    text = RESULTS.read_text() if RESULTS.exists() else (
        "# Benchmark results\n\nEach bench (`make bench`) writes its own section between its "
        "markers; a re-run replaces only its section. The file holds the latest figures of "
        "each bench, with the machine and the date; earlier ones, and the before/after pairs "
        "changes were measured with, are in git (`git log -p bench/RESULTS.md`).\n"
    )  # fmt: skip
    block = "\n".join([start, *body, end])
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q` quantile of `values` (NaN for none): what every bench reports
    as p50 / p99."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process."""
    rss = 0.0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def children_cpu(pid: int) -> float:
    """CPU seconds of a process's children it waited for (the worker's forked checkpoints)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def follow_alerts(
    bootstrap: str, topic: str, on_alert: Callable[[dict], None], done: threading.Event
) -> None:
    """Call `on_alert` with every alert on `topic` from its beginning until `done` is set
    (run it in a thread)."""
    import orjson
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level="read_committed")  # fmt: skip
    try:
        while not done.is_set() and not c.partitions_for_topic(topic):
            time.sleep(0.1)
        c.assign([TopicPartition(topic, p) for p in c.partitions_for_topic(topic) or ()])
        c.seek_to_beginning()
        while not done.is_set():
            for records in c.poll(timeout_ms=50).values():
                for r in records:
                    on_alert(orjson.loads(r.value))
    finally:
        c.close()


def interleaved_scenarios(copies: int, seed: int = 11) -> list[dict[str, Any]]:
    """Every scenario of runwatch.dev.scenarios under `copies` run ids, each copy shifted by up
    to 3 h, merged by ts: dozens of live runs interleaved as one partition group carries them."""
    from runwatch.dev.scenarios import SCENARIOS

    rng = random.Random(seed)
    merged: list[dict[str, Any]] = []
    for name, build in SCENARIOS.items():
        template = build()
        for k in range(copies):
            run = f"{name}-{k:03d}"
            offset = rng.uniform(0, 3 * 3600)
            for i, e in enumerate(template):
                merged.append({**e, "run": run, "id": f"{run}-{i:07d}", "ts": e["ts"] + offset})
    merged.sort(key=lambda e: e["ts"])
    return merged


def long_history(n_events: int, end: float, seed: int = 5) -> Iterator[tuple[float, str, bytes]]:
    """`n_events` of weeks of history, as a partition holds it: every scenario of
    runwatch.dev.scenarios in waves 4 h apart under new run ids (so most runs finished or
    went silent long ago and a day's waves are live), ending at `end`, with random 128-bit
    event ids as emitters make them. (ts, run, JSON), in time order, made as they are read."""
    import orjson

    from runwatch.dev.scenarios import SCENARIOS

    templates = [(name, build()) for name, build in SCENARIOS.items()]
    per_wave = sum(len(t) for _, t in templates)
    waves = max(1, -(-n_events // per_wave))
    t_min = min(e["ts"] for _, t in templates for e in t)
    span = max(e["ts"] for _, t in templates for e in t) - t_min
    # wave k starts at first + k * 4 h; the n-th event of the merged waves falls at `end`
    stamps = sorted(e["ts"] - t_min for _, t in templates for e in t)

    def before(t: float) -> int:  # events of all waves stamped at most t (with first = 0)
        return sum(bisect.bisect_right(stamps, t - k * 4 * 3600) for k in range(waves))

    low, high = 0.0, (waves - 1) * 4 * 3600 + span
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if before(mid) < n_events else (low, mid)
    first = end - high

    def wave(k: int) -> Iterator[tuple[float, str, bytes]]:
        rng = random.Random(seed * 100_003 + k)
        offset = first + k * 4 * 3600 - t_min
        out = []
        for name, template in templates:
            run = f"{name}-w{k:04d}"
            for e in template:
                ts = round(e["ts"] + offset, 3)
                out.append((ts, run, {**e, "run": run, "id": f"{rng.getrandbits(128):032x}",
                                      "ts": ts}))  # fmt: skip
        out.sort(key=lambda x: x[0])
        for ts, run, e in out:
            yield ts, run, orjson.dumps(e)

    # a merge that opens a wave only when the stream reaches its start: a few in memory
    heap: list[tuple[float, int, str, bytes, Iterator[tuple[float, str, bytes]]]] = []
    opened = made = 0
    while made < n_events:
        while opened < waves and (not heap or first + opened * 4 * 3600 <= heap[0][0]):
            it = wave(opened)
            ts, run, raw = next(it)
            heapq.heappush(heap, (ts, opened, run, raw, it))
            opened += 1
        if not heap:
            return
        ts, k, run, raw, it = heapq.heappop(heap)
        yield ts, run, raw
        made += 1
        following = next(it, None)
        if following is not None:
            heapq.heappush(heap, (following[0], k, following[1], following[2], it))

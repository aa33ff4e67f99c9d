"""The live fetch wait (`runwatch worker --fetch-wait`): worker CPU per event against alert
delay, on a fleet's steady trickle.

For each number of runs and each fetch wait in turn, on one local broker: one `runwatch
worker` pinned to CPU 1, live on a fresh 4-partition events topic, while bench/fleet.py's
producer (pinned to CPU 0) sends the runs' events in real time (bench/fleet_shape.py,
~2.7 events/s per run) with a NaN fault every 2 s in a different run. Printed: the worker's
CPU per event over the middle half of the run (the start, when every process beats for the
first time, left out), and the delay of the faults from the send to the alert on
`runwatch.alerts`. A wait of 0 is aiokafka's default (a fetch answered as soon as a record is
there): the obvious alternative, measured in the same run, and the ratio is against it.

Figures only, no pass/fail.

    .venv/bin/python bench/fetch_wait.py [--runs 1500 4000] [--waits 0 0.05 0.1]
        [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
import uuid
from typing import Any

from benchinfo import SAID, machine, say, write_section
from fleet import PROBE_EVERY, Alerts, produce, spread
from processes import Worker

from runwatch.dev.broker import KafkaBroker
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics

PARTITIONS = 4


def pinned_produce(*args: Any) -> None:
    """bench/fleet.py's producer, on CPU 0 (the worker has CPU 1)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    produce(*args)


def one(bootstrap: str, n: int, wait: float, seconds: float) -> tuple[float, list[float], int]:
    """(worker CPU µs per event in the middle half, NaN alert delays in s, events sent)."""
    topics = Topics(f"fw{uuid.uuid4().hex[:6]}.")
    asyncio.run(ensure_topics(bootstrap, topics, PARTITIONS))
    worker = Worker(bootstrap, topics.prefix, f"fw-{uuid.uuid4().hex[:6]}", 1, "--partitions",
                    str(PARTITIONS), "--fetch-wait", str(wait))  # fmt: skip
    alerts = Alerts(bootstrap, topics.alerts)
    producer = None
    try:
        worker.wait_live()
        runs = [f"job-{i:05d}" for i in range(n)]
        faults = [(t, runs[(i * 7919) % n], "nan")
                  for i, t in enumerate(range(5, int(seconds) - 5, int(PROBE_EVERY)))]  # fmt: skip
        spawn = mp.get_context("spawn")
        queue: Any = spawn.Queue()
        plan = (bootstrap, topics.events, runs, seconds, 0, faults, queue)
        producer = spawn.Process(target=pinned_produce, args=plan)
        producer.start()
        time.sleep(seconds / 4)
        cpu0, t0 = worker.cpu_s(), time.monotonic()
        time.sleep(seconds / 2)
        cpu, span = worker.cpu_s() - cpu0, time.monotonic() - t0
        sent_at: dict[str, float] = {}
        while (got := queue.get(timeout=seconds + 120)).get("done") is None:
            sent_at[got["run"]] = got["sent"]
        rate = got["sent"] / got["took"]
        producer.join(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            firing = {a["run"]: at for a, at in alerts.seen
                      if a["rule"] == "non_finite_metric" and a["state"] == "firing"}  # fmt: skip
            if set(sent_at) <= set(firing):
                break
            time.sleep(0.2)
        delays = [firing[run] - at for run, at in sent_at.items() if run in firing]
        if len(delays) < len(sent_at):
            say(f"  ({len(sent_at) - len(delays)} of {len(sent_at)} faults did not alert)")
        return cpu / (rate * span) * 1e6, delays, got["sent"]
    finally:
        if producer is not None and producer.is_alive():
            producer.terminate()
        alerts.close()
        worker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1500, 4000])
    ap.add_argument("--waits", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    say(machine())
    with KafkaBroker(progress=lambda _: None) as broker:  # in a temporary folder, removed
        for n in args.runs:
            base = None
            for wait in args.waits:
                us, delays, sent = one(broker.bootstrap, n, wait, args.seconds)
                base = us if base is None else base
                say(f"{n:,} runs ({sent / args.seconds:,.0f} events/s), --fetch-wait {wait:g}: "
                    f"{us:.1f} µs of worker CPU per event ({base / us:.2f}x of wait "
                    f"{args.waits[0]:g}); NaN alert {spread(delays)}")  # fmt: skip
    write_section("fetch-wait", ["## The live fetch wait (`bench/fetch_wait.py`)", "", "```",
                                 *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

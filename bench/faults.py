"""Alert delay under traffic, with and without worker churn; restart-to-live under traffic
(issue 29). The longer form of tests/integration/test_cluster_faults.py.

A local broker, `runwatch.events` with 4 partitions, and a producer sending heartbeats of 200
runs (two processes each) at `--rates` events/s. Every 4 s a probe run starts beating and
stops 8 s later without `final`: `heartbeat_lost` (timeout 5 s) must fire 5 s after its last
beat. Two scenarios per rate, each `--seconds` long:

- steady: two workers in one group, left alone;
- churn: the same, but every 15 s one of them is killed with SIGKILL and started again
  (its partitions wait the session timeout, 6 s, then are rebuilt by the other or by it).

Printed per scenario: each probe's delay from its condition becoming true (last beat +
timeout) to its firing on `runwatch.alerts` (median, 90th percentile, worst, how many
fired), false firings (any other run's, while the traffic lasts), and under churn the
restarted workers' spawn-to-live times; then the ratio of the worst delays. Figures only.

    .venv/bin/python bench/faults.py [--rates 1000,10000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchinfo import SAID, machine, say, write_section
from kafka import KafkaConsumer, KafkaProducer
from processes import Worker

from runwatch.dev.broker import KafkaBroker
from runwatch.dev.envelope import event
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics

TIMEOUT = 5.0
PROBE_EVERY, PROBE_LIVES = 4.0, 8.0
CHURN_EVERY = 15.0
RUNS = 200


def beat(run: str, process: str, pid: int, ts: float) -> bytes:
    src = {"component": process, "host": "bench", "pid": pid}
    return json.dumps(event("heartbeat", ts, run, src)).encode()


class Traffic:
    """The producer: `rate` heartbeats/s over RUNS runs, and the probes."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.topic, self.rate = topic, rate
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
        self.probes: dict[str, float] = {}  # probe run -> its last beat's ts
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traffic")
        self.thread.start()

    def _run(self) -> None:
        start = time.time()
        sent, tick = 0, 0.01
        while not self.stop.is_set():
            now = time.time()
            due = int((now - start) * self.rate)
            for i in range(sent, due):
                run = f"run-{i % RUNS}"
                process = "trainer" if (i // RUNS) % 2 else "rollout"
                self.producer.send(self.topic, beat(run, process, 100 + i % RUNS, now),
                                   key=run.encode())  # fmt: skip
            sent = due
            elapsed = now - start
            k = int(elapsed // PROBE_EVERY)
            for j in range(max(0, k - 2), k + 1):  # the probes alive now beat each tick
                born = j * PROBE_EVERY
                if born <= elapsed < born + PROBE_LIVES:
                    run = f"probe-{j}"
                    self.producer.send(self.topic, beat(run, "rollout", 9000 + j, now),
                                       key=run.encode())  # fmt: skip
                    self.probes[run] = now
            time.sleep(tick)
        self.producer.flush()
        self.producer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def firings(bootstrap: str, topic: str) -> list[tuple[dict[str, Any], float]]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000,
                             isolation_level="read_committed")  # fmt: skip
    try:
        return [(a, r.timestamp / 1000) for r in consumer
                if (a := json.loads(r.value))["state"] == "firing"]  # fmt: skip
    finally:
        consumer.close()


def scenario(bootstrap: str, rate: int, seconds: float, churn: bool) -> dict[str, Any]:
    topics = Topics(f"f{uuid.uuid4().hex[:8]}.")
    asyncio.run(ensure_topics(bootstrap, topics, 4))
    config = Path(tempfile.mkdtemp(prefix="runwatch-bench-faults-")) / "rules.toml"
    config.write_text(f"[rules.heartbeat_lost]\ntimeout = {TIMEOUT}\n")
    atexit.register(shutil.rmtree, config.parent, ignore_errors=True)
    group = f"faults-{uuid.uuid4().hex[:8]}"
    extra = ("--partitions", "4", "--config", str(config), "--session-timeout", "6")

    def worker() -> Worker:
        return Worker(bootstrap, topics.prefix, group, None, *extra)

    workers = [worker(), worker()]
    for w in workers:
        w.wait_live(timeout=120)
    traffic = Traffic(bootstrap, topics.events, rate)
    spawn_to_live: list[float] = []
    started = time.monotonic()
    try:
        victim = 0
        while (elapsed := time.monotonic() - started) < seconds:
            if churn and elapsed >= CHURN_EVERY * (len(spawn_to_live) + 1):
                workers[victim].proc.kill()
                workers[victim].stop()
                t = time.monotonic()
                workers[victim] = worker()
                workers[victim].wait_live(timeout=300)
                spawn_to_live.append(time.monotonic() - t)
                victim = 1 - victim
            time.sleep(0.2)
    finally:
        traffic.close()
        ended = time.time()  # from here every run is silent: their alerts are true
        time.sleep(TIMEOUT + 10)  # the last probes' alerts
        for w in workers:
            w.stop()
    fired = firings(bootstrap, topics.alerts)
    delays = []
    for run, last in traffic.probes.items():
        due = last + TIMEOUT
        at = [t for a, t in fired if a["run"] == run and a["rule"] == "heartbeat_lost"]
        if at and due < time.time() - 5:
            delays.append(min(at) - due)
    false = [a for a, t in fired if not a["run"].startswith("probe-") and t < ended]
    return {"delays": sorted(delays), "probes": len(traffic.probes), "false": len(false),
            "spawn_to_live": spawn_to_live}  # fmt: skip


def describe(name: str, got: dict[str, Any]) -> str:
    d = got["delays"]
    if not d:
        return f"  {name}: no probe fired ({got['probes']} probes, {got['false']} false)"
    p90 = d[min(len(d) - 1, int(0.9 * len(d)))]
    line = (f"  {name}: {len(d)}/{got['probes']} probes fired, delay median "
            f"{statistics.median(d):.1f}s, p90 {p90:.1f}s, worst {d[-1]:.1f}s; "
            f"{got['false']} false firings")  # fmt: skip
    if got["spawn_to_live"]:
        s = got["spawn_to_live"]
        line += (f"; {len(s)} restarts, spawn to live median {statistics.median(s):.1f}s, "
                 f"worst {max(s):.1f}s")  # fmt: skip
    return line


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="1000,10000", help="events/s, comma-separated")
    p.add_argument("--seconds", type=float, default=60.0)
    args = p.parse_args()
    say(machine())
    with KafkaBroker(progress=lambda _: None) as broker:
        for rate in [int(r) for r in args.rates.split(",")]:
            say(f"{rate:,} events/s, {args.seconds:.0f}s per scenario:", flush=True)
            steady = scenario(broker.bootstrap, rate, args.seconds, churn=False)
            say(describe("steady", steady), flush=True)
            churn = scenario(broker.bootstrap, rate, args.seconds, churn=True)
            say(describe("churn ", churn), flush=True)
            if steady["delays"] and churn["delays"]:
                ratio = max(churn["delays"]) / max(max(steady["delays"]), 0.1)
                say(f"  churn / steady worst delay: {ratio:.1f}x", flush=True)

    write_section(
        "faults",
        [
            "## Alert delay under traffic, with and without worker churn (`bench/faults.py`)",
            "",
            "```",
            *SAID,
            "```",
        ],
    )


if __name__ == "__main__":
    main()

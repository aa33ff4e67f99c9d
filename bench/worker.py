"""The live worker against a real broker: throughput, rebuild rate, end-to-end latency.

Throughput. A fresh single-partition events topic; `runwatch worker` (a subprocess pinned
to one CPU with taskset) starts on it and goes live; then it is paused (SIGSTOP), N events
are produced (every scenario of `runwatch.dev.scenarios` under many run ids, interleaved by
event time and rebased to end an hour ago, with record timestamps = event ts so the skew
correction has nothing to correct), and a marker event (a NaN metric on its own run) last.
The worker is resumed (SIGCONT) and the clock stops when the marker's alert is on
runwatch.alerts: N / elapsed is the live path's rate -- Faust fetch, take_events batches,
decode, clock check, engine, publishing -- with the worker's CPU seconds beside it.

Rebuild. The worker is stopped and started again on the same topic: it re-reads the
partition from the start (alerts held back, compared with runwatch.alerts) and says how
fast.

Latency. With the worker live, an `Emitter` (Kafka) emits one `step.metrics` with a NaN
value per fresh run, `--rate` times a second; the time from `emit()` to the
non_finite_metric alert arriving on runwatch.alerts is measured per run: p50/p99, idle, and
again while a background producer adds `--load` events/s.

The obvious alternative, Faust's own agent stream (`take_events` batches), was measured at
~12k events/s on one core (2026-11-21, when the worker still carried it as `--consumer
faust`); it left production code when every role moved onto the one consuming loop.

Restart (bench/restart.py): restart-to-ready with 1M, 5M and 10M events retained, from a
checkpoint and without one, and what a checkpoint costs. Goals of issue 16: ready in <= 10 s
at 10M with checkpoints, flat as retention grows; < 5% off the live path's events/s.

Figures only, no pass/fail. Goals of issue 3: >= 20k events/s per worker, p99 < 1 s.

    .venv/bin/python bench/worker.py [--kafka HOST:PORT] [--events 200000] [--samples 200]
        [--retained 1000000,5000000,10000000] [--only restart]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from benchinfo import interleaved_scenarios, percentile
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from processes import Worker
from restart import checkpoint_cost, restart_worker

from runwatch.dev import envelope
from runwatch.dev.scenarios import SCENARIOS


def stream(copies: int, end: float, seed: int = 11) -> list[tuple[float, str, bytes]]:
    """Every scenario under `copies` run ids, shifted up to 3 h apart, merged by ts, ending
    at `end`: (ts, run, JSON) triples."""
    merged = interleaved_scenarios(copies, seed)
    shift = end - merged[-1]["ts"]
    out = []
    for e in merged:
        e["ts"] = round(e["ts"] + shift, 3)
        out.append((e["ts"], e["run"], orjson.dumps(e)))
    return out


def event(run: str, kind: str, ts: float, **fields: Any) -> bytes:
    src = {"component": "trainer", "host": "bench", "pid": 1}
    return orjson.dumps(envelope.event(kind, ts, run, src, **fields))


class AlertWatch:
    """Reads runwatch.alerts in a thread; records when each run's first alert arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.first: dict[str, float] = {}
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                       isolation_level="read_committed")  # fmt: skip
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._consumer
        while not self._stop.is_set():
            parts = c.partitions_for_topic(self._topic)
            if parts:
                c.assign([TopicPartition(self._topic, p) for p in parts])
                c.seek_to_beginning()
                break
            time.sleep(0.1)
        while not self._stop.is_set():
            for records in c.poll(timeout_ms=100).values():
                now = time.time()
                for r in records:
                    run = orjson.loads(r.value)["run"]
                    self.first.setdefault(run, now)

    def wait_for(self, run: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while run not in self.first:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no alert for {run}")
            time.sleep(0.002)
        return self.first[run]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def create_events_topic(bootstrap: str, prefix: str) -> None:
    """CreateTime: record timestamps are the producer's, set to the event ts below."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(
                    f"{prefix}runwatch.events",
                    1,
                    1,
                    topic_configs={"message.timestamp.type": "CreateTime"},
                )
            ]
        )
    finally:
        admin.close()


def throughput(bootstrap: str, n_events: int, cpu: int | None) -> tuple[str, Worker, str]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    create_events_topic(bootstrap, prefix)
    app_id = f"bench-{uuid.uuid4().hex[:8]}"
    worker = Worker(bootstrap, prefix, app_id, cpu)
    worker.wait_live()
    copies = max(1, round(n_events / 7500 / len(SCENARIOS)))
    lines = stream(copies, end=time.time() - 3600)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20,
                             max_request_size=16 << 20, acks=1)  # fmt: skip
    topic = f"{prefix}runwatch.events"
    watch = AlertWatch(bootstrap, f"{prefix}runwatch.alerts")
    time.sleep(1)
    worker.proc.send_signal(signal.SIGSTOP)
    t = time.perf_counter()
    for ts, run, raw in lines:
        producer.send(topic, raw, key=run.encode(), timestamp_ms=int(ts * 1000))
    marker_ts = time.time()
    marker = event("bench-marker", "step.metrics", marker_ts, step=1, metrics={"loss": None})
    marker = marker.replace(b'"loss":null', b'"loss":NaN')
    producer.send(topic, marker, key=b"bench-marker", timestamp_ms=int(marker_ts * 1000))
    producer.flush()
    producer.close()
    produce_s = time.perf_counter() - t
    cpu0 = worker.cpu_s()
    t0 = time.time()
    worker.proc.send_signal(signal.SIGCONT)
    done = watch.wait_for("bench-marker", timeout=600)
    cpu = worker.cpu_s() - cpu0
    watch.close()
    n = len(lines) + 1
    elapsed = done - t0
    runs = copies * len(SCENARIOS)
    report = (
        f"live path: {n:,} events ({len(lines) // runs} per run, {runs} runs) "
        f"consumed in {elapsed:.2f}s = {n / elapsed:,.0f} "
        f"events/s wall; worker CPU {cpu:.2f}s = {n / cpu:,.0f} events per CPU-second "
        f"(produced in {produce_s:.1f}s while the worker was paused)"
    )
    return report, worker, prefix


def rebuild(bootstrap: str, worker: Worker, prefix: str, cpu: int | None) -> tuple[str, Worker]:
    worker.stop()
    app_id = f"bench-{uuid.uuid4().hex[:8]}"
    again = Worker(bootstrap, prefix, app_id, cpu)
    line = again.wait_live(timeout=600)
    m = re.search(r"rebuilt from (\d+) events in ([\d.]+)s \(([\d,]+) events/s\)", line)
    return (f"rebuild: {m.group(0)}" if m else line), again


def latency(bootstrap: str, prefix: str, samples: int, rate: float, load: int) -> str:
    from runwatch.emitters import Emitter

    watch = AlertWatch(bootstrap, f"{prefix}runwatch.alerts")
    topic = f"{prefix}runwatch.events"
    stop = threading.Event()
    loader: threading.Thread | None = None
    if load:

        def background() -> None:
            p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
            i = 0
            while not stop.is_set():
                t = time.time()
                for _ in range(max(1, load // 20)):
                    i += 1
                    run = f"load-{i % 50}"
                    p.send(topic, event(run, "heartbeat", t), key=run.encode())
                stop.wait(max(0.0, 0.05 - (time.time() - t)))
            p.close()

        loader = threading.Thread(target=background, daemon=True)
        loader.start()
        time.sleep(1)
    emitters = []
    sent: dict[str, float] = {}
    tag = uuid.uuid4().hex[:6]
    try:
        for i in range(samples):
            run = f"lat-{tag}-{i}"
            em = Emitter(run=run, component="trainer", kafka=bootstrap, topic=topic,
                         heartbeat=False)  # fmt: skip
            emitters.append(em)
            em.emit("step.started", step=1)  # warm: connection made before the clock starts
            em.flush(10)
            sent[run] = time.time()
            em.emit("step.metrics", step=1, metrics={"loss": float("nan")})
            time.sleep(1 / rate)
            if len(emitters) > 20:
                emitters.pop(0).close()
        lat = sorted(watch.wait_for(run, 30) - t for run, t in sent.items())
    finally:
        stop.set()
        if loader:
            loader.join(5)
        for em in emitters:
            em.close()
        watch.close()
    p50 = statistics.median(lat)
    p99 = percentile(lat, 0.99)
    what = f"with {load:,} background events/s" if load else "idle"
    return (
        f"latency emit()->alert on runwatch.alerts ({what}, {len(lat)} samples): "
        f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka", help="bootstrap servers (default: start a local broker)")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rate", type=float, default=20.0, help="latency samples per second")
    ap.add_argument("--load", type=int, default=5000, help="background events/s, 0 for none")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin the worker to (-1: none)")
    ap.add_argument(
        "--retained",
        default="1000000,5000000,10000000",
        help="events retained for the restart part, comma-separated (0: skip)",
    )
    ap.add_argument("--only", choices=["restart"], help="run one part only")
    args = ap.parse_args()
    sizes = [int(x) for x in args.retained.split(",") if int(x) > 0]
    cpu = None if args.cpu < 0 else args.cpu
    broker = None
    tmp = None
    if args.kafka:
        bootstrap = args.kafka
    else:
        from runwatch.dev.broker import KafkaBroker

        tmp = tempfile.mkdtemp(prefix="runwatch-bench-")
        broker = KafkaBroker(Path(tmp))
        bootstrap = broker.start()
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}; broker {bootstrap}")
    worker = None
    try:
        if args.only == "restart" or sizes:
            for line in checkpoint_cost(min(sizes or [1_000_000]) if sizes else 1_000_000):
                print(line, flush=True)
            restart_worker(bootstrap, sizes, Worker)
        if args.only:
            return 0
        report, worker, prefix = throughput(bootstrap, args.events, cpu)
        print(report, flush=True)
        report, worker = rebuild(bootstrap, worker, prefix, cpu)
        print(report, flush=True)
        print(latency(bootstrap, prefix, args.samples, args.rate, 0), flush=True)
        if args.load:
            print(latency(bootstrap, prefix, args.samples, args.rate, args.load), flush=True)
    finally:
        if worker is not None:
            worker.stop()
        if broker is not None:
            broker.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

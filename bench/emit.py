"""What one `Emitter.emit()` costs the caller, broker up and broker down, next to kafka-python.

The goal is emit() p99 <= 20 µs in both cases: a trainer must never feel the monitoring,
least of all when Kafka is away. The baseline is a plain kafka-python `producer.send()` in
the same run, which is asynchronous too but blocks for up to `max_block_ms` whenever it lacks
metadata (a small value here, so the bench finishes).

Scenarios, each timing every call with perf_counter_ns:
  up            broker running
  down          broker stopped after the producer / emitter connected (an outage)
  unreachable   emitter pointed at a port nothing listens on (never connected)
  stacks        broker running, with the stack responder off (`stacks=False`) and with it
                answering a new request 20 times a second (each a `capture()` of every
                thread on the run view's follower thread): the worst a hang's request can
                cost

    .venv/bin/python bench/emit.py [--n 20000] [--rates 0,10000] [--bootstrap HOST:PORT]

Without --bootstrap it starts its own broker (runwatch.dev.broker) so it can stop it.
Prints figures; asserts nothing about timing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runwatch.dev.broker import KafkaBroker, free_port
from runwatch.emitters import Emitter
from runwatch.emitters.producer import close_producer
from runwatch.emitters.runview import RunView, StacksAsked

FIELDS = {"step": 0, "duration_s": 12.5, "timing": {"gen": 7.5, "update_actor": 4.0}}


def measure(call: Callable[[int], Any], n: int, rate: float) -> dict[str, float]:
    """Time `n` calls; with `rate` > 0, pace them at that many per second."""
    times = [0] * n
    errors = 0
    gap = 1e9 / rate if rate > 0 else 0
    clock = time.perf_counter_ns
    start = clock()
    for i in range(n):
        if gap:
            while clock() - start < i * gap:
                pass
        t0 = clock()
        try:
            call(i)
        except Exception:
            errors += 1
        times[i] = clock() - t0
    wall = (clock() - start) / 1e9
    times.sort()

    def pct(p: float) -> float:
        return times[min(n - 1, int(n * p))] / 1000

    return {"p50_us": pct(0.50), "p99_us": pct(0.99), "p999_us": pct(0.999),
            "max_us": times[-1] / 1000, "mean_us": statistics.fmean(times) / 1000,
            "calls_per_s": n / wall, "errors": errors}  # fmt: skip


def emitter_call(em: Emitter) -> Callable[[int], None]:
    def call(i: int) -> None:
        em.emit("step.done", step=i, duration_s=12.5, timing=FIELDS["timing"])

    return call


def raw_call(producer: Any, topic: str) -> Callable[[int], None]:
    encode = json.JSONEncoder(separators=(",", ":")).encode

    def call(i: int) -> None:
        value = encode({**FIELDS, "step": i}).encode()
        producer.send(topic, key=b"bench-run", value=value)

    return call


def scenarios(
    bootstrap: str, broker: KafkaBroker | None, n: int, rate: float, spool: Path
) -> dict[str, dict[str, float]]:
    """Every scenario at one pace; with our own `broker`, stop it for the 'down' ones."""
    from kafka import KafkaProducer

    topic = f"bench-{uuid.uuid4().hex[:8]}.runwatch.events"
    results: dict[str, dict[str, float]] = {}

    def emitter(address: str) -> Emitter:
        return Emitter(run="bench-run", component="trainer", kafka=address, topic=topic,
                       spool=spool, heartbeat_interval=1.0)  # fmt: skip

    em = emitter(bootstrap)
    em.emit("step.done", step=-1)
    em.flush(30)
    results["emit, broker up"] = measure(emitter_call(em), n, rate)
    started = time.monotonic()
    em.close(timeout=60)
    results["emit, broker up"]["close_s"] = time.monotonic() - started
    # what the sender made of them: a record per event, or batches of the run's events
    results["emit, broker up"]["events_per_record"] = (n + 1) / records_on(bootstrap, topic)

    raw = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                        compression_type="gzip")  # fmt: skip
    raw.send(topic, b"warm").get(30)
    raw.config["max_block_ms"] = 100  # metadata is in; from now on block briefly at most
    results["producer.send(), broker up"] = measure(raw_call(raw, topic), n, rate)
    raw.flush(60)

    if broker is not None:
        em = emitter(bootstrap)
        em.emit("step.done", step=-1)
        em.flush(30)
        broker.stop()
        results["emit, broker down"] = measure(emitter_call(em), n, rate)
        started = time.monotonic()
        em.close(timeout=5)
        results["emit, broker down"]["close_s"] = time.monotonic() - started
        results["emit, broker down"]["dropped"] = em.dropped
        results["producer.send(), broker down"] = measure(raw_call(raw, topic), n, rate)
    close_producer(raw, 1.0)  # kafka-python's close() raises over unsent records

    em = emitter(f"127.0.0.1:{free_port()}")
    results["emit, unreachable"] = measure(emitter_call(em), n, rate)
    em.close(timeout=1)

    if broker is not None:
        bootstrap = broker.start()
    em = Emitter(run="bench-run", component="trainer", kafka=bootstrap, topic=topic,
                 spool=spool, heartbeat_interval=1.0, stacks=False)  # fmt: skip
    em.emit("step.done", step=-1)
    em.flush(30)
    results["emit, stack responder off"] = measure(emitter_call(em), n, rate)
    em.close(timeout=60)
    em = Emitter(run="bench-run", component="trainer", kafka=bootstrap, topic=topic,
                 spool=spool, heartbeat_interval=1.0, stacks_interval=0.05)  # fmt: skip
    responder, follower = em._responder, em._follower
    assert responder is not None
    assert follower is not None
    follower.switch(AlwaysAsking())
    em.emit("step.done", step=-1)
    em.flush(30)
    results["emit, stacks taken 20/s"] = measure(emitter_call(em), n, rate)
    results["emit, stacks taken 20/s"]["answers"] = len(responder.answered)
    em.close(timeout=60)
    return results


def records_on(bootstrap: str, topic: str) -> int:
    """Records on `topic` now (its partitions' end offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return max(1, sum(consumer.end_offsets(parts).values()))
    finally:
        consumer.close()


class AlwaysAsking:
    """A run view that asks for stacks anew at every look."""

    name = "always asking"

    def __init__(self) -> None:
        self.n = 0

    def fetch(self) -> bytes:
        self.n += 1
        asked = StacksAsked(request=f"bench-{self.n}", at=None)
        view = RunView(run="bench-run", ts=0.0, alerts=[], lifted=0, resumed=None, stacks=asked)
        return view.to_json()

    def close(self) -> None:
        pass


#: what a scenario reports beside its per-call figures
EXTRAS = ("close_s", "dropped", "answers", "events_per_record")


def report(n: int, rate: float, results: dict[str, dict[str, float]]) -> None:
    pace = "flat out" if not rate else f"paced at {rate:.0f}/s"
    print(f"\nper-call cost, {n} calls per scenario, {pace}")
    header = f"{'scenario':32s} {'p50 µs':>8s} {'p99 µs':>8s} {'p99.9 µs':>9s} {'max µs':>10s}"
    print(header + f" {'calls/s':>10s} {'errors':>6s}")
    for name, r in results.items():
        print(f"{name:32s} {r['p50_us']:8.1f} {r['p99_us']:8.1f} {r['p999_us']:9.1f} "
              f"{r['max_us']:10.0f} {r['calls_per_s']:10.0f} {r['errors']:6.0f}")  # fmt: skip
    for name, r in results.items():
        extra = {k: v for k, v in r.items() if k in EXTRAS}
        if extra:
            print(f"  {name}: " + ", ".join(f"{k}={v:.2f}" for k, v in extra.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="calls per scenario")
    parser.add_argument("--rates", default="0,10000",
                        help="comma-separated calls per second; 0 is flat out")  # fmt: skip
    parser.add_argument("--bootstrap", help="use this broker (then 'down' is not measured)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # the baseline's outage noise

    work = Path(tempfile.mkdtemp(prefix="runwatch-bench-"))
    broker = None if args.bootstrap else KafkaBroker(work / "broker", port=free_port())
    print(f"Python {platform.python_version()} on {platform.machine()} {sys.platform}, "
          f"{os.cpu_count()} CPUs; broker {'given' if args.bootstrap else 'local'}")  # fmt: skip
    figures = {}
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            bootstrap = args.bootstrap or broker.start()  # type: ignore[union-attr]
            results = scenarios(bootstrap, broker, args.n, rate, work / f"spool-{rate:.0f}")
            report(args.n, rate, results)
            figures[f"{rate:.0f}"] = results
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"n": args.n, "by_rate": figures}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

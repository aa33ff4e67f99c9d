"""`runwatch simulate`: a simulated cluster's events, to a file, to `runwatch serve`, or to
Kafka; live destinations are paced on the wall clock at `--speed`.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.kafka_cli import add_kafka_security_args, connect_check
from runwatch.simulate import KINDS, Cluster, Event
from runwatch.timeparse import parse_time

BATCH_S = 0.05  # live destinations get one request per this many wall seconds at most
MAX_BATCH = 5000


def paced(events: Iterable[Event]) -> Iterator[list[Event]]:
    """Batches of events whose ts has come (events carry wall-clock ts when live)."""
    batch: list[Event] = []
    started = time.monotonic()
    for event in events:
        wait = event["ts"] - time.time()
        if wait > 0 or len(batch) >= MAX_BATCH:
            if batch:
                yield batch
                batch = []
            wait = event["ts"] - time.time()
            if wait > 0:
                time.sleep(wait)
        batch.append(event)
        if time.monotonic() - started > BATCH_S and batch:
            yield batch
            batch, started = [], time.monotonic()
    if batch:
        yield batch


class HttpSink:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/") + "/v1/events"
        self.headers = {"Content-Type": "application/x-ndjson"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.sent = 0

    def send(self, batch: list[Event]) -> None:
        body = b"".join(orjson.dumps(e) + b"\n" for e in batch)
        for attempt in range(50):
            req = urllib.request.Request(self.url, body, self.headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    resp.read()
                self.sent += len(batch)
                return
            except urllib.error.HTTPError as err:
                if err.code < 500:
                    print(f"runwatch simulate: {err.code} {err.read()[:300]!r}", file=sys.stderr)
                    return
            except OSError:
                pass
            time.sleep(min(2.0, 0.05 * 2**attempt))
        raise SystemExit(f"runwatch simulate: {self.url} does not answer")


class KafkaSink:
    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","), linger_ms=5, **security.kafka_python()
        )
        self.topic = topic
        self.sent = 0

    def send(self, batch: list[Event]) -> None:
        for e in batch:
            self.producer.send(self.topic, orjson.dumps(e), e["run"].encode())
        self.producer.flush()
        self.sent += len(batch)

    def close(self) -> None:
        self.producer.close()


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a cluster of RL jobs (with faults) and send their events",
        description="N concurrent RL jobs (trainer ranks, orchestrator, rollout worker, "
        "inference servers) with injectable faults, deterministic for a --seed.",
    )
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--fault", action="append", default=[], choices=KINDS,
                   help="inject into the next job (repeat: job 0, 1, ...)")  # fmt: skip
    p.add_argument("--fault-step", type=int, default=3, help="step at which faults begin")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    p.add_argument("--trajectories", type=int, default=32, help="per step")
    p.add_argument("--prefix", default="sim", help="run ids are PREFIX-SEED-jobNNN")
    p.add_argument("--start", help="file output: clock start (ISO or epoch; default now)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="JSON Lines file ('-': standard output), written at once")
    where.add_argument("--url", help="runwatch serve base URL, e.g. http://127.0.0.1:8787")
    where.add_argument("--kafka", help="bootstrap servers (topic runwatch.events)")
    p.add_argument("--token", help="bearer token for --url (default $RUNWATCH_TOKEN)")
    p.add_argument("--topic", default="runwatch.events")
    add_kafka_security_args(p)
    p.set_defaults(func=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    import os

    if args.speed <= 0:
        print("runwatch simulate: --speed must be > 0", file=sys.stderr)
        return 2
    try:
        cluster = Cluster(
            args.jobs, faults=args.fault, seed=args.seed, duration=args.duration,
            fault_step=args.fault_step, prefix=args.prefix, trajectories=args.trajectories,
        )  # fmt: skip
    except ValueError as err:
        print(f"runwatch simulate: {err}", file=sys.stderr)
        return 2
    if args.out:
        t0 = parse_time(args.start) if args.start else time.time()
        out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
        n = 0
        try:
            for e in cluster.events(t0, args.speed):
                out.write(orjson.dumps(e) + b"\n")
                n += 1
        finally:
            if out is not sys.stdout.buffer:
                out.close()
        print(f"runwatch simulate: {n} events from {args.jobs} jobs", file=sys.stderr)
        return 0
    sink: HttpSink | KafkaSink
    if args.url:
        sink = HttpSink(args.url, args.token or os.environ.get("RUNWATCH_TOKEN"))
    else:
        security = connect_check(args, "simulate")
        if isinstance(security, int):
            return security
        sink = KafkaSink(args.kafka, args.topic, security)
    try:
        for batch in paced(cluster.events(time.time() + 0.2, args.speed)):
            sink.send(batch)
    except KeyboardInterrupt:
        pass
    finally:
        if isinstance(sink, KafkaSink):
            sink.close()
    print(f"runwatch simulate: sent {sink.sent} events from {args.jobs} jobs", file=sys.stderr)
    return 0

"""Where `runwatch simulate` sends a simulated cluster's events: a JSON Lines file at once, or
`runwatch serve` / Kafka paced on the wall clock (events carry wall-clock ts when live)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from typing import IO

import orjson

from runwatch.dev.envelope import Event
from runwatch.dev.simulate import Cluster
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.logs import say

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
                    say(f"{err.code} {err.read()[:300]!r}")
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


def write_file(cluster: Cluster, out: IO[bytes], t0: float, speed: float) -> int:
    """Every event of the simulation, at once; returns how many."""
    n = 0
    for e in cluster.events(t0, speed):
        out.write(orjson.dumps(e) + b"\n")
        n += 1
    return n


def send_live(
    cluster: Cluster,
    sink: HttpSink | KafkaSink,
    speed: float,
    progress: Callable[[str], None] = lambda line: None,
    every: float = 5.0,
    t0: float | None = None,
) -> int:
    """Send the events as their time comes (the simulation's clock starts at `t0`, default
    now), saying how far it is every `every` seconds; Ctrl-C stops early, and the jobs still
    running end as stopped jobs do. Returns how many were sent."""
    started = time.monotonic()
    said = started
    wall = cluster.duration / speed
    try:
        for batch in paced(cluster.events(time.time() + 0.2 if t0 is None else t0, speed)):
            sink.send(batch)
            if time.monotonic() - said >= every:
                said = time.monotonic()
                progress(f"{said - started:.0f} of {wall:.0f} s, {sink.sent:,} events sent")
    except KeyboardInterrupt:
        progress("stopping: ending the jobs still running")
        if closing := cluster.stop(time.time()):
            sink.send(closing)
    finally:
        if isinstance(sink, KafkaSink):
            sink.close()
    return sink.sent

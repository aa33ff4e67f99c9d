"""The Emitter against a real broker: keys, validity, and a broker outage in the middle of a run.

The outage test runs its own broker on a fixed port (the session broker is shared and must
stay up), stops it while the emitter keeps emitting, and starts it again on the same port.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from kafka import KafkaConsumer, TopicPartition

from runwatch.dev.broker import KafkaBroker, free_port
from runwatch.emitters import Emitter, validate
from runwatch.stream.records import is_batch

pytestmark = pytest.mark.integration


def events_of(record: Any) -> list[dict[str, Any]]:
    """The events a record carries: its value, or a batch's lines (contract section 8)."""
    if is_batch(record.headers):
        return [json.loads(line) for line in record.value.splitlines() if line.strip()]
    return [json.loads(record.value)]


def consume(bootstrap: str, topic: str, want: int, timeout: float = 90.0) -> list[Any]:
    """Every record of `topic` from the start to the ends it has now. Each caller closed its
    emitters first (close flushes: the broker acknowledged all they sent), so anything sent
    twice is among these, with no sleep to guess when it would come; `want` distinct event
    ids must be."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False)  # fmt: skip
    records: list[Any] = []
    try:
        parts = wait_for(lambda: consumer.partitions_for_topic(topic), f"{topic} known", timeout)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to its ends {ends}"
            for batch in consumer.poll(timeout_ms=500).values():
                records += batch
    finally:
        consumer.close()
    ids = {e["id"] for r in records for e in events_of(r)}
    assert len(ids) >= want, f"{len(ids)} distinct events on {topic}, {want} sent"
    return records


def first_of_each(records: list[Any]) -> list[dict[str, Any]]:
    """Events in arrival order, each id once: what a consumer applies."""
    seen: set[str] = set()
    events = []
    for record in records:
        for event in events_of(record):
            if event["id"] not in seen:
                seen.add(event["id"])
                events.append(event)
    return events


def test_events_arrive_keyed_by_run(kafka_broker: str, kafka_topic: str, tmp_path: Path) -> None:
    em = Emitter(run="run/7@lab", component="trainer", kafka=kafka_broker, topic=kafka_topic,
                 spool=tmp_path, heartbeat_interval=0.2, rank=0)  # fmt: skip
    em.emit("run.started", labels={"algo": "grpo"}, total_steps=50)
    for step in range(50):
        em.emit("step.done", step=step, duration_s=0.1, timing={"gen": 0.05})
    em.emit("run.finished", status="ok")
    em.close()
    records = consume(kafka_broker, kafka_topic, want=53)
    assert {r.key for r in records} == {b"run/7@lab"}
    events = first_of_each(records)
    for event in events:
        validate(event)
    assert len(events) == sum(len(events_of(r)) for r in records)  # no outage, no duplicates
    # what was emitted together went as batches of the run's events (contract section 8)
    assert len(records) < len(events)
    assert any(is_batch(r.headers) and len(events_of(r)) > 1 for r in records)
    assert all(is_batch(r.headers) == (len(events_of(r)) > 1) for r in records)
    work = [e for e in events if e["kind"] != "heartbeat"]
    assert [e["kind"] for e in work] == ["run.started", *["step.done"] * 50, "run.finished"]
    assert [e["step"] for e in work[1:-1]] == list(range(50))
    assert events[-1]["kind"] == "heartbeat"
    assert events[-1]["final"] is True
    assert not list(tmp_path.glob("kafka-*/*.jsonl"))  # nothing had to wait on disk


@pytest.mark.slow
# kafka-python 3.0.12 leaks one socket per failed reconnect in its network thread (allocated in
# kafka/net/selector.py), in the seconds before the emitter notices the outage.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
def test_broker_outage_loses_nothing(tmp_path: Path, kafka_topic: str) -> None:
    broker = KafkaBroker(tmp_path / "broker", port=free_port(), progress=lambda _: None)
    bootstrap = broker.start()
    spool = tmp_path / "spool"
    em = Emitter(run="outage-run", component="rollout", kafka=bootstrap, topic=kafka_topic,
                 spool=spool, heartbeat_interval=0.5, close_timeout=30)  # fmt: skip
    slowest = 0.0
    step = 0

    def emit_some(n: int) -> None:
        nonlocal slowest, step
        for _ in range(n):
            started = time.perf_counter()
            em.emit("step.done", step=step)
            slowest = max(slowest, time.perf_counter() - started)
            step += 1

    try:
        emit_some(200)
        assert em.flush(timeout=30)
        broker.stop()
        for _ in range(30):  # keep emitting through the outage, as a trainer would
            emit_some(10)
            time.sleep(0.1)
        assert em.flush(timeout=30)
        assert list(spool.glob("kafka-*/*.jsonl")), "the outage should have spooled events"
        broker.start()
        emit_some(200)
        em.close()
        records = consume(bootstrap, kafka_topic, want=step)
    finally:
        em.close(timeout=0)
        broker.stop()
    assert slowest < 0.1, f"an emit() took {slowest:.3f}s during the outage"
    events = first_of_each(records)
    steps = [e["step"] for e in events if e["kind"] == "step.done"]
    assert steps == list(range(step))  # each exactly once after dedup by id, and in order
    assert {r.key for r in records} == {b"outage-run"}
    assert events[-1]["kind"] == "heartbeat"
    assert events[-1]["final"] is True
    assert not list(spool.glob("kafka-*/*.jsonl"))  # the backlog was sent and removed


def test_backlog_of_an_exited_process_is_sent_by_the_next_emitter(
    kafka_broker: str, kafka_topic: str, tmp_path: Path
) -> None:
    """Only to its own destination: what a worker left for this broker is sent by the next
    emitter for it; what another worker left for another broker stays where it is."""
    nowhere = f"127.0.0.1:{free_port()}"
    pid = os.fork()
    if pid == 0:  # a worker that dies while the broker is out of its reach
        code = 1
        try:
            # this broker, but no route to it from here (the producer is sent elsewhere)
            em = Emitter(run="dead-worker", component="rollout", kafka=kafka_broker,
                         spool=tmp_path, heartbeat=False, topic=kafka_topic,
                         kafka_options={"bootstrap_servers": [nowhere]})  # fmt: skip
            for n in range(20):
                em.emit("trajectory.started", traj=f"t-{n}")
            em.close(timeout=0.5)
            other = Emitter(run="elsewhere", component="rollout", kafka=nowhere, spool=tmp_path,
                            heartbeat=False, topic=kafka_topic)  # fmt: skip
            for n in range(5):
                other.emit("trajectory.started", traj=f"e-{n}")
            other.close(timeout=0.5)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len({p.parent for p in tmp_path.glob(f"kafka-*/events-*-{pid}-*.jsonl")}) == 2

    em = Emitter(run="survivor", component="trainer", kafka=kafka_broker, topic=kafka_topic,
                 spool=tmp_path, heartbeat=False)  # fmt: skip
    em.emit("step.started", step=1)
    em.close()
    records = consume(kafka_broker, kafka_topic, want=21)
    by_key: dict[bytes, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for record in records:
        for event in events_of(record):
            if event["id"] not in seen:
                seen.add(event["id"])
                by_key.setdefault(record.key, []).append(event)
    assert [e["traj"] for e in by_key[b"dead-worker"]] == [f"t-{n}" for n in range(20)]
    assert all(e["src"]["pid"] == pid for e in by_key[b"dead-worker"])
    assert [e["kind"] for e in by_key[b"survivor"]] == ["step.started"]
    assert b"elsewhere" not in by_key  # never sent to a broker it was not going to
    left = [json.loads(line)["run"] for p in tmp_path.glob("kafka-*/*.jsonl")
            for line in p.read_text().splitlines()]  # fmt: skip
    assert left == ["elsewhere"] * 5


def test_a_forked_child_leaves_the_parents_connection_alone(
    kafka_broker: str, kafka_topic: str, tmp_path: Path
) -> None:
    em = Emitter(run="forking-run", component="rollout", kafka=kafka_broker, topic=kafka_topic,
                 spool=tmp_path, heartbeat=False)  # fmt: skip
    em.emit("step.done", step=0)
    assert em.flush(30)  # connected: the child inherits a live producer
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for n in range(10):
                em.emit("trajectory.started", traj=f"child-{n}")
            em.close(timeout=30)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for step in range(1, 11):
        em.emit("step.done", step=step)
    em.close()
    events = first_of_each(consume(kafka_broker, kafka_topic, want=21))
    parent = [e["step"] for e in events if e["src"]["pid"] == os.getpid()]
    child = [e["traj"] for e in events if e["src"]["pid"] == pid]
    assert parent == list(range(11))
    assert child == [f"child-{n}" for n in range(10)]
    assert not list(tmp_path.glob("kafka-*/*.jsonl"))  # nobody had to spool

"""The Kafka sink against a real broker: kill -9 in the middle of a batch, restart, and every
event is stored exactly once; readers work while it runs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_catches_sigterm
from kafka import KafkaAdminClient, KafkaProducer

from runwatch.dev import scenarios
from runwatch.emitters.topics import BATCH_HEADER, Topics
from runwatch.store import NotAStore, Store, StoreLocked
from runwatch.stream.kafka.admin import ensure_topics

pytestmark = pytest.mark.integration

RUNWATCH = str(Path(sys.executable).parent / "runwatch")


def produce(bootstrap: str, topic: str, values: list[tuple[str, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024)
    try:
        for key, value in values:
            producer.send(topic, key=key.encode(), value=value)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


#: `runwatch sink` with a flush held before its commit (the writer's `before_commit` hook)
HELD_SINK = str(Path(__file__).with_name("held_sink.py"))


class SinkProcess:
    """`runwatch sink ARGS`; with `held=(MARKER, K)`, its K-th flush creates MARKER and waits
    before the commit, for the test to kill it mid-batch."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        log: Path | None = None,
        held: tuple[Path, int] | None = None,
    ) -> None:
        self.log = log.open("wb") if log is not None else None
        command = [RUNWATCH, "sink"]
        if held is not None:
            command = [sys.executable, HELD_SINK, str(held[0]), str(held[1])]
        self.proc = subprocess.Popen(
            [*command, *args],
            stdout=subprocess.DEVNULL,
            stderr=self.log or subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.stderr is not None
        self.proc.stderr.close()

    def stop(self) -> str:
        wait_catches_sigterm(self.proc.pid)  # a sink stopped while starting just dies
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        if self.log is not None:
            self.log.close()
        assert self.proc.returncode == 0, err
        return err.decode() if err is not None else ""

    def ensure_gone(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)
        if self.log is not None:
            self.log.close()


def stored(db: Path) -> tuple[Counter[str], int, int]:
    """(rows per run, rows, distinct ids) -- read while the sink may be writing."""
    with Store.reader(db, wait=60) as store:
        per_run = Counter(
            dict(store.con.execute("SELECT run, count(*) FROM events GROUP BY run").fetchall())
        )
        (total, distinct) = store.con.execute(
            "SELECT count(*), count(DISTINCT id) FROM events"
        ).fetchall()[0]
    return per_run, total, distinct


def stored_rows(db: Path) -> int:
    """How many rows the history holds; -1 while the sink has not yet created it (a reader
    can catch the file between its creation and its first header write)."""
    try:
        return stored(db)[1]
    except NotAStore:
        return -1


def wait_until(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_kill_9_mid_batch_then_restart_loses_and_duplicates_nothing(
    kafka_broker: str, kafka_topic: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    events = scenarios.sandbox_hang()[:6000] + scenarios.zero_reward(last_step=300)
    values = [(e["run"], json.dumps(e).encode()) for e in events]
    values += values[:500]  # an emitter that sent some events twice
    values.append(("bad-run", b"{not json"))
    want = Counter(e["run"] for e in events)
    alerts_topic = kafka_topic + ".alerts"
    alert = {"v": 1, "id": "a1", "ts": 1.0, "rule": "zero_reward", "run": "r",
             "state": "firing", "severity": "critical", "key": "zero_reward|r", "since": 1.0,
             "summary": "s"}  # fmt: skip
    produce(kafka_broker, kafka_topic, values)
    produce(kafka_broker, alerts_topic, [("r", json.dumps(alert).encode())] * 2)

    db = tmp_path / "history.duckdb"
    marker = tmp_path / "in-flush"
    args = ["--kafka", kafka_broker, "--db", str(db), "--group", kafka_group,
            "--events-topic", kafka_topic, "--alerts-topic", alerts_topic,
            "--batch-size", "1000", "--flush-interval", "0.2", "-q"]  # fmt: skip

    # 1. the third batch is written but not committed when the sink is killed
    first = SinkProcess(args, held=(marker, 3))
    sinks.append(first)
    wait_until(marker.exists)
    first.kill9()
    per_run, total, distinct = stored(db)
    with Store.reader(db) as store:
        committed = store.positions(kafka_group).get((kafka_topic, 0), 0)
    # two committed batches (of up to 1000 records; fewer when the flush interval came first):
    # exactly the events before the stored position, nothing of the third batch
    assert 0 < committed <= 2000
    assert total == distinct == committed

    # 2. killed again at an arbitrary moment
    second = SinkProcess(args)
    sinks.append(second)
    wait_until(lambda: stored(db)[1] > 3000)
    second.kill9()

    # 3. a clean run to the end; readers work while it writes
    third = SinkProcess(args)
    sinks.append(third)
    reads = 0

    def caught_up() -> bool:
        nonlocal reads
        reads += 1
        return stored(db)[0] == want

    wait_until(caught_up)
    third.stop()
    assert reads >= 1
    per_run, total, distinct = stored(db)
    assert per_run == want
    assert total == distinct == len(events)
    with Store.reader(db) as store:
        positions = store.positions(kafka_group)
        invalid = store.con.execute("SELECT reason FROM invalid_events").fetchall()
        alerts = store.con.execute("SELECT count(*) FROM alert_log").fetchall()
    assert positions == {(kafka_topic, 0): len(values), (alerts_topic, 0): 2}
    assert len(invalid) == 1
    assert invalid[0][0].startswith("not JSON")
    assert alerts == [(1,)]


def test_readers_wait_for_a_batch_and_say_so_when_it_takes_too_long(
    kafka_broker: str, kafka_topic: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    events = scenarios.orchestrator_dies()[:300]
    produce(kafka_broker, kafka_topic, [(e["run"], json.dumps(e).encode()) for e in events])
    db = tmp_path / "history.duckdb"
    marker = tmp_path / "in-flush"
    sink = SinkProcess(
        ["--kafka", kafka_broker, "--db", str(db), "--group", kafka_group,
         "--events-topic", kafka_topic, "--alerts-topic", kafka_topic + ".alerts", "-q"],
        held=(marker, 1),
    )  # fmt: skip
    sinks.append(sink)
    wait_until(marker.exists)  # the sink holds the file, mid-batch
    with pytest.raises(StoreLocked, match="in use by another process"):
        Store.reader(db, wait=0.5)
    proc = subprocess.run(
        [RUNWATCH, "sql", "SELECT 1", "--db", str(db), "--wait", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "in use by another process" in proc.stderr
    sink.kill9()
    assert stored(db)[1] == 0


def test_a_clean_run_reads_each_record_once_and_reports_each_batch_when_written(
    kafka_broker: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    """Several partitions and batches, no crash: every record is read exactly once (a seek
    that lands after the first fetch re-reads a partition from the start), and the last
    batch is reported when it is written, not when the next one comes."""
    topics = Topics(prefix=f"t{uuid.uuid4().hex[:8]}.")
    asyncio.run(ensure_topics(kafka_broker, topics, 3))
    events = (
        scenarios.sandbox_hang()[:3000]
        + scenarios.zero_reward(last_step=200)
        + scenarios.orchestrator_dies()[:2000]
    )
    produce(kafka_broker, topics.events, [(e["run"], json.dumps(e).encode()) for e in events])
    db = tmp_path / "history.duckdb"
    log = tmp_path / "sink.log"
    sink = SinkProcess(
        ["--kafka", kafka_broker, "--db", str(db), "--group", kafka_group,
         "--events-topic", topics.events, "--alerts-topic", topics.alerts,
         "--batch-size", "1000", "--flush-interval", "0.2"],
        log=log,
    )  # fmt: skip
    sinks.append(sink)

    def reported() -> int:
        lines = log.read_text().splitlines()
        return sum(int(m[1]) for line in lines if (m := re.match(r"runwatch sink: (\d+) ev", line)))

    wait_until(lambda: reported() >= len(events))
    time.sleep(1.0)  # anything read twice would be reported by now
    assert reported() == len(events)
    sink.stop()
    assert f"stopped; {len(events)} events ({len(events)} new)" in log.read_text()
    per_run, total, distinct = stored(db)
    assert per_run == Counter(e["run"] for e in events)
    assert total == distinct == len(events)


def test_batch_records_are_stored_as_their_events_and_a_bad_line_alone_is_invalid(
    kafka_broker: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    """Contract section 8 through a real broker: a run's events in batch records (JSON Lines
    under the batch header) are stored as the same rows as events sent one per record; a
    bad line of a batch is the one invalid row, with its reason naming the line."""
    topics = Topics(prefix=f"t{uuid.uuid4().hex[:8]}.")
    asyncio.run(ensure_topics(kafka_broker, topics, 2))
    events = scenarios.zero_reward(last_step=60)
    half = len(events) // 2
    singles = [(e["run"], json.dumps(e).encode()) for e in events[:half]]
    produce(kafka_broker, topics.events, singles)
    batched = [json.dumps(e).encode() for e in events[half:]]
    lines = [*batched[:10], b'{"v": 1}', *batched[10:]]
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    try:
        for start in range(0, len(lines), 25):  # batches of 25 lines, the bad one in the first
            producer.send(topics.events, b"\n".join(lines[start : start + 25]),
                          key=events[0]["run"].encode(), headers=[BATCH_HEADER])  # fmt: skip
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    db = tmp_path / "history.duckdb"
    sink = SinkProcess(
        ["--kafka", kafka_broker, "--db", str(db), "--group", kafka_group,
         "--events-topic", topics.events, "--alerts-topic", topics.alerts,
         "--flush-interval", "0.2"],
    )  # fmt: skip
    sinks.append(sink)
    wait_until(lambda: stored_rows(db) >= len(events))
    sink.stop()
    _, total, distinct = stored(db)
    assert total == distinct == len(events)
    with Store.reader(db, wait=60) as store:
        raws = [r[0] for r in store.con.execute("SELECT raw FROM events").fetchall()]
        invalid = store.con.execute("SELECT reason, raw FROM invalid_events").fetchall()
    assert sorted(json.loads(r)["id"] for r in raws) == sorted(e["id"] for e in events)
    ((reason, raw),) = invalid
    assert reason.startswith("line 11 of 25 of a batch: ")
    assert bytes(raw) == b'{"v": 1}'


def test_a_sink_started_before_the_worker_creates_no_topic_and_reads_once_they_exist(
    kafka_broker: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    """Kafka creates a topic a consumer asks about (auto.create.topics.enable, its default):
    one partition, CreateTime -- runwatch.events made wrong before the worker could make it
    right. The sink asks for the whole topic list instead, waits, and reads once the worker
    has created them; the alerts topic, created last, is picked up too."""
    topics = Topics(prefix=f"t{uuid.uuid4().hex[:8]}.")
    db, log = tmp_path / "history.duckdb", tmp_path / "sink.log"
    sink = SinkProcess(
        ["--kafka", kafka_broker, "--db", str(db), "--group", kafka_group,
         "--topic-prefix", topics.prefix, "--flush-interval", "0.2"],
        log=log,
    )  # fmt: skip
    sinks.append(sink)
    wait_until(lambda: "waiting for" in log.read_text())
    time.sleep(2.0)  # what the sink asked the broker meanwhile must not have created them
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker)
    try:
        assert topics.events not in admin.list_topics()
    finally:
        admin.close()
    counts = asyncio.run(ensure_topics(kafka_broker, topics, 3))  # the worker starts
    assert counts[topics.events] == 3  # its own settings, not the broker's defaults
    events = scenarios.zero_reward(last_step=20)
    produce(kafka_broker, topics.events, [(e["run"], json.dumps(e).encode()) for e in events])
    wait_until(lambda: stored(db)[1] == len(events))

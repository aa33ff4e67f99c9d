"""The local Kafka broker: both clients the project uses work against it, and it stops cleanly.

These round trips are the evidence for the pinned Kafka version (4.x dropped old protocol
versions): kafka-python is what the emitters use, aiokafka is what faust-streaming runs on.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer

from runwatch.dev import broker as kb
from runwatch.dev import jars

pytestmark = pytest.mark.integration

RUNWATCH = Path(sys.executable).with_name("runwatch")
MESSAGES = [(b"run-1", b'{"step": 1}'), (b"run-1", b'{"step": 2}'), (b"run-2", b'{"step": 1}')]


def _gone(pid: int) -> bool:
    """Whether `pid` no longer names a live process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def test_kafka_python_round_trip(kafka_broker: str, kafka_topic: str, kafka_group: str) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_broker, acks="all")
    try:
        for key, value in MESSAGES:
            producer.send(kafka_topic, key=key, value=value).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        kafka_topic,
        bootstrap_servers=kafka_broker,
        group_id=kafka_group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
    )
    try:
        received = []
        for record in consumer:
            received.append((record.key, record.value))
            if len(received) == len(MESSAGES):
                break
        consumer.commit()
    finally:
        consumer.close()
    assert received == MESSAGES


def test_aiokafka_round_trip(kafka_broker: str, kafka_topic: str, kafka_group: str) -> None:
    async def round_trip() -> list[tuple[bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker, acks="all")
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait(kafka_topic, value, key=key)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            kafka_topic,
            bootstrap_servers=kafka_broker,
            group_id=kafka_group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            received: list[tuple[bytes | None, bytes | None]] = []
            while len(received) < len(MESSAGES):
                record = await asyncio.wait_for(consumer.getone(), timeout=30)
                received.append((record.key, record.value))
            await consumer.commit()  # the group coordinator answers aiokafka too
        finally:
            await consumer.stop()
        return received

    assert asyncio.run(round_trip()) == MESSAGES


def test_aiokafka_creates_topic_with_partitions(kafka_broker: str, kafka_topic: str) -> None:
    """faust-streaming declares its topics with CreateTopics through aiokafka's admin client."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def create_and_describe() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(kafka_topic, 3, 1)])
            for _ in range(100):  # the new topic's metadata reaches the broker moments later
                (described,) = await admin.describe_topics([kafka_topic])
                if described["partitions"]:
                    break
                await asyncio.sleep(0.1)
            return len(described["partitions"])
        finally:
            await admin.close()

    assert asyncio.run(create_and_describe()) == 3


def test_fetched_jars_need_no_maven(kafka_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once fetched, a start needs neither Maven nor the network: the marker lists the jars."""
    monkeypatch.setenv("PATH", "/nonexistent")
    lib = jars.fetch_jars()
    assert (lib / f"kafka_2.13-{jars.DEFAULT_VERSION}.jar").is_file()
    assert (lib / jars.MARKER).read_text().split() == sorted(p.name for p in lib.glob("*.jar"))


def test_missing_jars_without_maven_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(kb.KafkaBrokerError, match="`mvn` is not on PATH"):
        jars.fetch_jars(cache=tmp_path)


def test_stop_kills_the_recorded_pid(tmp_path: Path) -> None:
    broker = kb.KafkaBroker(tmp_path / "kafka")
    try:
        bootstrap = broker.start()
        assert broker.state is not None
        pid = broker.state.pid
        recorded = kb.read_state(tmp_path / "kafka")
        assert recorded is not None
        assert (recorded.pid, recorded.bootstrap) == (pid, bootstrap)
        assert kb.is_running(tmp_path / "kafka") == recorded
    finally:
        broker.stop()
    assert _gone(pid)
    assert kb.read_state(tmp_path / "kafka") is None
    assert not kb.kafka_api_ready(bootstrap)


def test_start_failure_says_why_with_the_broker_log(tmp_path: Path) -> None:
    """A taken port makes Kafka exit; the error carries the log tail, and nothing is left."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = kb.KafkaBroker(tmp_path / "kafka", port=port, startup_timeout=60)
        with pytest.raises(kb.KafkaBrokerError, match=r"(?s)while starting.*broker\.log") as err:
            broker.start()
    assert "Address already in use" in str(err.value)
    assert broker.state is None
    assert kb.is_running(tmp_path / "kafka") is None


def _runwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RUNWATCH), "kafka", *args], capture_output=True, text=True, timeout=180, check=False
    )


def test_cli_start_status_stop(tmp_path: Path) -> None:
    data = str(tmp_path / "kafka")
    try:
        started = _runwatch("start", "--data", data)
        assert started.returncode == 0, started.stderr
        bootstrap = started.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap)
        assert "Kafka ready" in started.stderr
        state = kb.read_state(Path(data))
        assert state is not None
        assert state.bootstrap == bootstrap
        # Detached: the broker outlived the `start` process, in a session of its own.
        assert os.getsid(state.pid) == state.pid
        assert kb.kafka_api_ready(bootstrap)

        again = _runwatch("start", "--data", data)
        assert again.returncode == 0
        assert again.stdout.strip().splitlines()[-1] == bootstrap

        status = _runwatch("status", "--data", data)
        assert status.returncode == 0
        assert f"running {bootstrap} (pid {state.pid}" in status.stdout

        stopped = _runwatch("stop", "--data", data)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped {bootstrap} (pid {state.pid})" in stopped.stdout
        assert _gone(state.pid)

        status = _runwatch("status", "--data", data)
        assert (status.returncode, status.stdout.strip()) == (1, "not running")
        assert _runwatch("stop", "--data", data).stdout.strip() == "not running"

        restarted = _runwatch("start", "--data", data)  # same data: same address, same topics
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip().splitlines()[-1] == bootstrap
        assert _runwatch("stop", "--data", data).returncode == 0
    finally:
        kb.stop_broker(Path(data))  # whatever failed above, leave no JVM behind

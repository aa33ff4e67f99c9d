"""Real servers for the integration tests: one Kafka broker shared by the whole session.

The broker is the same `runwatch.dev.broker.KafkaBroker` that `runwatch kafka start` runs.
Its first use fetches the Kafka jars with Maven (once per cache); tests isolate themselves
with a fresh topic and consumer group each, never with a broker each.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from runwatch.dev.broker import KafkaBroker, Progress


def _progress(request: pytest.FixtureRequest) -> Progress:
    """Progress lines that reach the terminal past pytest's capture (a first fetch is slow)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(message: str) -> None:
        with capture.global_and_fixture_disabled():
            print(f"\n[kafka] {message}", flush=True)

    return say


@pytest.fixture(scope="session")
def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The bootstrap address (`127.0.0.1:PORT`) of a broker that lives for the session."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), progress=_progress(request))
    try:
        yield broker.start()
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secure_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    """A second broker, started only for the tests that ask for it, with SASL_SSL,
    SASL_PLAINTEXT and mutual-TLS listeners (`broker.secured`: addresses, CA, user)."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-secure"), progress=_progress(request),
                         secure=True)  # fmt: skip
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_topic() -> str:
    """A topic name no other test uses; the broker creates it on first use."""
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
def kafka_group() -> str:
    """A consumer group id no other test uses, so committed offsets never leak between tests."""
    return f"test-group-{uuid.uuid4().hex}"


@pytest.fixture
def producer(kafka_broker: str) -> Iterator[KafkaProducer]:
    """A kafka-python producer on the session's broker (acks=all), closed after the test."""
    p = KafkaProducer(bootstrap_servers=kafka_broker, acks="all")
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def sinks() -> Iterator[list[Any]]:
    """`runwatch sink` processes a test starts (test_sink.SinkProcess), gone after it."""
    started: list[Any] = []
    yield started
    for s in started:
        s.ensure_gone()


@pytest.fixture(scope="session")
def helm() -> str:
    """The real `helm`, built once (scripts/ensure_helm.sh): the chart's checks."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [str(root / "scripts" / "ensure_helm.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"scripts/ensure_helm.sh failed:\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1]

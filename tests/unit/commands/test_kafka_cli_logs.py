"""The Kafka clients' ERROR lines for states that pass by themselves are not shown; every other
error still is."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from runwatch.commands.kafka_args import (
    _CLIENT_LOGGERS,
    _not_transient,
    quiet_transient_kafka_errors,
)


@pytest.fixture
def quieted() -> Iterator[None]:
    quiet_transient_kafka_errors()
    quiet_transient_kafka_errors()  # twice: one filter
    yield
    for name in _CLIENT_LOGGERS:
        logging.getLogger(name).removeFilter(_not_transient)


def test_transient_startup_errors_are_dropped_and_others_kept(
    quieted: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cluster = logging.getLogger("aiokafka.cluster")
    coordinator = logging.getLogger("aiokafka.consumer.group_coordinator")
    assert cluster.filters.count(_not_transient) == 1
    cluster.error("Topic %s not found in cluster metadata", "runwatch.alerts")
    coordinator.error("Group Coordinator Request failed: %s", "[Error 15] CoordinatorNotAvailable")
    logging.getLogger("kafka.cluster").error("Topic %s not found in cluster metadata", "t")
    fetcher = logging.getLogger("aiokafka.consumer.fetcher")  # a topic just made: no leader yet
    not_leader = "[Error 6] NotLeaderForPartitionError: TopicPartition(topic='t', partition=1)"
    fetcher.error("Failed fetch offsets from %s: %s", 1, not_leader)
    assert caplog.records == []

    coordinator.error("Group Coordinator Request failed: %s", "[Error 58] SaslAuthenticationFailed")
    cluster.error("Unable to connect to %s", "127.0.0.1:9092")
    fetcher.error("Failed fetch offsets from %s: %s", 1, "[Error 29] TopicAuthorizationFailedError")
    assert [r.getMessage() for r in caplog.records] == [
        "Group Coordinator Request failed: [Error 58] SaslAuthenticationFailed",
        "Unable to connect to 127.0.0.1:9092",
        "Failed fetch offsets from 1: [Error 29] TopicAuthorizationFailedError",
    ]
    assert all(r.levelno == logging.ERROR for r in caplog.records)


def test_debug_still_shows_them(quieted: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka.cluster")
    logging.getLogger("aiokafka.cluster").error("Topic %s not found in cluster metadata", "t")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "Topic t not found in cluster metadata")
    ]

"""Creating runwatch's topics before any role subscribes to them, so they get our settings."""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.checkpoints import TOPIC_CONFIG

log = logging.getLogger("runwatch.stream.worker")

#: The breaker topic keeps each run's latest view: compacted soon, tombstones kept an hour.
BREAKER_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),
}

#: How long a topic just created may take to show its partitions in the metadata.
SETTLE_S = 30.0

#: Broker error codes create_topics may answer with that mean "fine".
_TOPIC_EXISTS = 36


async def ensure_topics(
    bootstrap: str,
    topics: Topics,
    partitions: int,
    replication: int = 1,
    security: KafkaSecurity = PLAINTEXT,
) -> dict[str, int]:
    """Create runwatch's topics if missing; return each one's partition count.

    `runwatch.events` records carry the broker's append time (LogAppendTime), the one clock
    the skew correction measures every host against.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security.aiokafka())
    await admin.start()
    try:
        wanted = [
            NewTopic(
                topics.events,
                partitions,
                replication,
                topic_configs={"message.timestamp.type": "LogAppendTime"},
            ),
            NewTopic(topics.alerts, partitions, replication),
            NewTopic(topics.dlq, partitions, replication),
            NewTopic(topics.checkpoints, partitions, replication, topic_configs=TOPIC_CONFIG),
            # each run's latest circuit-breaker view, what guarding trainers read
            NewTopic(topics.breaker, partitions, replication, topic_configs=BREAKER_CONFIG),
            # what the workers tell the fleet stage: one partition, one stage reads it
            NewTopic(topics.fleet, 1, replication),
            # what the fleet stage decided, which run incidents belong to which fleet
            # incident: its latest record, read by every worker
            NewTopic(topics.fleet_members, 1, replication, topic_configs=BREAKER_CONFIG),
        ]
        response = await admin.create_topics(wanted)
        for name, code, *rest in response.topic_errors:
            if code not in (0, _TOPIC_EXISTS):
                raise RuntimeError(f"cannot create topic {name}: error {code} {rest}")
        counts = await _partitions(admin, [t.name for t in wanted])
    finally:
        await admin.close()
    if counts.get(topics.events) != partitions:
        log.warning(
            "%s already exists with %s partitions (not %d): using those",
            topics.events,
            counts.get(topics.events),
            partitions,
        )
    return counts


async def _partitions(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    """Each topic's partition count, once the broker's metadata has them all. A topic just
    created is created in the background: asked at once, a loaded broker answers with no
    partitions yet (LEADER_NOT_AVAILABLE), which would read as a topic of 0 partitions."""
    deadline = time.monotonic() + SETTLE_S
    wait = 0.05
    while True:
        described = await admin.describe_topics(names)
        counts = {t["topic"]: len(t["partitions"]) for t in described}
        settled = all(t["error_code"] == 0 and counts[t["topic"]] > 0 for t in described) and set(
            counts
        ) >= set(names)
        if settled or time.monotonic() >= deadline:
            return counts
        await asyncio.sleep(wait)
        wait = min(wait * 2, 1.0)

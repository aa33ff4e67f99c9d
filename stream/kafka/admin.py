"""Creating runwatch's topics before any role subscribes to them, so they get our settings."""

from __future__ import annotations

import logging

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
        ]
        response = await admin.create_topics(wanted)
        for name, code, *rest in response.topic_errors:
            if code not in (0, _TOPIC_EXISTS):
                raise RuntimeError(f"cannot create topic {name}: error {code} {rest}")
        described = await admin.describe_topics([t.name for t in wanted])
        counts = {t["topic"]: len(t["partitions"]) for t in described}
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

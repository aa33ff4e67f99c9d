"""The worker's Kafka chores that Faust does not do well: topic set-up and reading a partition
from its start to its current end (the rebuild after a restart or a rebalance).

Plain aiokafka with manual assignment: no consumer group, nothing committed, so a rebuild
never disturbs the worker's group or its offsets. Every client here, and the Faust app's
(`faust_credentials`), takes the worker's `KafkaSecurity` (TLS / SASL).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.live import PublishedAlerts

log = logging.getLogger("runwatch.stream.worker")

#: Broker error codes create_topics may answer with that mean "fine".
_TOPIC_EXISTS = 36


def faust_credentials(security: KafkaSecurity) -> Any:
    """Faust's `broker_credentials` for `security` (None: plaintext). faust-streaming hands
    SASLCredentials' mechanism (PLAIN, SCRAM-SHA-256/512) and username/password on to
    aiokafka, with SASL_SSL when it has an SSL context, SASL_PLAINTEXT otherwise."""
    import faust

    context = security.ssl_context()
    if security.sasl:
        return faust.SASLCredentials(
            username=security.username,
            password=security.client_password(),
            ssl_context=context,
            mechanism=security.mechanism,
        )
    return faust.SSLCredentials(context) if context is not None else None


async def ensure_topics(
    bootstrap: str,
    topics: Topics,
    partitions: int,
    replication: int = 1,
    security: KafkaSecurity = PLAINTEXT,
) -> dict[str, int]:
    """Create the three topics if missing; return each one's partition count.

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


def _consumer(bootstrap: str, security: KafkaSecurity) -> Any:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **security.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 << 20,
        fetch_max_bytes=64 << 20,
    )


async def read_to_end(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int] | None = None,
    *,
    follow: bool = False,
    security: KafkaSecurity = PLAINTEXT,
) -> AsyncIterator[tuple[int, list[Any]]]:
    """Yield (partition, records) batches of `topic` from the start up to the end each
    partition had when the read began (all partitions if None). With `follow`, the ends are
    asked again once reached, until a pass finds nothing new: the reader is then caught up.

    Records are aiokafka ConsumerRecords, in offset order within a partition.
    """
    consumer = _consumer(bootstrap, security)
    await consumer.start()
    try:
        if partitions is None:
            cluster = await consumer._client.fetch_all_metadata()  # a fresh snapshot
            partitions = sorted(cluster.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in partitions]
        if not tps:
            return
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends: dict[int, int] = {}
        while True:
            latest = {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
            if latest == ends:
                return
            ends = latest
            pending = set(tps)
            while pending:
                for tp in list(pending):
                    if await consumer.position(tp) >= ends[tp.partition]:
                        pending.discard(tp)
                if not pending:
                    break
                consumer.resume(*pending)
                consumer.pause(*(set(tps) - pending))
                batch = await consumer.getmany(*pending, timeout_ms=500, max_records=20_000)
                for tp, records in batch.items():
                    end = ends[tp.partition]
                    records = [r for r in records if r.offset < end]
                    if records:
                        yield tp.partition, records
            if not follow:
                return
    finally:
        await consumer.stop()


def group_consumer(
    bootstrap: str, group: str, session_timeout: float, security: KafkaSecurity = PLAINTEXT
) -> Any:
    """The live consumer: in the worker's group, nothing committed (the rebuild recovers)."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **security.aiokafka(),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=int(session_timeout * 1000),
        heartbeat_interval_ms=int(max(0.5, session_timeout / 5) * 1000),
        max_poll_interval_ms=30 * 60 * 1000,
        max_partition_fetch_bytes=8 << 20,
        fetch_max_bytes=64 << 20,
    )


async def read_published(
    bootstrap: str, topics: Topics, security: KafkaSecurity = PLAINTEXT
) -> tuple[PublishedAlerts, dict[int, int]]:
    """What runwatch.alerts holds, and per events partition the last offset on the DLQ."""
    published = PublishedAlerts()
    async for _, records in read_to_end(bootstrap, topics.alerts, security=security):
        for r in records:
            with contextlib.suppress(InvalidAlert):
                published.add(Alert.from_json(r.value or b"{}"))
    dead_upto: dict[int, int] = {}
    async for _, records in read_to_end(bootstrap, topics.dlq, security=security):
        for r in records:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                letter = orjson.loads(r.value or b"{}")
                if letter.get("topic") == topics.events:
                    p, off = int(letter["partition"]), int(letter["offset"])
                    dead_upto[p] = max(dead_upto.get(p, -1), off)
    return published, dead_upto

"""The Kafka clients of every consuming role, made in one place: aiokafka consumers with the
role's security (TLS / SASL) and tuning, and the Faust app's credentials.

A role that reads more than its own loop (the worker's rebuilds, checkpoints, what is
published) takes a `Connects` -- `Connection` here, an in-memory broker's in the unit tests
(tests/kafka_double.py) -- so that what it does on a takeover can be tested without Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity


def consumer(
    bootstrap: str,
    security: KafkaSecurity = PLAINTEXT,
    *,
    group: str | None = None,
    **tuning: Any,
) -> Any:
    """A consumer that commits nothing by itself and starts where nothing is stored at the
    oldest record. With `group`, a member of that consumer group; without, a reader of
    whatever it is assigned (rebuilds, `runwatch alerts`). `tuning`: aiokafka settings that
    differ by role (session timeouts, fetch sizes, poll limits)."""
    settings: dict[str, Any] = {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_partition_fetch_bytes": 8 << 20,
        "fetch_max_bytes": 64 << 20,
        # a group subscribed to a topic not created yet (notify or the sink started before
        # the first worker) learns of it at the next refresh: seconds, not aiokafka's 5 min
        "metadata_max_age_ms": 5000,
        **tuning,
    }
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, **security.aiokafka(), **settings
    )


class Connects(Protocol):
    """Where a role's consumers come from."""

    def consumer(self, *, group: str | None = None, **tuning: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Connection:
    """A Kafka cluster and how to sign in to it: makes `consumer`s."""

    bootstrap: str
    security: KafkaSecurity = PLAINTEXT

    def consumer(self, *, group: str | None = None, **tuning: Any) -> Any:
        return consumer(self.bootstrap, self.security, group=group, **tuning)


#: What a fetch held up to `fetch_wait` waits to fill: more than any such wait brings, so the
#: wait decides (records beyond it come in the same answer, up to the fetch limits above).
FETCH_FILL_BYTES = 1 << 20


def group_settings(
    session_timeout: float, fetch_wait: float = 0.0, revoke_bound: float = 0.0
) -> dict[str, Any]:
    """Group tuning of a role that must notice a dead member soon (the worker), and keeps
    what it holds across a rebalance: the sticky assignor moves only the partitions it must
    (a surviving worker keeps its partitions, their state and their live judgement; the
    default round robin would deal every partition out anew).

    `fetch_wait` (seconds): the broker holds each fetch up to this long to fill it, so a
    steady trickle comes in fewer, larger batches; 0: it answers as soon as a record is
    there (aiokafka's default).

    `revoke_bound` (seconds): the longest the member's revoke callback may take (the
    worker flushes its output and writes its handover promises there, within that bound).
    The group waits that long, and a session timeout more, for members to rejoin:
    aiokafka's default, the session timeout alone, dropped a member then still checkpointing
    5,000 runs in that callback from the new generation, gave the one that joined every
    partition, and rebalanced again when the first came back -- over and over at 10,000
    runs (bench/fleet.py). A member that died is still noticed after the session timeout:
    the wait is for members that answer heartbeats."""
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    settings: dict[str, Any] = {
        "session_timeout_ms": int(session_timeout * 1000),
        "heartbeat_interval_ms": int(max(0.5, session_timeout / 5) * 1000),
        "max_poll_interval_ms": 30 * 60 * 1000,
        "rebalance_timeout_ms": int((session_timeout + revoke_bound) * 1000),
        "partition_assignment_strategy": (StickyPartitionAssignor,),
    }
    if fetch_wait > 0:
        settings["fetch_min_bytes"] = FETCH_FILL_BYTES
        settings["fetch_max_wait_ms"] = max(1, round(fetch_wait * 1000))
    return settings


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

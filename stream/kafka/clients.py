"""The Kafka clients of every role, made in one place: aiokafka consumers with the role's
security (TLS / SASL) and tuning, the worker's transactional producers, and the Faust app's
credentials.

Every consumer reads `read_committed`: what the workers publish goes out in transactions
(`publish.py`), and a fenced worker's writes end aborted -- no role may see them.

A role that reads more than its own loop (the worker's rebuilds, checkpoints, what is
published) takes a `Connects` -- `Connection` here, an in-memory broker's in the unit tests
(tests/kafka_double.py) -- so that what it does on a takeover can be tested without Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.producer.transaction_manager import TransactionState

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity


def consumer(
    bootstrap: str,
    security: KafkaSecurity = PLAINTEXT,
    *,
    group: str | None = None,
    **tuning: Any,
) -> Any:
    """A consumer that commits nothing by itself, starts where nothing is stored at the
    oldest record, and reads only what was committed. With `group`, a member of that
    consumer group; without, a reader of whatever it is assigned (rebuilds, `runwatch
    alerts`). `tuning`: aiokafka settings that differ by role (session timeouts, fetch
    sizes, poll limits)."""
    settings: dict[str, Any] = {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_committed",
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


def producer(
    bootstrap: str, transactional_id: str, security: KafkaSecurity = PLAINTEXT, **tuning: Any
) -> TransactionalProducer:
    """A transactional producer of `transactional_id` (not started: its start fences every
    earlier producer of the id). `tuning`: aiokafka settings (the largest request)."""
    made = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                            linger_ms=1, **security.aiokafka(), **tuning)  # fmt: skip
    return TransactionalProducer(made)


class TransactionalProducer:
    """aiokafka's producer with a transactional id, its failures made plain.

    After a transaction fails aiokafka leaves its producer in a state where the next call
    trips an assertion (`Invalid state transition FATAL_ERROR -> ...`) or says "not in
    transaction"; here such a call raises the error that put it there, and `usable` says
    whether the producer can go on -- it cannot once another producer of its id fenced it
    (ProducerFenced) or its sender died: a transaction that failed short of that is aborted
    and tried again. aiokafka keeps that state in its private transaction manager
    (`_txn_manager`), read here and nowhere else."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    @property
    def _manager(self) -> Any:
        return self._producer._txn_manager

    @property
    def usable(self) -> bool:
        """Whether the producer can still publish (not fenced, its sender alive)."""
        sender = self._producer._sender.sender_task
        dead = sender is not None and sender.done()
        return not dead and self._manager.state != TransactionState.FATAL_ERROR

    def _failed(self, *, abortable: bool = True) -> None:
        """Raise the error a failed transaction left (`abortable`: also one short of
        fencing, which only an abort clears)."""
        manager = self._manager
        failed = {TransactionState.FATAL_ERROR}
        if abortable:
            failed.add(TransactionState.ABORTABLE_ERROR)
        if manager.state in failed:
            waiter = manager._transaction_waiter
            err = waiter.exception() if waiter is not None and waiter.done() else None
            raise err if isinstance(err, Exception) else KafkaError(f"{manager.state.name}")

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def begin_transaction(self) -> None:
        self._failed()
        await self._producer.begin_transaction()

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> Any:  # fmt: skip
        self._failed()
        return await self._producer.send(topic, value, key, partition, timestamp_ms, headers)

    async def commit_transaction(self) -> None:
        self._failed()
        await self._producer.commit_transaction()

    async def abort_transaction(self) -> None:
        self._failed(abortable=False)
        await self._producer.abort_transaction()


class Connects(Protocol):
    """Where a role's consumers and producers come from."""

    def consumer(self, *, group: str | None = None, **tuning: Any) -> Any: ...
    def producer(self, transactional_id: str, **tuning: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Connection:
    """A Kafka cluster and how to sign in to it: makes `consumer`s."""

    bootstrap: str
    security: KafkaSecurity = PLAINTEXT

    def consumer(self, *, group: str | None = None, **tuning: Any) -> Any:
        return consumer(self.bootstrap, self.security, group=group, **tuning)

    def producer(self, transactional_id: str, **tuning: Any) -> TransactionalProducer:
        return producer(self.bootstrap, transactional_id, self.security, **tuning)


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
    settings: dict[str, Any] = {
        "session_timeout_ms": int(session_timeout * 1000),
        "heartbeat_interval_ms": int(max(0.5, session_timeout / 5) * 1000),
        "max_poll_interval_ms": 30 * 60 * 1000,
        "rebalance_timeout_ms": int((session_timeout + revoke_bound) * 1000),
        "partition_assignment_strategy": (_sticky(),),
    }
    if fetch_wait > 0:
        settings["fetch_min_bytes"] = FETCH_FILL_BYTES
        settings["fetch_max_wait_ms"] = max(1, round(fetch_wait * 1000))
    return settings


def _sticky() -> type:
    """aiokafka's sticky assignor for one consumer. It keeps the member's last assignment --
    what the member tells the group so that the next assignment can keep it -- in class
    attributes (`on_assignment` sets `cls.member_assignment`), so every consumer of a
    process that uses the class shares one: a worker is a member of the events group and
    of the fleet stage's, and whichever was assigned last spoke for both. The events group
    then dealt its partitions out as if from nothing, round robin by member id: a kill moved
    partitions between the survivors too, each a handover, and one survivor could take
    all the dead worker's partitions (bench/fleet.py). A subclass per consumer keeps each
    member's own."""
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return type("StickyPartitionAssignor", (StickyPartitionAssignor,), {})


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

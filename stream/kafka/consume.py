"""The one consuming loop of every Kafka role: the worker (live and rebuild), the sink, the
Slack notifier and `runwatch alerts`.

What every role needs from a Kafka consumer is written here once: batches per partition,
positions kept in memory and sought to synchronously on every assignment (aiokafka starts
fetching a new partition at the first await, so a late seek re-reads it from the start), a
handler's failure isolated to the record that caused it (the batch is handled again record
by record, and the record that fails on its own is handed to `Handler.dead` with the reason:
its role dead-letters it and goes on), backoff when the client itself fails, liveness beats
and lag for /healthz and /readyz, reading up to the end for rebuilds, and a clean stop.
What was read up to follows the consumer past offsets that hold no record for it (records
retention deleted, a transaction's commit marker), so a partition reaches its end.

Whether the group still counts this member in, as of now, the loop asks the coordinator
(`confirm`): a commit of offsets carries the member's generation, and one the group has
moved past is refused.

Roles do their own work in a `Handler`: `handle(records)` gets one partition's records in
offset order. Handling must be idempotent by record (event ids, alert ids, transition ids
make it so in every role): a batch that fails half-way is handled again, record by record.

The consumer is aiokafka's (`AIOKafkaConsumer`) or anything with the same methods
(`tests/kafka_double.py`, an in-memory broker for unit tests).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaConnectionError

# aiokafka's own type, so what the loop passes back to the consumer needs no conversion (the
# in-memory double uses it too)
from aiokafka.structs import TopicPartition as TP  # noqa: N817

from runwatch.stream.exceptions import StopConsuming
from runwatch.stream.kafka.health import ConsumerHealth
from runwatch.stream.refused import Refused

__all__ = ["TP", "ConsumingLoop", "Group", "Handler", "Partitions", "StopConsuming", "Until"]

log = logging.getLogger("runwatch.stream.consume")

#: Kafka's timestamp type of records stamped by the broker when it appended them.
LOG_APPEND_TIME = 1
#: A partition whose last fetch Kafka answered longer ago than this has an unknown lag.
FETCHED_WITHIN_MS = 30_000
#: How often a group looks again for a topic of its that was not created yet.
RECHECK_TOPICS_S = 2.0
#: How often `commit_read` commits (for Kafka's lag tools only).
COMMIT_EVERY_S = 5.0
#: How long `confirm` waits for the group coordinator's word.
CONFIRM_S = 10.0
#: How long the loop waits for a partition's position (known at once after a fetch; being
#: reset, it is looked at again after the next poll instead).
POSITION_S = 0.1


class Record(Protocol):
    """What the loop hands on: aiokafka's `ConsumerRecord` (no copy per record)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...  # milliseconds
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


def refused(record: Record, reason: str, kind: str = "schema") -> Refused:
    """A record refused: its value, where it was read, and why."""
    return Refused(reason, record.value or b"", record.topic, record.partition, record.offset,
                   kind)  # fmt: skip


class Consumer(Protocol):
    """The part of aiokafka's consumer the loop uses."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def subscribe(self, topics: Sequence[str], listener: Any = None) -> None: ...
    def assign(self, partitions: Sequence[Any]) -> None: ...
    def assignment(self) -> set[Any]: ...
    async def beginning_offsets(self, partitions: Sequence[Any]) -> Mapping[Any, int]: ...
    def seek(self, partition: Any, offset: int) -> None: ...
    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[Any, list[Any]]: ...
    async def end_offsets(self, partitions: Sequence[Any]) -> Mapping[Any, int]: ...
    def highwater(self, partition: Any) -> int | None: ...
    async def position(self, partition: Any) -> int: ...
    def last_poll_timestamp(self, partition: Any) -> int | None: ...
    async def commit(self, offsets: Any = None) -> None: ...
    def partitions_for_topic(self, topic: str) -> set[int] | None: ...
    def pause(self, *partitions: Any) -> None: ...
    def resume(self, *partitions: Any) -> None: ...


class Handler:
    """A role's side of the loop. Override what the role needs; the defaults do nothing."""

    async def handle(self, records: list[Record]) -> None:
        """One partition's records, in offset order (at least one)."""

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        """The consumer now holds `partitions` (its whole assignment). Return where to go on
        in those the role keeps its own positions for; the others go on from where this loop
        read up to, else from the committed offset, else from the start. Synchronous on
        purpose: the seek must happen before aiokafka's next fetch."""
        return {}

    async def revoked(self, partitions: set[TP]) -> None:
        """`partitions` are about to go to another consumer: finish what was read of them."""

    async def turn(self) -> None:
        """After every poll, also an empty one: time-driven work (flushes, reminders)."""

    def dead(self, record: Record, reason: str) -> None:
        """A record that failed on its own: dead-letter it. The loop goes on either way."""
        log.error("%s/%d@%d skipped: %s", record.topic, record.partition, record.offset, reason)


@dataclass(frozen=True, slots=True)
class Group:
    """Read `topics` as a member of the consumer's group (the consumer has a `group_id`), or,
    for a consumer without one, every partition of them from the start."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Partitions:
    """Read partitions of `topic` from their start (or from the offsets in `start`), outside
    any group: the given ones, or every partition the topic has when the loop starts (none
    if it does not exist). An offset past its partition's end is of a topic by that name
    that was deleted and made anew: that partition is read from its start. `ends`: where a
    read to the end stops, per partition, when not where the consumer says the partition
    ends (read_committed: its last stable offset, before any transaction still open)."""

    topic: str
    partitions: tuple[int, ...] | None = None
    start: Mapping[int, int] | None = None
    ends: Mapping[int, int] | None = None


Until = Literal["stopped", "end", "caught_up"]
"""When `run` returns: when stopped; once each partition is read up to the end it had when
the loop started ("end", later records are not handed on); or once a further look at the ends
finds nothing new ("caught_up": a rebuild that must not miss what arrived meanwhile)."""


class ConsumingLoop:
    """Drives one consumer for one handler until stopped (or caught up)."""

    def __init__(
        self,
        consumer: Consumer,
        source: Group | Partitions,
        handler: Handler,
        *,
        stop: Callable[[], bool] = lambda: False,
        until: Until = "stopped",
        max_records: int = 5000,
        poll_ms: int = 200,
        commit: bool = False,
        health: ConsumerHealth | None = None,
        max_backoff: float = 30.0,
        name: str = "consumer",
    ) -> None:
        self.consumer = consumer
        self.source = source
        self.handler = handler
        self.stop = stop
        self.until = until
        self.max_records = max_records
        self.poll_ms = poll_ms
        self.commit = commit
        self.health = health
        self.max_backoff = max_backoff
        self.name = name
        #: per partition, the next offset to hand on (what was read up to)
        self.read: dict[TP, int] = {}
        self._ends: dict[TP, int] | None = None
        self._known: set[TP] = set()  # the assignment `_assigned` last saw
        self._tps: list[TP] = []  # a `Partitions` source's partitions
        self._subscribed: list[str] = []  # a `Group` source's topics subscribed to, so far
        self._missing: list[str] = []  # ... and those not created yet
        self._recheck_at = 0.0
        self._commit_at = 0.0  # `commit_read`'s next
        self.running = False
        self.isolated = 0  # records that failed on their own
        self.client_errors = 0

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until `stop()` says so (or `until` is met), then stop the consumer."""
        consumer = self.consumer
        if not await self._start():
            await consumer.stop()
            return
        self.running = True
        try:
            await self._subscribe()
            if isinstance(self.source, Partitions):
                if not self._tps:
                    return  # nothing to read (a topic not created yet)
                if self.until != "stopped":
                    if self._ends is None:
                        self._ends = await self._end_offsets(self._tps)
                    if await self._at_end():
                        return  # nothing to read: no poll waited out for nothing
            backoff = 0.0
            while not self.stop():
                if self.health is not None:
                    self.health.beat()
                try:
                    batch = await self._fetch()
                except Exception as err:  # the client itself: back off, it reconnects
                    self.client_errors += 1
                    backoff = min(self.max_backoff, max(0.5, backoff * 2))
                    log.warning("%s: fetch failed (%s); again in %.1fs", self.name, err, backoff)
                    await self._sleep(backoff)
                    continue
                backoff = 0.0
                await self._recheck()
                self._notice_assignment()
                for tp, records in batch.items():
                    if records:
                        await self._hand_on(tp, records)
                await self._pass_markers()
                if batch and self.commit:
                    await self._commit()
                await self.handler.turn()
                if self.until != "stopped" and await self._at_end():
                    return
        finally:
            self.running = False
            await consumer.stop()

    async def _subscribe_present(self, wait: bool = False) -> None:
        """Subscribe the group to those of its topics that exist, and note the others.

        A consumer's metadata request for a missing topic makes a broker with
        `auto.create.topics.enable` (Kafka's default) create it with the broker's defaults
        -- one partition, CreateTime -- before `runwatch worker` can make it right; and a
        group subscribed to a missing topic learns of it only at the next metadata refresh,
        minutes later. So a role started before the first worker (notify, the sink) asks for
        the whole topic list, which creates nothing, subscribes to what exists (with `wait`,
        once something does) and subscribes again as the rest appears (`_recheck`)."""
        assert isinstance(self.source, Group)
        topics, said = self.source.topics, False
        while True:
            try:
                present = [t for t in topics if await partitions_of(self.consumer, t)]
            except Exception as err:  # the broker not answering yet: as if none existed
                present, why = [], f" ({err})"
            else:
                why = ""
            if present or not wait or self.stop():
                break
            if not said:
                log.info("%s: waiting for %s to be created (by `runwatch worker`)%s",
                         self.name, ", ".join(topics), why)  # fmt: skip
                said = True
            await self._sleep(1.0)
        self._missing = [t for t in topics if t not in present]
        self._recheck_at = time.monotonic() + RECHECK_TOPICS_S
        if present and present != self._subscribed:
            self.consumer.subscribe(present, listener=_Listener(self))
            self._subscribed = present

    async def _recheck(self) -> None:
        """Now and then, whether a topic the group waits for was created."""
        if self._missing and time.monotonic() >= self._recheck_at:
            await self._subscribe_present()

    async def _fetch(self) -> Mapping[Any, list[Any]]:
        """One poll. Bounded: before its first assignment aiokafka waits for one without a
        timeout, and a loop told to stop must notice. (`asyncio.timeout`, not `wait_for`:
        3.11's `wait_for` loses a cancellation that meets a poll finishing, and the loop
        then polls on after its task was cancelled -- a worker that would not stop.)"""
        try:
            async with asyncio.timeout(max(1.0, 5 * self.poll_ms / 1000)):
                return await self.consumer.getmany(
                    timeout_ms=self.poll_ms, max_records=self.max_records
                )
        except TimeoutError:
            return {}

    async def _subscribe(self) -> None:
        consumer = self.consumer
        if isinstance(self.source, Group):
            await self._subscribe_present(wait=True)
            return
        topic, numbers = self.source.topic, self.source.partitions
        if numbers is None:
            numbers = tuple(sorted(await partitions_of(consumer, topic)))
        tps = [TP(topic, p) for p in numbers]
        self._tps = tps
        if tps:
            consumer.assign(tps)
            # nothing fetched until the seek below: assigned, aiokafka fetches from the
            # start at once, a fetch's worth the seek then throws away
            consumer.pause(*tps)
            # from the first offset still there: a partition whose records all expired
            # (retention) starts at its end, not at 0, and is read to its end at once
            begins = await consumer.beginning_offsets(tps)
            start, given = self.source.start or {}, self.source.ends
            if given is not None:
                ends = {tp: int(given.get(tp.partition, 0)) for tp in tps}
            else:
                ends = await self._end_offsets(tps) if start else {}
            if self.until != "stopped" and (start or given is not None):
                self._ends = ends  # (the ends as the loop starts: `run` needs no others)
            for tp in tps:
                offset = start.get(tp.partition, 0)
                if offset > ends.get(tp, offset):  # past its end: the topic was made anew
                    offset = 0
                self.read[tp] = max(offset, int(begins[tp]))
        self._assigned(set(tps))  # seeks where `read` says
        if tps:
            consumer.resume(*tps)

    async def _hand_on(self, tp: TP, records: list[Any]) -> None:
        read = self.read.get(tp)
        if read is not None and records[0].offset < read:  # fetched again after a reset
            records = [r for r in records if r.offset >= read]
            if not records:
                return
        if self._ends is not None and self.until == "end":
            end = self._ends.get(tp)
            if end is not None and records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
                if not records:
                    return
        try:
            await self.handler.handle(records)
        except (asyncio.CancelledError, StopConsuming):
            raise
        except Exception as err:
            if len(records) == 1:
                self._isolate(records[0], err)
            else:
                log.warning(
                    "%s: a batch of %d from %s/%d failed (%s: %s); handling it record by record",
                    self.name, len(records), tp.topic, tp.partition, type(err).__name__, err,
                )  # fmt: skip
                for record in records:
                    try:
                        await self.handler.handle([record])
                    except (asyncio.CancelledError, StopConsuming):
                        raise
                    except Exception as one:
                        self._isolate(record, one)
        self.read[tp] = records[-1].offset + 1

    async def _pass_markers(self) -> None:
        """Offsets that hold no record for a consumer -- the commit marker a transactional
        producer leaves after its records -- are passed by its position with nothing handed
        on. `read` follows the position there: else a partition whose last offset is a
        marker never counts as read to its end (a read to the end never finishes, silence
        is never judged, lag never drops to 0). The position counts only what the consumer
        returned (a marker with them: passed in the same poll); never past the end a read to
        the end stops at (what it fetched beyond is not handed on)."""
        consumer = self.consumer
        for tp, read in list(self.read.items()):
            try:
                high = consumer.highwater(tp)
                if high is None or high <= read:
                    continue
                async with asyncio.timeout(POSITION_S):  # known at once after a fetch
                    position = await consumer.position(tp)
            except Exception:  # not assigned now, or its position being reset: next poll
                continue
            if self.until == "end" and self._ends is not None:
                position = min(position, self._ends.get(tp, read))
            if position > read:
                self.read[tp] = position

    def _isolate(self, record: Any, err: BaseException) -> None:
        self.isolated += 1
        reason = f"{type(err).__name__}: {err}"
        log.debug("%s: record failed on its own", self.name, exc_info=err)
        try:
            self.handler.dead(record, reason)
        except Exception:
            log.exception("%s: could not dead-letter %s", self.name, reason)

    async def _commit(self) -> None:
        try:
            await self.consumer.commit()
        except Exception as err:  # a rebalance in between: the next owner reads it again
            log.info("%s: commit skipped (%s)", self.name, err)

    async def commit_read(self, tps: Sequence[TP]) -> None:
        """Commit what was read up to in those of `tps` the loop reads, at most every
        COMMIT_EVERY_S (for Kafka's lag tools, where a role keeps its own positions)."""
        now = time.monotonic()
        offsets = {tp: self.read[tp] for tp in tps if tp in self.read}
        if now < self._commit_at or not offsets:
            return
        self._commit_at = now + COMMIT_EVERY_S
        try:
            await self.consumer.commit(offsets)
        except Exception as err:  # a rebalance in between: the next commit has it
            log.info("%s: commit skipped (%s)", self.name, err)

    async def confirm(self, tps: Sequence[TP]) -> bool:
        """Whether the group confirms this member now: a commit of what was read in `tps`
        (assigned partitions), which the coordinator refuses from a member of a generation
        it has moved past (or while it rebalances). False too when it cannot be asked."""
        offsets = {tp: self.read[tp] for tp in tps if tp in self.read}
        if not offsets:
            return False
        try:
            async with asyncio.timeout(CONFIRM_S):
                await self.consumer.commit(offsets)
        except Exception as err:  # (a TimeoutError too: the coordinator away)
            log.info("%s: the group does not confirm this member (%s)", self.name, err)
            return False
        return True

    async def _start(self) -> bool:
        """Start the consumer; while Kafka cannot be reached, try again (backing off, said
        once), so a role that starts as the broker goes down waits for it instead of exiting
        with a traceback. (Whether Kafka can be reached at all, and with these credentials, the
        command asked before: `connect.kafka_problem`.) False when stopped meanwhile."""
        backoff = 0.0
        said = False
        while True:
            try:
                await self.consumer.start()
                return True
            except KafkaConnectionError as err:
                self.client_errors += 1
                if not said:
                    log.warning("%s: cannot reach Kafka (%s); trying again until it answers",
                                self.name, err)  # fmt: skip
                    said = True
            backoff = min(self.max_backoff, max(0.5, backoff * 2))
            await self._sleep(backoff)
            if self.stop():
                return False

    async def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop() and (left := deadline - time.monotonic()) > 0:
            if self.health is not None:
                self.health.beat()
            await asyncio.sleep(min(left, 0.2))

    # -- reading up to the end -------------------------------------------------------------

    async def _at_end(self) -> bool:
        """Whether every assigned partition is read up to its end (see `Until`)."""
        tps = sorted(self.consumer.assignment())
        if not tps:
            return not isinstance(self.source, Group) or self._ends is not None
        if self._ends is None:
            self._ends = await self._end_offsets(tps)
        if not all(self.read.get(tp, 0) >= self._ends.get(tp, 0) for tp in tps):
            return False
        if self.until == "end":
            return True
        latest = await self._end_offsets(tps)
        if latest == self._ends:
            return True
        self._ends = latest
        return False

    async def _end_offsets(self, tps: Sequence[Any]) -> dict[TP, int]:
        ends = await self.consumer.end_offsets(list(tps))
        return {tp: int(end) for tp, end in ends.items()}

    # -- assignment and health --------------------------------------------------------------

    def _notice_assignment(self) -> None:
        """A consumer without a group reassigns by itself when a topic grows, without telling
        a listener, and starts every partition over: go on from where we were instead."""
        now = set(self.consumer.assignment())
        if now != self._known:
            self._assigned(now)

    def _assigned(self, partitions: set[TP]) -> None:
        self._known = set(partitions)
        chosen = self.handler.assigned(partitions)
        for tp in partitions:
            offset = chosen.get(tp, self.read.get(tp))
            if offset is not None:
                self.consumer.seek(tp, offset)
                self.read[tp] = offset
        for tp in list(self.read):
            if tp not in partitions:
                del self.read[tp]

    def seek(self, tp: TP, offset: int) -> None:
        """Go on in `tp` from `offset` (a handler that read it some other way)."""
        self.consumer.seek(tp, offset)
        self.read[tp] = offset

    def go_on(self, tp: TP, offset: int) -> None:
        """Go on in `tp` from `offset`, and fetch it again (a handler that held it paused
        while it read it some other way). A partition taken away meanwhile is left to the
        next assignment."""
        try:
            self.seek(tp, offset)
            self.resume([tp])
        except Exception as err:
            log.info("%s: seek %s/%d: %r", self.name, tp.topic, tp.partition, err)

    def holds(self, tp: TP) -> bool:
        """Whether the consumer is assigned `tp` now."""
        try:
            return tp in self.consumer.assignment()
        except Exception:
            return False

    def fetched(self, tp: TP) -> tuple[float | None, bool] | None:
        """(when a fetch of `tp` last answered, in seconds since the epoch -- None before
        the first --, whether everything up to the end that fetch saw is handed on); None
        when `tp` is not assigned. A partition whose fetches stopped answering (a broker
        away, this process paused) keeps its old answer."""
        try:
            high = self.consumer.highwater(tp)
            polled = self.consumer.last_poll_timestamp(tp)
        except Exception:  # not assigned any more
            return None
        if polled is None:
            return None, False
        return polled / 1000.0, high is not None and high <= self.read.get(tp, 0)

    def pause(self, tps: Sequence[TP]) -> None:
        self.consumer.pause(*tps)

    def resume(self, tps: Sequence[TP]) -> None:
        self.consumer.resume(*tps)

    def lag(self) -> dict[tuple[str, int], int | None] | None:
        """Per assigned partition, the records between what was handed on and the end as of
        the last fetch; None where Kafka answered no fetch lately. None before it runs."""
        if not self.running:
            return None
        out: dict[tuple[str, int], int | None] = {}
        now_ms = time.time() * 1000
        for tp in self.consumer.assignment():
            end, at = self.consumer.highwater(tp), self.consumer.last_poll_timestamp(tp)
            key = (tp.topic, tp.partition)
            if end is None or at is None or now_ms - at > FETCHED_WITHIN_MS:
                out[key] = None
            else:
                out[key] = max(0, end - self.read.get(TP(*key), 0))
        return out


async def partitions_of(consumer: Any, topic: str) -> set[int]:
    """The partitions `topic` has now (none if it does not exist). aiokafka's consumer only
    holds metadata of topics it was asked about, so ask its client for all of them."""
    client = getattr(consumer, "_client", None)
    if client is not None:
        cluster = await client.fetch_all_metadata()
        return set(cluster.partitions_for_topic(topic) or ())
    return set(consumer.partitions_for_topic(topic) or ())


async def ends_of(consumer: Any, topics: Sequence[str]) -> dict[TP, int]:
    """Where every partition of `topics` ends now, in one request. For topics that exist:
    asked for by name, one a broker auto-creates would be made. The consumer's client is told
    of them first, so that the request does not fail as stale and back off 100 ms first."""
    client = getattr(consumer, "_client", None)
    if client is not None:
        await client.set_topics(list(topics))
    tps = [TP(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
    ends = await consumer.end_offsets(tps) if tps else {}
    return {TP(tp.topic, tp.partition): int(end) for tp, end in ends.items()}


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """aiokafka's rebalance callbacks, forwarded to the loop and its handler. Assignment is
    synchronous on purpose (see `Handler.assigned`)."""

    def __init__(self, loop: ConsumingLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.loop.handler.revoked(set(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.loop._assigned(set(assigned))

"""The Kafka path's fleet stage: fleet incidents judged across every worker's runs.

The workers each see their partitions' runs; each re-keys what the fleet decision reads onto
the fleet topic (`runwatch.fleet`, `runwatch.stream.fleet.wire`) in its partitions'
transactions. This stage reads that topic as one consumer group (`<app-id>-fleet`) and
judges it as replay does (`runwatch.stream.fleet.merge`: on event time, under a watermark of
the partitions' marks), its `shared_cause` transitions going to `runwatch.alerts`. Every
worker runs it beside its partitions (`runwatch worker`, unless `--no-fleet-stage`); the
group gives the topic's one partition to one of them, and to another when that one dies.
One partition is enough: a worker sends a few records a minute per run (its usage), its
runs' transitions and a mark a second.

Exactly once, as the workers are: the member that holds the partition starts a
transactional producer of the id `<app-id>-fleet|<topic>|<partition>`, which fences the one
before (the broker aborts its open transaction and refuses it from then on, however long it
was paused). Its transitions go out in a transaction together with a checkpoint of its
state and the position after what it has read (on the checkpoints topic, `checkpoint_key`);
between transitions, a checkpoint every `CHECKPOINT_S`. With them, when it changes, the
fleet's view (`runwatch.emitters.runview.FleetView`: the services whose fleet incident is
open, what runs that opted into the fleet pause hold) as the record of key `@fleet` on the
compacted breaker topic, where the emitters' run-view followers read it. A member that
takes the partition over goes on from the newest checkpoint: nothing it publishes was
published before (any transition committed is covered by the checkpoint committed with it),
nothing read since is lost (it reads it again). The member that holds the partition exports
its open fleet incidents on its worker's /metrics (`fleet`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.errors import KafkaError, ProducerFenced

from runwatch.emitters.events import FLEET_RUN
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.emitters.runview import FleetView
from runwatch.emitters.topics import Topics
from runwatch.stream import checkpoint
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.exceptions import CheckpointError, InvalidFleetRecord
from runwatch.stream.fleet.members import KEY as MEMBERS_KEY
from runwatch.stream.fleet.members import Members
from runwatch.stream.fleet.merge import FleetMerge
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.fleet.wire import decode
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.checkpoints import MAX_BYTES, checkpoint_key, latest
from runwatch.stream.kafka.consume import TP, ConsumingLoop, Group, Handler, Record, partitions_of
from runwatch.stream.kafka.consume import refused as refused_record
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.stream.fleet")

#: The stage's state is checkpointed at least this often (what a takeover re-reads).
CHECKPOINT_S = 10.0
#: The longest wait between tries at taking the partition over (the broker away).
RETRY_S = 5.0


def group_of(app_id: str) -> str:
    """The fleet stage's consumer group, beside the workers' `app_id`."""
    return f"{app_id}-fleet"


class FleetStageRole(Handler):
    """The consuming loop's handler for the fleet topic (module docstring)."""

    def __init__(
        self,
        kafka: clients.Connects,
        topics: Topics,
        app_id: str,
        config: RulesConfig,
        *,
        say: Callable[[str], None] | None = None,
        session_timeout: float = 10.0,
    ) -> None:
        self.kafka, self.topics, self.config = kafka, topics, config
        self.group = group_of(app_id)
        self.say = say or log.info
        self.session_timeout = session_timeout
        self.merge: FleetMerge | None = None  # while it holds a partition, taken over
        self.partition: int | None = None
        self.producer: Any = None
        self.position = 0  # after the last record handed to the merge
        self.checkpointed = 0.0  # wall clock of the last checkpoint
        self.published = 0  # fleet transitions committed
        self.loop: ConsumingLoop | None = None
        self._dead: list[Refused] = []
        self._alerts: list[Alert] = []  # judged, to publish at the next turn
        #: the held services last published in the fleet view (None: not yet)
        self._held: list[dict[str, Any]] | None = None
        #: the membership last published to the workers (None: not yet)
        self._members: Members | None = None
        self._checkpoint_partitions: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """As a member of the stage's group, until cancelled or `stop` says so."""
        tuning = clients.group_settings(self.session_timeout, 0.2, 10.0)
        consumer = self.kafka.consumer(group=self.group, **tuning)
        self.loop = ConsumingLoop(consumer, Group((self.topics.fleet,)), self, name="fleet",
                                  stop=stop)  # fmt: skip
        try:
            await self.loop.run()
        finally:
            self.loop = None
            for task in self._tasks:
                task.cancel()
            await self._let_go()

    def fleet(self) -> FleetStage | None:
        """The fleet incidents this member judges (None while it holds no partition): what
        its /metrics exports as `runwatch_fleet_incident_runs`, as serve's does."""
        merge = self.merge
        return merge.stage if merge is not None else None

    # -- the partition: taken over, let go -----------------------------------------------

    def assigned(self, partitions: set[TP]) -> Mapping[TP, int]:
        mine = sorted(tp.partition for tp in partitions if tp.topic == self.topics.fleet)
        held = self.partition
        if held is not None and held in mine:
            return {TP(self.topics.fleet, held): self.position}
        if held is not None:
            self._keep(self._let_go())
        if mine:
            p = mine[0]  # (the topic has one; more would be idle)
            self.partition = p
            if self.loop is not None:
                self.loop.pause([TP(self.topics.fleet, p)])
            self._keep(self._take_over(p))
        return {}

    async def revoked(self, partitions: set[TP]) -> None:
        """Nothing to hand over: what is not checkpointed, the next holder reads again."""

    async def _take_over(self, partition: int) -> None:
        """Fence the previous holder, go on from the newest checkpoint (backing off while
        the broker is away)."""
        wait = 0.5
        while self.partition == partition and self.merge is None:
            try:
                await self._open(partition)
                return
            except (KafkaError, OSError) as err:
                log.warning("fleet partition %d: takeover failed (%s: %s); again in %.1fs",
                            partition, type(err).__name__, err, wait)  # fmt: skip
                await self._close_producer()
                await asyncio.sleep(wait)
                wait = min(RETRY_S, wait * 2)

    async def _open(self, partition: int) -> None:
        producer = self.kafka.producer(
            f"{self.group}|{self.topics.fleet}|{partition}",
            max_request_size=MAX_BYTES + (1 << 20),
        )
        await producer.start()  # fences whoever held it before
        self.producer = producer
        found = await latest(self.kafka, self.topics.checkpoints, self._key(partition), partition)
        events = len(await self._partitions(self.topics.events))
        merge, position, how = FleetMerge(self.config, events, time.time()), 0, "from the start"
        if found.value is not None:
            try:
                state, position = checkpoint.unpack(found.value, self.config)
                merge.load_state(state)
                how = f"from the checkpoint at offset {position}"
            except CheckpointError as err:
                merge, position = FleetMerge(self.config, events, time.time()), 0
                how = f"from the start (its checkpoint: {err.reason})"
        if self.partition != partition:
            await self._close_producer()
            return
        self.merge, self.position, self.checkpointed = merge, position, time.time()
        self._members = None  # (told again: what the topic holds may be another's)
        self.say(f"fleet stage: holds {self.topics.fleet}/{partition}, reading {how}")
        if self.loop is not None:
            self.loop.go_on(TP(self.topics.fleet, partition), position)

    async def _partitions(self, topic: str) -> set[int]:
        """`topic`'s partitions now (none if it does not exist)."""
        reader = self.kafka.consumer()
        await reader.start()
        try:
            return await partitions_of(reader, topic)
        finally:
            await reader.stop()

    async def _let_go(self) -> None:
        self.merge, self.partition = None, None
        await self._close_producer()

    async def _close_producer(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.stop()

    def _key(self, partition: int) -> bytes:
        return checkpoint_key(self.group, self.topics.fleet, partition)

    # -- the live path ---------------------------------------------------------------------

    async def handle(self, records: list[Record]) -> None:
        merge = self.merge
        if merge is None or records[0].partition != self.partition:
            return
        now = time.time()
        out = []
        for record in records:
            if record.offset < self.position:
                continue
            try:
                out += merge.add(decode(record.value), now)
            except InvalidFleetRecord as err:
                self._dead.append(refused_record(record, err.reason))
            self.position = record.offset + 1
        self._alerts += out

    def dead(self, record: Record, reason: str) -> None:
        self._dead.append(refused_record(record, reason))

    async def turn(self) -> None:
        """After each poll: what the watermark now covers judged; transitions, dead letters
        and (with transitions, or when due) a checkpoint committed in one transaction."""
        merge, p = self.merge, self.partition
        if merge is None or p is None or self.producer is None:
            return
        now = time.time()
        alerts, self._alerts = self._alerts + merge.release(now), []
        due = now - self.checkpointed >= CHECKPOINT_S
        view = merge.stage.view(merge.released)
        held = [h.model_dump() for h in view.held]
        changed = view if held != self._held else None
        members = Members.of(merge.stage.state)
        told = members if members != self._members else None
        if not alerts and not self._dead and not due and changed is None and told is None:
            return
        try:
            await self._commit(p, alerts, due, changed, told)
            self._held, self._members = held, members
        except ProducerFenced:
            self.say(f"fleet stage: fenced on {self.topics.fleet}/{p}; another member holds it")
            await self._let_go()
        except KafkaError as err:  # the transaction is aborted: read again from the last
            log.warning("fleet stage: transaction failed (%s: %s); going back to the last "
                        "checkpoint", type(err).__name__, err)  # fmt: skip
            await self._let_go()
            self.partition = p
            self._keep(self._take_over(p))

    async def _commit(
        self,
        p: int,
        alerts: list[Alert],
        checkpointing: bool,
        view: FleetView | None,
        members: Members | None,
    ) -> None:
        producer, merge = self.producer, self.merge
        assert merge is not None
        await producer.begin_transaction()
        try:
            for alert in alerts:
                await producer.send(self.topics.alerts, alert.to_json(), alert.run.encode())
            dead, self._dead = self._dead, []
            for letter in dead:
                await producer.send(self.topics.dlq, letter.to_json(), letter.where.encode())
            if view is not None:  # after the transitions it follows from
                await producer.send(self.topics.breaker, view.model_dump_json().encode(),
                                    FLEET_RUN.encode())  # fmt: skip
            if members is not None:  # which run incidents are members, for the workers
                await producer.send(self.topics.fleet_members, members.encode(), MEMBERS_KEY)
            if alerts or checkpointing:
                data = checkpoint.pack(merge.dump_state(), self.config, self.position)
                await producer.send(self.topics.checkpoints, data, self._key(p),
                                    partition=p % await self._checkpoints_count())  # fmt: skip
            await producer.commit_transaction()
        except BaseException:
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
            raise
        self.published += len(alerts)
        if alerts or checkpointing:
            self.checkpointed = time.time()
        if alerts:
            self.say(f"fleet stage: {len(alerts)} fleet transition(s) published")

    async def _checkpoints_count(self) -> int:
        """The checkpoints topic's partitions (a checkpoint goes where `latest` looks)."""
        if self._checkpoint_partitions is None:
            found = await self._partitions(self.topics.checkpoints)
            self._checkpoint_partitions = len(found) or 1
        return self._checkpoint_partitions

    def _keep(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def run_alone(
    bootstrap: str,
    security: KafkaSecurity,
    topics: Topics,
    app_id: str,
    config: RulesConfig,
    partitions: int,
    stop: threading.Event,
) -> int:
    """`runwatch fleet`: the stage in a process of its own (the workers' topics created
    first, with their settings), until `stop` is set; the exit status."""

    async def main() -> None:
        await ensure_topics(bootstrap, topics, partitions, security=security)
        role = FleetStageRole(clients.Connection(bootstrap, security), topics, app_id, config,
                              say=_stderr)  # fmt: skip
        _stderr(f"judging fleet incidents from {topics.fleet} as group {role.group}; "
                f"transitions to {topics.alerts}")  # fmt: skip
        await role.run(stop.is_set)

    asyncio.run(main())
    return 0


def _stderr(message: str) -> None:
    print(f"runwatch fleet: {message}", file=sys.stderr, flush=True)

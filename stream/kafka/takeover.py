"""Taking partitions over: what a stream worker does with partitions the group just gave it,
before it judges them live.

Each partition starts from its newest checkpoint on `runwatch.checkpoints` when that decodes
and fits the partition as it is now (`stream/recovery.py`), else from nothing (said in one
line); where its previous owner promised a handover checkpoint (`handover.py`), the search
waits for it (`KafkaCheckpoints.newest`). The partitions given at once are restored side by
side: their checkpoints are read, and promises waited on, together. Then the records after it are
re-read, up to the partition's end as it was when the re-read began (under traffic the end
moves on; a rebuild that chased it would never finish), with transitions held back;
`runwatch.alerts` and the dead-letter topic are read to learn what was published already,
and only what is missing comes out (`LiveDriver.finish_replay`). A live worker's checkpoint
says where those topics ended when it was made (`read.output_ends`); what its state made is
before that, so they are read from there on -- from their start only where a partition has
no such checkpoint. A re-read longer than the checkpoint interval stores checkpoints as it
goes, so a worker killed half-way leaves its successor only the rest.

The worker (`worker.py`) installs what comes out: the drivers go live, the missing
transitions are published, the live loop goes on from where the re-read stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from runwatch.emitters.topics import Topics
from runwatch.stream import checkpoint
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import CheckpointError
from runwatch.stream.kafka.checkpoints import KafkaCheckpoints
from runwatch.stream.kafka.clients import Connects
from runwatch.stream.kafka.publish import Output
from runwatch.stream.kafka.read import Ends, earliest, end_offset, read_published, read_topic
from runwatch.stream.live import LiveDriver
from runwatch.stream.recovery import restore
from runwatch.stream.refused import Refused

#: The longest wait between tries at reading a partition's checkpoint.
CHECKPOINT_RETRY_S = 5.0
#: Records a driver applies between turns of the event loop, live or re-reading. The group
#: heartbeat runs in between, so a long rebuild does not look like a dead member (a whole
#: fetch, up to 20,000 records, applied at once can hold the loop for seconds on a loaded
#: machine, past the heartbeat interval), and a worker behind on its live partitions still
#: gives the loop to a takeover's reads, whose every round trip waits for a turn.
FEED_SLICE = 1000


async def fed(driver: LiveDriver, records: list[Any]) -> tuple[list[Alert], list[Refused]]:
    """One partition's Kafka records into `driver` (`LiveDriver.feed_records`: one event
    each, or a batch's), FEED_SLICE at a time, with a turn of the event loop for every other
    task in between; what it made, in order."""
    if len(records) <= FEED_SLICE:
        return driver.feed_records(records)
    alerts: list[Alert] = []
    dead: list[Refused] = []
    for i in range(0, len(records), FEED_SLICE):
        if i:
            await asyncio.sleep(0)
        made, refused = driver.feed_records(records[i : i + FEED_SLICE])
        alerts += made
        dead += refused
    return alerts, dead


def _output(output: Any) -> Ends | None:
    """A checkpoint's output ends, if they are what `read.output_ends` makes (else None: a
    takeover reads the output topics from their start, which is slower, never wrong)."""
    if not isinstance(output, dict):
        return None
    for ends in output.values():
        if not isinstance(ends, dict) or not all(
            type(p) is int and type(end) is int for p, end in ends.items()
        ):
            return None
    return output


class Start(NamedTuple):
    """Where a partition's takeover starts: its driver, the offset to re-read from, and
    where the output topics ended when its checkpoint was made (None: not known, read them
    from their start)."""

    driver: LiveDriver
    offset: int
    output: Ends | None = None
    #: seconds its checkpoint took to read (a promised handover waited for included), and
    #: to load
    read_s: float = 0.0
    load_s: float = 0.0


@dataclass
class Rebuilt:
    """Partitions brought up to date: their drivers and where the live loop goes on, what
    the re-read made that was not published yet, and how much it read."""

    drivers: dict[int, LiveDriver]
    resume: dict[int, int]
    #: the partitions still this worker's when the re-read ended, in order
    kept: list[int] = field(default_factory=list)
    #: per partition kept, what its re-read made that is not published yet
    made: dict[int, Output] = field(default_factory=dict)
    #: records of runwatch.events re-read, and the events of them applied (a batch record
    #: holds several; a duplicate, an invalid or a late one is none)
    records: int = 0
    events: int = 0
    seconds: float = 0.0
    #: records of runwatch.alerts and the dead-letter topic read to learn what is published
    output_read: int = 0
    #: wall seconds of each step of the takeover, in order (said with the summary: where
    #: the time from an assignment to live goes)
    steps: dict[str, float] = field(default_factory=dict)

    def summary(self, live: list[int]) -> str:
        """The line said once the partitions that are `live` went live."""
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        dropped = sorted(set(self.drivers) - set(live))
        gone = f"; {dropped} given away meanwhile" if dropped else ""
        transitions = sum(len(m.alerts) for m in self.made.values())
        return (f"live on partitions {live}: rebuilt from {self.records} records "
                f"({self.events} events applied) in {self.seconds:.2f}s ({rate:,.0f} "
                f"records/s), {transitions} missing alert transitions published "
                f"({self.output_read} alert and dead-letter records read){gone}; "
                f"{self.took()}")  # fmt: skip

    def took(self) -> str:
        """The steps' seconds, one phrase: `restore 1.20s, fence 0.10s, ...`."""
        return ", ".join(f"{step} {s:.2f}s" for step, s in self.steps.items())


@dataclass
class Takeover:
    """What a takeover needs of its worker: where Kafka is, the names, where checkpoints
    are kept, how to make a fresh driver, how to say a line, and how to store a checkpoint
    while re-reading."""

    kafka: Connects
    topics: Topics
    checkpoints: KafkaCheckpoints
    fresh: Callable[[int], LiveDriver]
    say: Callable[[str], None]
    #: whether a partition re-read this far is due a checkpoint (partition, driver, now)
    due: Callable[[int, LiveDriver, float], bool]
    #: store one (partition, applied, offset, data, runs, now); whether it was stored
    store: Callable[[int, int, int, bytes, int, float], Awaitable[bool]]
    #: whether a partition is still being taken over (not given away meanwhile)
    taking: Callable[[int], bool] = lambda partition: True

    async def restore(self, partition: int) -> Start:
        """A driver for `partition` with its newest checkpoint's state, and the offset to
        re-read from: the checkpoint's, else 0 (a full rebuild, said in one line)."""
        started = time.perf_counter()
        data, end = await self._newest(partition)
        read_s = time.perf_counter() - started
        if data is None:  # said, so that a takeover that found none can be told apart
            self.say(f"partition {partition}: no checkpoint found; rebuilding from the start")
            # a partition that never had a record has no output to learn of
            return Start(self.fresh(partition), 0, {} if end == 0 else None)

        def fits(position: Any) -> None:
            offset = position["offset"]
            if not isinstance(offset, int) or offset > end:
                raise CheckpointError(f"it covers up to offset {offset} and the partition "
                                      f"ends at {end}: the topic was made anew")  # fmt: skip

        started = time.perf_counter()
        restored = restore(data, lambda: self.fresh(partition), fits)
        load_s = time.perf_counter() - started
        if restored.position is None:
            self.say(f"partition {partition}: checkpoint not used ({restored.refused}); "
                     "rebuilding from the start")  # fmt: skip
            return Start(restored.driver, 0)
        driver, offset = restored.driver, restored.position["offset"]
        self.say(f"partition {partition}: from the checkpoint at offset {offset} "
                 f"({len(driver.engine.runs)} runs, {len(data):,} bytes; read in {read_s:.2f}s, "
                 f"loaded in {load_s:.2f}s)")  # fmt: skip
        return Start(driver, offset, _output(restored.position.get("output")), read_s, load_s)

    async def _newest(self, partition: int) -> tuple[bytes | None, int]:
        """The partition's newest checkpoint and where the partition ends, read again
        (backing off) while they cannot be -- a broker away cannot give the events to
        re-read either, and a rebuild from the start would cost the whole retention --
        until the partition is given away."""
        wait, said = 0.5, False
        while True:
            try:
                found = await self.checkpoints.newest(partition)
                end = await end_offset(self.kafka, self.topics.events, partition)
            except Exception as err:
                if not self.taking(partition):
                    return None, 0  # given away: whatever it starts from is dropped
                if not said:
                    self.say(f"partition {partition}: checkpoints cannot be read yet ({err}); "
                             "trying again")  # fmt: skip
                    said = True
                await asyncio.sleep(wait)
                wait = min(CHECKPOINT_RETRY_S, wait * 2)
                continue
            if found.waited:
                self.say(f"partition {partition}: waited {found.waited:.2f}s for the "
                         "previous owner's handover checkpoint")  # fmt: skip
            return found.value, end

    async def rebuild(
        self,
        partitions: list[int],
        restored: dict[int, Start],
        still_mine: Callable[[int], bool],
    ) -> Rebuilt:
        """Re-read `partitions` from where their `restored` drivers stand to their ends as
        of now, and sort out what the re-read made against what is published, for those
        still this worker's when it ends. Time for the silence rules goes to when the ends
        were taken: what came after is the live loop's to read and judge."""
        started = time.perf_counter()
        out = Rebuilt({p: s.driver for p, s in restored.items()},
                      {p: s.offset for p, s in restored.items()})  # fmt: skip
        since = earliest(s.output for s in restored.values())
        found = await read_published(self.kafka, self.topics, since)
        out.output_read = found.read
        out.steps["output read"] = time.perf_counter() - started
        published, dead_upto = found.alerts, found.dead_upto
        for d in out.drivers.values():
            if since is not None:  # the records before `since`: what the checkpoints hold
                published.checkpointed(d.engine)
            d.start_replay()

        async def feed(records: list[Any]) -> None:
            p = records[0].partition
            d = out.drivers[p]
            applied = d.applied
            await fed(d, records)
            out.resume[p] = records[-1].offset + 1
            out.records += len(records)
            out.events += d.applied - applied
            now = time.time()
            if still_mine(p) and self.due(p, d, now):
                # keep what it has: a worker killed now leaves its successor less to
                # re-read (the held transitions go along, for the successor to publish);
                # up to what it applied (records past a gap wait for what follows it)
                covered = out.resume[p] if d.position is None else d.position + 1
                data = checkpoint.dump(d, {"offset": covered})
                if await self.store(p, d.applied, covered, data, len(d.engine.runs), now):
                    self.say(f"partition {p}: rebuilding, {out.records:,} records re-read; "
                             f"checkpoint stored at offset {covered}")  # fmt: skip

        ends_taken = time.time()
        reread = time.perf_counter()
        read = await read_topic(self.kafka, self.topics.events, feed, partitions=partitions,
                                start=dict(out.resume), until="end")  # fmt: skip
        for p in partitions:  # past records deleted since the checkpoint: go on from there
            out.resume[p] = max(out.resume[p], read.get(p, 0))
        out.seconds = time.perf_counter() - started
        out.steps["re-read"] = time.perf_counter() - reread
        out.kept = [p for p in partitions if still_mine(p)]
        finishing = time.perf_counter()
        for p in out.kept:
            d = out.drivers[p]
            alerts, letters = d.finish_replay(published, ends_taken,
                                              dead_after=dead_upto.get(p, (-1, 0)))  # fmt: skip
            # the views a dead predecessor may not have published: every run the replay
            # changed, and every run with alerts firing or lifted
            engine = d.engine
            assert engine.views_changed is not None
            engine.views_changed.update(
                run for run, t in engine.runs.items() if t.firing or t.lifted
            )
            out.made[p] = Output(alerts, letters, engine.take_run_views())
        out.steps["finish"] = time.perf_counter() - finishing
        return out

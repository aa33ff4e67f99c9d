"""The Kafka fleet stage's decisions: the fleet records of every input partition merged on
event time, and judged as replay judges them. Pure: the driver (the fleet stage of the
Kafka workers) passes records in, with the wall clock.

Each input partition's records come in order, but the partitions interleave as their
workers happen to publish. So records wait in a buffer, and go to the decision in event-
time order up to a watermark: the smallest of the partitions' marks (`feed.py`), less
`LAG_S`. A partition none of whose records came for `IDLE_S` of wall time (its worker died,
its successor is still taking it over) stops holding the watermark; what it sends later,
like events spooled through an outage, is judged as it comes (`late` counts the
transitions).
A transition seen twice (a takeover publishes what its predecessor may have published) is
judged once.
"""

from __future__ import annotations

import heapq
from typing import Any

from runwatch.emitters.events import FLEET_RUN
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.fleet.population import RecordedPopulation
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.fleet.wire import FleetRecord, Mark, Transition, Uses, decode, encode
from runwatch.stream.state.fleet import RunUsage

#: How far behind the slowest partition's mark the decision stays (s of event time).
LAG_S = 2.0
#: A partition silent this long (wall clock) stops holding the watermark.
IDLE_S = 30.0
#: Runs and transition ids out of the decision's reach are let go each time the watermark
#: moved this much (s of event time): a look at every run, not one per turn.
FORGET_S = 5.0
_NEG = float("-inf")


class FleetMerge:
    """Fleet incidents from the fleet topic (module docstring)."""

    def __init__(self, config: RulesConfig, partitions: int, started: float) -> None:
        """`partitions`: how many partitions `runwatch.events` has (each holds the
        watermark until heard from, or `IDLE_S` after `started`)."""
        self.population = RecordedPopulation()
        self.stage = FleetStage(None, config, self.population)
        self.enabled = self.stage.enabled
        self.window = self.stage.params.users_within + self.stage.params.window
        self.marks: dict[int, float] = dict.fromkeys(range(partitions), _NEG)
        self.heard: dict[int, float] = dict.fromkeys(range(partitions), started)
        #: (ts, order, seq, record): decoded once, where it is read; a checkpoint keeps
        #: each as its fleet-topic value (`dump_state`)
        self.pending: list[tuple[float, int, int, FleetRecord]] = []
        self.seq = 0
        self.seen: dict[str, float] = {}  # transition ids judged, and their time
        self.released = _NEG  # the watermark so far
        self.forgot = _NEG  # the watermark when what is out of reach was last let go
        self.late = 0

    def add(self, record: FleetRecord, wall: float) -> list[Alert]:
        """One record, as read; returns the fleet transitions it makes at once (a late one)."""
        p = record.partition
        self.heard[p] = wall
        self.marks.setdefault(p, _NEG)
        if isinstance(record, Mark):
            self.marks[p] = max(self.marks[p], record.ts)
            return []
        if record.ts <= self.released:  # (a run's usage as of a clock behind it is no news)
            self.late += isinstance(record, Transition)
            return self._judge(record)
        order = 0 if isinstance(record, Uses) else 1  # what a run uses, before its alerts
        self.seq += 1
        heapq.heappush(self.pending, (record.ts, order, self.seq, record))
        return []

    def release(self, wall: float) -> list[Alert]:
        """The records the watermark now covers, judged in event-time order."""
        holding = [m for p, m in self.marks.items() if wall - self.heard[p] < IDLE_S]
        if holding:
            mark = min(holding) - LAG_S
        elif self.pending:  # every partition idle: what there is
            mark = max(ts for ts, *_ in self.pending)
        else:
            return []
        out: list[Alert] = []
        pending = self.pending
        while pending and pending[0][0] <= mark:
            out += self._judge(heapq.heappop(pending)[3])
        if mark > self.released:
            self.released = mark
            if mark >= self.forgot + FORGET_S:
                self.forgot = mark
                self._forget(mark)
        return out

    def _judge(self, record: FleetRecord) -> list[Alert]:
        if isinstance(record, Uses):
            self.population.report(record.run, record.usage)
            return []
        assert isinstance(record, Transition)
        alert = record.alert
        if alert.id in self.seen:
            return []
        self.seen[alert.id] = alert.ts
        return [a for a in self.stage.transitions([alert]) if a.run == FLEET_RUN]

    def _forget(self, now: float) -> None:
        """Bounded: runs not heard from within the decision's reach, and transition ids
        older than it, leave (what the decision reads of them is within its reach: held a
        little longer, they change no decision)."""
        before = now - self.window
        self.population.forget(before)
        if self.seen and next(iter(self.seen.values())) < before:
            self.seen = {i: ts for i, ts in self.seen.items() if ts >= before}

    def dump_state(self) -> dict[str, Any]:
        """What a checkpoint keeps (plain data and `runwatch.stream.state` classes; each
        run's usage as a tuple of its fields, which pickles in a fraction of the time of a
        `RunUsage` object: the stage checkpoints every few seconds, in its worker's loop)."""
        pending = [(ts, order, seq, encode(r)[1]) for ts, order, seq, r in self.pending]
        runs = {run: (u.clock, u.deps, u.hosts, u.servers)
                for run, u in self.population.runs.items()}  # fmt: skip
        return {"fleet": self.stage.state, "runs": runs, "marks": self.marks,
                "pending": pending, "seq": self.seq, "seen": self.seen,
                "released": self.released, "late": self.late}  # fmt: skip

    def load_state(self, state: dict[str, Any]) -> None:
        self.stage.load(state["fleet"])
        self.population.runs = {
            run: u if isinstance(u, RunUsage) else RunUsage(*u)  # (older: the objects)
            for run, u in state["runs"].items()
        }
        self.marks.update(state["marks"])
        self.pending = [
            (ts, order, seq, decode(value)) for ts, order, seq, value in state["pending"]
        ]  # (a heap still: the same order)
        self.seq, self.seen = state["seq"], state["seen"]
        self.released, self.late = state["released"], state["late"]

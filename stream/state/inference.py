"""Inference servers and the trajectories waiting on them: the "GPU idle while work waits" picture.

The time-independent half of the `inference_idle_with_pending` condition lives here and is
kept up to date on every relevant event, so the idle interval can be attributed to training
steps (`idle_gap_growing`) and the rule itself only adds the heartbeat check.
"""

from __future__ import annotations

import copyreg
import sys
import zlib
from struct import Struct
from typing import Any

from runwatch.stream.state.compact import EMPTY, Compact
from runwatch.stream.state.processes import Process
from runwatch.stream.state.progress import Counter

#: bytes of a remembered trajectory id's digest: its CRC-32 and Adler-32 (a false match
#: among a run's last 128 ended ids: about 1 in 10**12 lookups, or rarer)
_DIGEST = 8
_PAIR = Struct("<II").pack
_crc32, _adler32 = zlib.crc32, zlib.adler32
#: the requests in flight of a server that never had one (most report queue stats instead):
#: one empty set for all of them, replaced on the first request (`Inference.request`)
NO_REQUESTS: set[str] = frozenset()  # type: ignore[assignment]


def _digest(traj: str) -> bytes:
    """A stable digest of a trajectory id (the same in every process: checkpoints keep it).
    Two checksums, cheaper than a cryptographic hash on every trajectory's start and end."""
    data = traj.encode()
    return _PAIR(_crc32(data), _adler32(data))


class Server(Compact):
    """One inference server (or engine): its latest queue snapshot or its in-flight requests."""

    __slots__ = (
        "final",
        "in_flight",
        "kv_cache_usage",
        "process",
        "running",
        "stalled_since",
        "stats_ts",
        "waiting",
    )

    def __init__(self, process: Process | None) -> None:
        self.process = process  # the process whose heartbeats vouch for this server
        self.stats_ts: float | None = None  # ts of the latest snapshot; None: requests only
        self.running = 0
        self.waiting = 0
        self.kv_cache_usage: float | None = None
        self.in_flight = NO_REQUESTS
        self.final = False
        #: the first snapshot since the engine last made progress that said it holds
        #: requests and makes no tokens (no generation, no prefill); None: it progresses
        self.stalled_since: float | None = None

    @property
    def idle(self) -> bool:
        if self.stats_ts is not None:
            return self.running == 0 and self.waiting == 0
        return not self.in_flight


class PendingTrajectory(Compact):
    """A trajectory that has started and not finished."""

    __slots__ = ("dep", "group", "phase", "phase_since", "started", "step")

    def __init__(self, started: float, step: int | None, group: str | None = None) -> None:
        self.started = started
        self.step = step
        self.group = group
        self.phase = "generate"
        self.phase_since = started
        self.dep: str | None = None  # the service it waits on in this phase (`dep`)


class Inference:
    """Servers, pending trajectories and when "every server idle while work waits" began."""

    __slots__ = ("_ended_next", "_ended_sums", "_started_by_step", "bars", "finals",
                 "idle_since", "pending", "pending_since", "servers")  # fmt: skip

    #: How many finished trajectory ids to remember, so that a `started` arriving after its
    #: `done` (beyond the reorder window) does not leave a phantom pending trajectory. They
    #: are kept as 8-byte digests in one ring buffer: 1 KiB per run, where the ids
    #: themselves took about 8 (bench/memory.py).
    ENDED_MEMORY = 128

    def __init__(self) -> None:
        self.servers: dict[str, Server] = {}
        #: how many of them are out of the picture (`Server.final`): while none is, a beat
        #: that leaves its process's `final` as it was changes no server
        self.finals = 0
        self.pending: dict[str, PendingTrajectory] = {}
        self.pending_since: float | None = None
        #: When every known server became idle while something was pending; None when not.
        self.idle_since: float | None = None
        self._ended_sums = bytearray(_DIGEST * self.ENDED_MEMORY)
        self._ended_next = 0  # the ring's slot the next ended id goes in
        self._started_by_step: dict[int | None, int] = {}
        #: progress counters that stand for pending trajectories (`pending_bars`): their
        #: `total - n` trajectories wait while the bar is not complete
        self.bars: dict[tuple[str, str], Counter] = EMPTY

    # -- checkpoints -----------------------------------------------------------------------

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """Pickled with its pending trajectories as columns (`_columns`), not a record
        each: most of a fleet run's checkpoint is its pending trajectories, and a record
        costs a Python call and two memo entries to write where a column entry costs none."""
        return copyreg.__newobj__, (type(self),), (  # type: ignore[attr-defined]
            self.servers, self.finals, _columns(self.pending), self.pending_since,
            self.idle_since, self._ended_sums, self._ended_next, self._started_by_step,
            self.bars)  # fmt: skip

    def __setstate__(self, values: tuple[Any, ...]) -> None:
        (self.servers, self.finals, columns, self.pending_since, self.idle_since,
         self._ended_sums, self._ended_next, self._started_by_step, self.bars) = values  # fmt: skip
        self.pending = _from_columns(columns)

    # -- servers ---------------------------------------------------------------------------

    def server(self, name: str, process: Process | None) -> Server:
        srv = self.servers.get(name)
        if srv is None:
            srv = self.servers[name] = Server(process)
        elif process is not None and srv.process is None:
            srv.process = process
        return srv

    def stats(
        self,
        name: str,
        process: Process,
        ts: float,
        running: int,
        waiting: int,
        kv: float | None,
        gen: float | None = None,
        prompt: float | None = None,
        stalled_since: float | None = None,
    ) -> bool:
        """Take a queue snapshot. Returns whether it may change whether every server is idle
        (`all_idle_with_pending`): a new server, or one whose idleness flipped. Most snapshots
        change neither, and the caller need not judge the condition again."""
        srv = self.server(name, process)
        last = srv.stats_ts
        if last is not None and ts < last:
            return False  # a late snapshot: the latest one stands
        # (a server new, or first heard of, has no snapshot yet: `last` is None)
        changed = last is None or bool(srv.running or srv.waiting) != bool(running or waiting)
        srv.process = process
        srv.stats_ts = ts
        srv.running, srv.waiting, srv.kv_cache_usage = running, waiting, kv
        # stalled: it holds requests and says it made no token in the last interval, of
        # either kind (a snapshot that does not say its throughput says nothing of it)
        if running > 0 and gen is not None and gen <= 0.0 and (prompt is None or prompt <= 0.0):
            if srv.stalled_since is None:
                srv.stalled_since = ts
            if stalled_since is not None and stalled_since < srv.stalled_since:
                srv.stalled_since = stalled_since  # the engine's own measure, earlier
        else:
            srv.stalled_since = None
        return changed

    def request(self, name: str, process: Process | None, req: str, done: bool) -> None:
        srv = self.server(name, process)
        if not srv.in_flight:  # (`NO_REQUESTS`: nothing to discard, and not to add to)
            if not done:
                srv.in_flight = {req}
        elif done:
            srv.in_flight.discard(req)
        else:
            srv.in_flight.add(req)

    def process_final(self, process: Process) -> bool:
        """A clean exit of a server's process takes that server out of the picture.

        Returns whether any server changed (most heartbeats change none)."""
        changed = False
        for srv in self.servers.values():
            if srv.process is process and srv.final != process.final:
                srv.final = process.final
                self.finals += 1 if srv.final else -1
                changed = True
        return changed

    # -- trajectories ----------------------------------------------------------------------

    def started(self, traj: str, ts: float, step: int | None, group: str | None = None) -> None:
        if traj in self.pending:
            return
        digest = _digest(traj)  # (the one digest checkpoints keep: never written out twice)
        at = self._ended_sums.find(digest)  # `_ended_slot`'s first probe, its call only on a hit
        if at >= 0 and (at % _DIGEST == 0 or self._ended_slot(digest) >= 0):
            return
        if not self.pending:
            self.pending_since = ts
            if step is None:
                self._started_by_step.pop(None, None)  # a new batch of step-less trajectories
        self.pending[traj] = PendingTrajectory(ts, step, group)
        counts = self._started_by_step
        counts[step] = counts.get(step, 0) + 1
        if len(counts) > 8:
            del counts[next(iter(counts))]

    def started_in_step(self, step: int | None) -> int:
        """How many trajectories of this step (or of this batch, without steps) started."""
        return self._started_by_step.get(step, 0)

    def phase(self, traj: str, phase: str, ts: float, dep: str | None = None) -> None:
        t = self.pending.get(traj)
        if t is not None and ts >= t.phase_since:
            # a handful of phase names across thousands of pending trajectories: share them
            t.phase = sys.intern(phase)
            t.phase_since = ts
            t.dep = sys.intern(dep) if dep is not None else None

    def waits_on(self, now: float, stalled_since: float) -> str | None:
        """The service the run's stalled work waits on: of the pending trajectories whose
        phase names one (`dep`) and that have sat in it for at least half the stall (a
        reward call of a second while a collective hangs is not what the run waits on),
        the one longest in its phase says which; None if none does. (Read when an alert is
        described, not per event.)"""
        least = (now - stalled_since) / 2
        waiting = [t for t in self.pending.values()
                   if t.dep is not None and now - t.phase_since >= least]  # fmt: skip
        return min(waiting, key=lambda t: t.phase_since).dep if waiting else None

    def pending_by_dep(self) -> dict[str, int]:
        """How many pending trajectories wait on each service, most first."""
        counts: dict[str, int] = {}
        for t in self.pending.values():
            if t.dep is not None:
                counts[t.dep] = counts.get(t.dep, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def has_ended(self, traj: str) -> bool:
        """Whether a `trajectory.done` of `traj` was seen already (of the recent ones)."""
        return self._ended_slot(_digest(traj)) >= 0

    def _ended_slot(self, digest: bytes) -> int:
        ring = self._ended_sums
        at = ring.find(digest)
        while at >= 0 and at % _DIGEST:  # a match across two slots is not one
            at = ring.find(digest, at + 1)
        return at

    def done(self, traj: str) -> None:
        digest = _digest(traj)
        if self.pending.pop(traj, None) is None:
            if self._ended_slot(digest) >= 0:
                return
        elif not self.pending:
            self.pending_since = None
        at = self._ended_next  # the ring's next slot takes it
        self._ended_sums[at * _DIGEST : at * _DIGEST + _DIGEST] = digest
        self._ended_next = (at + 1) % self.ENDED_MEMORY

    def clear_pending(self) -> None:
        self.pending.clear()
        self.pending_since = None
        self.bars = EMPTY

    def bar_pending(self) -> int:
        """Trajectories the pending-work bars say wait (0 for a complete or open bar)."""
        return sum(
            c.total - c.n for c in self.bars.values() if c.total is not None and c.n < c.total
        )

    # -- the condition ---------------------------------------------------------------------

    def served_by(self, process: Process) -> dict[str, str]:
        """`{"server": name}` when `process` is the one whose heartbeats vouch for an
        inference server of the run (its first, by name), else nothing."""
        names = sorted(name for name, s in self.servers.items() if s.process is process)
        return {"server": names[0]} if names else {}

    def live_servers(self) -> list[Server]:
        return [s for s in self.servers.values() if not s.final]

    def all_idle_with_pending(self) -> bool:
        """Every live server idle while a trajectory waits (heartbeats not considered)."""
        if not self.pending and (not self.bars or not self.bar_pending()):
            return False
        live = False
        for s in self.servers.values():  # (`live_servers` and `Server.idle`, written out)
            if s.final:
                continue
            if (s.running or s.waiting) if s.stats_ts is not None else s.in_flight:
                return False
            live = True
        return live

    def update_idle(self, now: float) -> tuple[float, float] | None:
        """Recompute the condition at `now`; returns (start, end) of an idle span that ended."""
        holding = self.all_idle_with_pending()
        if holding and self.idle_since is None:
            self.idle_since = now
        elif not holding and self.idle_since is not None:
            span = (self.idle_since, now)
            self.idle_since = None
            return span
        return None


def _columns(pending: dict[str, PendingTrajectory]) -> tuple[Any, ...]:
    """Pending trajectories as (ids, then one list per `PendingTrajectory` slot), the ids
    joined by newlines into one string where none holds one (the contract forbids control
    characters in them: one string pickles many times faster than thousands)."""
    ids: str | list[str] = list(pending)
    joined = "\n".join(ids)
    if joined.count("\n") == len(ids) - 1 and (joined or not ids):
        ids = joined
    records = pending.values()
    return (ids, *([getattr(t, name) for t in records] for name in PendingTrajectory.__slots__))


def _from_columns(columns: tuple[Any, ...]) -> dict[str, PendingTrajectory]:
    """`_columns` read back."""
    ids, *values = columns
    if isinstance(ids, str):
        ids = ids.split("\n") if ids else []
    if len(values) != len(PendingTrajectory.__slots__) or any(len(v) != len(ids) for v in values):
        raise ValueError("pending trajectories' columns of unequal length")
    new, fill = PendingTrajectory.__new__, PendingTrajectory.__setstate__  # type: ignore[attr-defined]
    pending: dict[str, PendingTrajectory] = {}
    for traj, record in zip(ids, zip(*values, strict=True), strict=True):
        t = pending[traj] = new(PendingTrajectory)
        fill(t, record)
    return pending

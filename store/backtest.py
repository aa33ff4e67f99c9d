"""Backtest: what a rules config would have raised on stored history, next to what was raised.

The stored events of the chosen runs go through `runwatch.stream.replay` -- the engine the
live worker runs -- in event-time order (ties in arrival order). Each run is replayed from its
first event, also with `since`, so streaks and timers that began earlier count; only
transitions at or after `since` are compared. Transitions are matched per alert key: the n-th
firing (resolved) of a key replayed against the n-th firing (resolved) of that key recorded.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from runwatch.emitters.events import FLEET_RUN
from runwatch.store.store import Store
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.refused import Refused
from runwatch.stream.replay import replay

ChangeKind = Literal["moved", "added", "removed", "same"]

#: Two transition times closer than this are the same moment.
SAME_TS = 1e-3


@dataclass(frozen=True, slots=True)
class Transition:
    rule: str
    run: str
    key: str
    state: str
    ts: float
    summary: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    rule: str
    run: str
    key: str
    state: str
    recorded: Transition | None
    replayed: Transition | None
    recorded_step: int | None = None  # the step the run was at, at the transition's time
    replayed_step: int | None = None

    @property
    def subject_text(self) -> str | None:
        t = self.replayed or self.recorded
        return t.subject if t is not None else None

    @property
    def delta_s(self) -> float | None:
        if self.recorded is None or self.replayed is None:
            return None
        return self.replayed.ts - self.recorded.ts

    @property
    def delta_steps(self) -> int | None:
        if self.recorded_step is None or self.replayed_step is None:
            return None
        return self.replayed_step - self.recorded_step

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": self.kind,
            "rule": self.rule,
            "run": self.run,
            "key": self.key,
            "state": self.state,
            "recorded_ts": self.recorded.ts if self.recorded else None,
            "replayed_ts": self.replayed.ts if self.replayed else None,
            "recorded_step": self.recorded_step,
            "replayed_step": self.replayed_step,
            "delta_s": self.delta_s,
            "delta_steps": self.delta_steps,
            "summary": (self.replayed or self.recorded).summary,  # type: ignore[union-attr]
        }


@dataclass
class Backtest:
    runs: list[str]
    events: int
    seconds: float
    changes: list[Change] = field(default_factory=list)
    invalid: list[Refused] = field(default_factory=list)
    #: the fleet incidents the replay opened (their `shared_cause` firings), when every run
    #: was replayed (one run alone says nothing of the fleet)
    fleet: list[Transition] = field(default_factory=list)

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind == kind)


def select_runs(store: Store, run: str | None, since: float | None) -> list[str]:
    where: list[str] = []
    args: list[object] = []
    if run is not None:
        where.append("run = ?")
        args.append(run)
    if since is not None:
        where.append("ts >= ?")
        args.append(since)
    sql = "SELECT DISTINCT run FROM events"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sorted(str(r[0]) for r in store.con.execute(sql + " ORDER BY run", args).fetchall())


def _stored_lines(store: Store, runs: list[str]) -> Iterator[tuple[str, int, bytes]]:
    reader = store.con.sql(
        "SELECT seq, CAST(raw AS VARCHAR) AS raw FROM events WHERE run IN (SELECT unnest(?)) "
        "ORDER BY ts, seq",
        params=[runs],
    ).to_arrow_reader(50_000)
    for batch in reader:
        seqs = batch.column(0).to_pylist()
        raws = batch.column(1).to_pylist()
        for seq, raw in zip(seqs, raws, strict=True):
            yield "stored event seq", seq, raw.encode()


class _Steps:
    """For each run, the training step it was at, at a given time: the highest step number
    any step event (started, metrics, reward, done) had shown by then."""

    def __init__(self, store: Store, runs: list[str]) -> None:
        rows = store.con.execute(
            "SELECT run, ts, max(step) OVER (PARTITION BY run ORDER BY ts, seq) FROM events "
            "WHERE kind IN ('step.started', 'step.metrics', 'reward', 'step.done') "
            "AND step IS NOT NULL AND run IN (SELECT unnest(?)) ORDER BY run, ts, seq",
            [runs],
        ).fetchall()
        self.ts: dict[str, list[float]] = defaultdict(list)
        self.step: dict[str, list[int]] = defaultdict(list)
        for run, ts, step in rows:
            self.ts[run].append(ts)
            self.step[run].append(step)

    def at(self, run: str, ts: float) -> int | None:
        i = bisect.bisect_right(self.ts.get(run, []), ts + SAME_TS)
        return self.step[run][i - 1] if i else None


def _recorded(store: Store, runs: list[str]) -> list[Transition]:
    rows = store.con.execute(
        "SELECT rule, run, key, state, ts, summary, subject FROM alert_log "
        "WHERE run IN (SELECT unnest(?)) ORDER BY ts, seq",
        [runs],
    ).fetchall()
    return [Transition(*r) for r in rows]


def replay_stored(
    store: Store,
    runs: list[str],
    engine: Engine,
    *,
    until: float | None = None,
    on_invalid: Callable[[Refused], None] | None = None,
    fleet: bool = True,
) -> Iterator[Alert]:
    """The alert transitions of `runs`, replayed from their stored events in event-time order
    (ties in arrival order) through `runwatch.stream.replay` (with `fleet`, the fleet
    incidents too)."""
    if not runs:
        return iter(())
    lines = _stored_lines(store, runs)
    return replay(lines, engine, until=until, on_invalid=on_invalid, fleet=fleet)


def run_backtest(
    store: Store,
    config: RulesConfig,
    *,
    run: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Backtest:
    started = time.perf_counter()
    runs = select_runs(store, run, since)
    result = Backtest(runs, 0, 0.0)
    replayed: list[Transition] = []
    fleet = run is None  # every run (of the period): the fleet's incidents are judged too
    if runs:
        engine = Engine(config)
        for a in replay_stored(store, runs, engine, until=until,
                               on_invalid=result.invalid.append, fleet=fleet):  # fmt: skip
            replayed.append(Transition(a.rule, a.run, a.key, a.state, a.ts, a.summary, a.subject))
        result.events = sum(t.state.events for t in engine.runs.values())
        result.fleet = [t for t in replayed if t.run == FLEET_RUN and t.state == "firing"]
    recorded = _recorded(store, [*runs, FLEET_RUN] if fleet and runs else runs)
    if since is not None:
        replayed = [t for t in replayed if t.ts >= since]
        recorded = [t for t in recorded if t.ts >= since]
    if until is not None:
        recorded = [t for t in recorded if t.ts <= until]
    result.changes = _compare(recorded, replayed, _Steps(store, runs))
    result.seconds = time.perf_counter() - started
    return result


def _compare(recorded: list[Transition], replayed: list[Transition], steps: _Steps) -> list[Change]:
    def slots(ts: list[Transition]) -> dict[tuple[str, str, int], Transition]:
        seen: dict[tuple[str, str], int] = defaultdict(int)
        out = {}
        for t in ts:
            n = seen[(t.key, t.state)]
            seen[(t.key, t.state)] += 1
            out[(t.key, t.state, n)] = t
        return out

    old, new = slots(recorded), slots(replayed)
    changes: list[Change] = []
    for slot in {**old, **new}:
        a, b = old.get(slot), new.get(slot)
        some = a or b
        assert some is not None
        if a is not None and b is not None:
            kind: ChangeKind = "same" if abs(a.ts - b.ts) <= SAME_TS else "moved"
        else:
            kind = "removed" if b is None else "added"
        changes.append(
            Change(
                kind,
                some.rule,
                some.run,
                some.key,
                some.state,
                a,
                b,
                steps.at(some.run, a.ts) if a else None,
                steps.at(some.run, b.ts) if b else None,
            )
        )
    changes.sort(key=lambda c: (min(t.ts for t in (c.recorded, c.replayed) if t), c.key, c.state))
    return changes

"""`Service`: the rules, the history and the notifiers behind `runwatch serve`.

Input (HTTP requests, spool segments) comes in as batches of lines. A batch is validated;
the valid lines, and the refused ones as dead letters, go to the event log (fsync) -- only
then is it acknowledged -- and the valid ones to the live driver (the Kafka worker's: skew
correction, wall-clock ticks) and the metrics. Alert transitions go to the alert log
(fsync) before the notifiers see them. The DuckDB history is written from the two logs by
`HistoryFollower` on its own thread: nothing the history does waits the rules. On start,
the rules' state is loaded from the checkpoint beside the logs and the event log re-read
from the position it covers (all of it when there is no usable checkpoint); transitions the
alert log lacks are published, those it has are not repeated (`LiveDriver.finish_replay`).
A checkpoint is written every `checkpoint_every` seconds with something new (the one
`Checkpointer` of `runwatch.stream.checkpointer`, the worker's too), after a compaction and
at a clean stop, to the file beside the logs (`checkpoint_file.FileCheckpoints`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from runwatch.emitters.runview import RunView
from runwatch.service.checkpoint_file import FileCheckpoints
from runwatch.service.history import HistoryFollower
from runwatch.service.wal import AlertLog, EventLog, LogsLock
from runwatch.store.exceptions import StoreLocked
from runwatch.store.store import Store
from runwatch.store.writer import WriteHealth
from runwatch.stream import checkpoint
from runwatch.stream.alerts import Alert
from runwatch.stream.checkpointer import Checkpointer
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import admit, decode
from runwatch.stream.exceptions import CheckpointError, InvalidEvent
from runwatch.stream.live import KEEP_FINISHED_S, SILENT_AFTER_S, LiveDriver
from runwatch.stream.metrics.exporter import RunwatchMetrics
from runwatch.stream.metrics.roles import CheckpointMetrics, ServiceCounters, new_registry
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.recovery import restore
from runwatch.stream.refused import Refused
from runwatch.stream.state.run import RunState

log = logging.getLogger("runwatch.serve")

Notifier = Callable[[Alert], None]
#: Told of each transition with its cursor (the follower streams, `service.stream`).
Listener = Callable[[str, Alert], None]
TOPIC = "wal"
#: The rules' state and the log position it covers, beside the logs.
CHECKPOINT = "state.ckpt"
#: Transitions kept for the API and the follower streams.
RECENT = 2000
T = TypeVar("T")


@dataclass
class Received:
    accepted: int = 0
    rejected: list[Refused] = field(default_factory=list)  # position: the line's number


class Service:
    def __init__(
        self,
        db: Path,
        wal_dir: Path,
        *,
        config: RulesConfig | None = None,
        registry: Any = None,
        notifiers: Sequence[Notifier] = (),
        flush_interval: float = 1.0,
        max_runs: int = 10_000,
        keep_finished_s: float = KEEP_FINISHED_S,
        silent_after_s: float = SILENT_AFTER_S,
        clock: Callable[[], float] = time.time,
        checkpoint_every: float = 60.0,
    ) -> None:
        self.clock = clock  # the wall clock (a test's own, to replay a day in a second)
        self.lock = threading.RLock()
        self.driver = LiveDriver(config, topic=TOPIC, fleet=True)
        self.db = db
        wal_dir.mkdir(parents=True, exist_ok=True)
        self.lock_file = LogsLock(wal_dir)  # raises LogsInUse: one service per set of logs
        self.events = EventLog(wal_dir / "events.wal")
        self.alert_log = AlertLog(wal_dir / "alerts.jsonl")
        self.notifiers = list(notifiers)
        self.registry = registry if registry is not None else new_registry()
        self.metrics = RunwatchMetrics(self.registry, lock=self.lock, clock=clock)
        self.metrics.instrument(self.driver.engine, transitions=False)
        self.metrics.add_fleet(lambda: self.driver.fleet)  # the driver a checkpoint replaces
        self.counters = ServiceCounters(self.registry)
        self.rejected, self.accepted = self.counters.rejected, self.counters.accepted
        self.history = HistoryFollower(
            db, self.events, self.alert_log, interval=flush_interval,
            on_failure=self.counters.history_failures.inc,
        )  # fmt: skip
        self.counters.follow(self.history.lag_bytes, self.history.lag_seconds)
        self.logs = WriteHealth(wal_dir, log, "the service's logs in")
        self.checkpoint_path = wal_dir / CHECKPOINT
        self.checkpoint_store = FileCheckpoints(self.checkpoint_path)
        #: when: every `checkpoint_every` seconds with something new (0: only when asked)
        self.checkpointer = Checkpointer(checkpoint_every)
        self.checkpoints = CheckpointMetrics(self.registry)
        self._checkpointing = threading.Lock()
        self._checkpoint_failing = False  # said once, until one is written again
        self.unlogged: list[Alert] = []  # transitions the alert log could not take yet
        self.listeners: list[Listener] = []
        #: the latest transitions, each with its number; a cursor is `boot-number`, so one
        #: from before a restart is known not to be ours
        self.recent: deque[tuple[int, Alert]] = deque(maxlen=RECENT)
        self.boot, self.seq = secrets.token_hex(4), 0
        self.last: dict[str, Alert] = {}  # alert key -> its latest transition
        self.ready = False
        #: bounded state: live runs at most; finished / silent runs leave after these
        self.max_runs, self.keep_finished_s, self.silent_after_s = (
            max_runs, keep_finished_s, silent_after_s,
        )  # fmt: skip
        self._evict_at = 0.0

    # -- start: rebuild from the logs ------------------------------------------------------

    def recover(self) -> int:
        """Rebuild state from the event log; publish only what the alert log lacks. Starts
        the history's thread."""
        with self.lock:
            published = PublishedAlerts()
            for a in self.alert_log.read():
                published.add(a)
            driver = self.driver
            start = self._load_checkpoint()
            driver.start_replay()
            n = 0
            for line, arrival, end in self.events.read(start):
                try:
                    event = decode(line)
                except InvalidEvent:  # valid when logged: damaged since
                    self.events.damaged += 1
                    continue
                n += 1
                driver.feed_events([(event, line, arrival, end, 0)])
            if self.events.damaged:
                log.warning("%s: passed over %d damaged lines; every intact record is kept",
                            self.events.path, self.events.damaged)  # fmt: skip
            for last in published.last.values():  # runs compacted away are not shown
                if last.run in driver.engine.runs:
                    self._remember(last)
            missing, _ = driver.finish_replay(published, self.clock())
            self._publish(missing)
            self.ready = True
        self.history.start()
        return n

    def _load_checkpoint(self) -> int:
        """Take over the checkpoint's state; the log position to replay from: where it
        ends, else 0 (all of it) when there is none or it cannot be used, said in one line."""
        path = self.checkpoint_path
        self.checkpointer.restored(0, None, 0, self.clock())  # the next one an interval on
        try:
            data = asyncio.run(self.checkpoint_store.read(0))
        except OSError as err:
            log.warning("%s: cannot be read (%s); replaying the whole event log", path, err)
            return 0
        if data is None:
            return 0
        events = self.events

        def fits(position: dict[str, Any]) -> None:
            generation, at = position["generation"], position["at"]
            if generation != events.generation or not 0 <= at <= events.size:
                raise CheckpointError(
                    f"it covers generation {generation} of the event log up to byte {at}; "
                    f"the log is generation {events.generation}, {events.size} bytes"
                )

        config = self.driver.engine.config
        restored = restore(data, lambda: LiveDriver(config, topic=TOPIC, fleet=True), fits)
        if restored.position is None:
            log.warning("%s: not used, replaying the whole event log: %s", path,
                        restored.refused)  # fmt: skip
            return 0
        position = restored.position
        self.driver.load_state(restored.driver.dump_state())  # the driver others hold
        self.checkpointer.stored(0, (position["generation"], position["at"]))
        return int(position["at"])

    def checkpoint(self, at_once: bool = True) -> int | None:
        """Store the rules' state and the log position it covers beside the logs (a restart
        replays only what follows); its size. `at_once`: whatever the interval (a compaction,
        a stop), else only when it is due (the main loop asks on every tick). None when
        there is nothing new, when it must wait (not recovered yet; transitions wait for the
        alert log: a checkpoint must not cover what no log holds), when it is not due, or
        when it cannot be written (said once, counted)."""
        with self._checkpointing:
            started = time.perf_counter()
            with self.lock:
                at = (self.events.generation, self.events.size)
                now, applied = self.clock(), self.driver.applied
                if (
                    not self.ready
                    or self.unlogged
                    or not self.checkpointer.due(0, at, applied, now, at_once=at_once)
                ):
                    return None  # fmt: skip
                self.checkpointer.tried(0, applied, now)
                data = checkpoint.dump(self.driver, {"generation": at[0], "at": at[1]})
                runs = len(self.driver.engine.runs)
            try:
                asyncio.run(self.checkpoint_store.write(0, data))
            except OSError as err:
                self.checkpoints.failed.labels(TOPIC).inc()
                if not self._checkpoint_failing:
                    log.warning("%s: cannot be written (%s); a restart replays more of the "
                                "event log", self.checkpoint_path, err)  # fmt: skip
                self._checkpoint_failing = True
                return None
            self.checkpointer.stored(0, at)
            self._checkpoint_failing = False
            self.checkpoints.stored(TOPIC, len(data), runs, time.perf_counter() - started)
            return len(data)

    # -- input -----------------------------------------------------------------------------

    def ingest(self, lines: Sequence[bytes], source: str = "http") -> Received:
        """Validate, log durably (the refused lines too), apply. Returns what was accepted
        and what was not (why). Raises OSError when the event log cannot be written: then
        nothing of the batch was acknowledged."""
        out = Received()
        good: list[tuple[bytes, Any]] = []
        dead: list[Refused] = []
        kinds: list[str] = []
        new_runs: set[str] = set()
        received = self.clock()
        check = self.driver.engine.check
        for i, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            try:
                event = admit(line, received)
                check(event)  # a run.started.config the rules refuse: refused now, not later
                self._room_for(event.run, new_runs)
                good.append((line, event))
            except InvalidEvent as err:
                refused = Refused(err.reason, line, source, position=i, kind=err.kind)
                out.rejected.append(refused)
                dead.append(refused)
                kinds.append(err.kind)
        if not good and not dead:
            return out
        with self.lock:
            arrival = self.clock()
            try:
                ends = self.events.append(arrival, [g[0] for g in good], dead)
            except OSError as err:
                self.logs.failed(err)
                raise
            self.logs.written()
            self.rejected.labels("invalid_event").inc(len(dead))
            if good:  # (late events of runs that left are logged, not applied: the driver)
                alerts, failed = self.driver.feed_events(
                    [(e, line, arrival, end, 0) for (line, e), end in zip(good, ends, strict=True)]
                )
                if failed:  # the rules refused these: kept as dead letters too
                    self._log_dead([Refused(d.reason, d.raw, source, kind=d.kind) for d in failed])
                    kinds += [d.kind for d in failed]
                self._publish(alerts)
            for kind in kinds:
                self.counters.dead_letters.labels(kind).inc()
            self.metrics.record_invalid(len(kinds))
        out.accepted = len(good)
        self.accepted.inc(len(good))
        return out

    def refuse(self, refused: Refused) -> None:
        """Keep a line refused before it could be read as one (an oversize spool line) as a
        dead letter, durably; raises OSError when the event log cannot be written."""
        with self.lock:
            try:
                self.events.append(self.clock(), [], [refused])
            except OSError as err:
                self.logs.failed(err)
                raise
            self.counters.dead_letters.labels(refused.kind).inc()
            self.metrics.record_invalid(1)

    def _room_for(self, run: str, new_runs: set[str]) -> None:
        """Refuse an event of a run the rules do not track yet while they track `max_runs`
        (after letting finished and long-silent runs go): a flood of run ids must not take
        the memory, or the rules' attention, from the runs being watched."""
        runs = self.driver.engine.runs
        if run in runs or run in new_runs or run in self.driver.gone:
            return
        if len(runs) + len(new_runs) >= self.max_runs:
            now = self.clock()
            if now >= self._evict_at:  # one pass over the runs now and then, not per event
                with self.lock:
                    self.evict(now)
                self._evict_at = now + 1.0
            if len(runs) + len(new_runs) >= self.max_runs:
                raise InvalidEvent(
                    f"the service tracks {len(runs)} runs, its limit (--max-runs): events of "
                    "new runs are refused until runs finish or go silent", "over_capacity",
                )  # fmt: skip
        new_runs.add(run)

    def evict(self, now: float, keep_finished_s: float | None = None) -> int:
        """Let go of runs finished over `keep_finished_s` ago or silent over
        `silent_after_s` (`LiveDriver.evict`; their events stay in the history, and in the
        log until it is compacted); counted."""
        keep = self.keep_finished_s if keep_finished_s is None else keep_finished_s
        finished, silent = self.driver.evict(now, keep, self.silent_after_s)
        if finished or silent:
            left = set(finished) | set(silent)
            self.last = {k: a for k, a in self.last.items() if a.run not in left}
        if finished:
            self.counters.evicted.labels("finished").inc(len(finished))
        if silent:
            self.counters.evicted.labels("silent").inc(len(silent))
        return len(finished) + len(silent)

    def _log_dead(self, dead: list[Refused]) -> None:
        try:
            self.events.append(self.clock(), [], dead)
        except OSError as err:
            self.logs.failed(err)  # the events are logged: the rules fail on them again

    def tick(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        with self.lock:
            self._publish(self.driver.tick(now))
            if now >= self._evict_at:
                self.evict(now)
                self._evict_at = now + 10.0  # and at most once a second when at the cap

    # -- output ----------------------------------------------------------------------------

    def _remember(self, alert: Alert) -> str:
        """Keep a transition for the read side; its cursor."""
        self.last[alert.key] = alert
        self.seq += 1
        self.recent.append((self.seq, alert))
        return f"{self.boot}-{self.seq}"

    def _publish(self, alerts: list[Alert]) -> None:
        """Log, then notify. A transition the alert log cannot take (a full disk) waits, in
        order, for the next try (every tick) -- never notified before it is logged."""
        self.unlogged += alerts
        if not self.unlogged:
            return
        try:
            self.alert_log.append(self.unlogged)
        except OSError as err:
            self.logs.failed(err)
            return
        self.logs.written()
        alerts, self.unlogged = self.unlogged, []
        self.metrics.record_transitions(alerts)
        for a in alerts:
            cursor = self._remember(a)
            for listen in self.listeners:
                listen(cursor, a)
            for notify in self.notifiers:
                try:
                    notify(a)
                except Exception:  # a notifier's trouble must not stop the rules
                    log.exception("runwatch serve: notifier %r failed", notify)

    def readiness(self) -> tuple[bool, str]:
        """/readyz: rebuilt from the logs, the logs and the history being written."""
        if not self.ready:
            return False, "starting up: rebuilding state"
        problem = self.logs.problem() or self.history.health.problem()
        return (False, problem) if problem is not None else (True, "ready")

    def compact(self, keep_finished_s: float | None = None) -> int | None:
        """Bound the event log (and so the restart): keep only the events of the runs the
        rules still track (`evict` first) -- the rest are in DuckDB. Only while the history
        has the whole log (else None: later); never waits on the history."""
        with self.history.paused() as held, self.lock:
            if not held or self.history.lag_bytes():
                return None
            self.evict(self.clock(), keep_finished_s)
            runs = self.driver.engine.runs
            size = self.events.rewrite(lambda line: _run_of(line) in runs)
            self.history.moved(size)
            self.checkpoint()  # of the new generation: until then a restart replays it all
        return size

    def exposition(self) -> bytes:
        """/metrics: the run gauges (the lock taken per run, not per scrape) and counters."""
        return self.metrics.exposition()

    def close(self) -> None:
        self.checkpoint()  # a clean stop: the next start replays nothing
        self.history.stop()
        self.events.close()
        self.alert_log.close()
        self.lock_file.close()

    # -- read side (JSON API) --------------------------------------------------------------

    def firing(self, run: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [
                a.to_dict()
                for a in self.last.values()
                if a.state == "firing" and (run is None or a.run == run)
            ]

    def runs(self) -> list[dict[str, Any]]:
        with self.lock:
            firing: dict[str, int] = {}
            for a in self.last.values():
                if a.state == "firing":
                    firing[a.run] = firing.get(a.run, 0) + 1
            return [
                _run_summary(s.state, firing.get(r, 0)) for r, s in self.driver.engine.runs.items()
            ]

    def run(self, run: str) -> dict[str, Any] | None:
        with self.lock:
            tracked = self.driver.engine.runs.get(run)
            if tracked is None:
                return None
            out = _run_summary(tracked.state, 0)
            out["firing"] = self.firing(run)
            out["alerts"] = out["firing_count"] = len(out["firing"])
            out["transitions"] = [a.to_dict() for _, a in self.recent if a.run == run]
            return out

    def run_view(self, run: str) -> RunView | None:
        """The run view (`runwatch.emitters.runview`), for the run's guards and emitters:
        the engine's, with the services it holds while their fleet incident is open."""
        with self.lock:
            engine, fleet = self.driver.engine, self.driver.fleet
            view = engine.run_view(run)
            if view is None or view.hold is None or fleet is None:
                return view
            return view.holding(fleet.view(engine.now))

    def incidents(self, run: str | None = None) -> list[dict[str, Any]]:
        """The incidents open now, with their root as it stands (a transition names the
        root as it stood when it was made)."""
        with self.lock:
            return self.driver.engine.open_incidents(run)

    def alerts(self, state: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        if state == "firing":
            return self.firing()
        with self.lock:
            items = [a.to_dict() for _, a in self.recent if state is None or a.state == state]
        return items[-limit:] if limit > 0 else []

    def cursor(self) -> str:
        """Where the transitions stand now: a follower given it gets only later ones."""
        return f"{self.boot}-{self.seq}"

    def transitions(
        self, after: str | None = None, run: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The transitions held after cursor `after` (all held when it is not one of this
        process's, or None), of `run` only when given, each with its cursor."""
        boot, _, number = (after or "").rpartition("-")
        start = int(number) if boot == self.boot and number.isdigit() else 0
        with self.lock:
            return [
                (f"{self.boot}-{n}", a.to_dict())
                for n, a in self.recent
                if n > start and (run is None or a.run == run)
            ]

    def read_history(self, read: Callable[[Store], T], wait: float = 10.0) -> T:
        """`read` on the history, opened read-only between two of the follower's batches (a
        process cannot read a DuckDB file it has open for writing). Raises StoreError: no
        history yet, or StoreLocked when the file stayed busy for `wait` seconds."""
        deadline = time.monotonic() + wait
        while True:
            with self.history.paused() as held:
                if held:
                    left = max(0.1, deadline - time.monotonic())
                    with Store.reader(self.db, wait=left, external_access=False) as store:
                        return read(store)
            if time.monotonic() > deadline:
                raise StoreLocked(f"{self.db}: the history stayed busy for {wait:g}s")
            time.sleep(0.02)


def _run_summary(state: RunState, firing: int) -> dict[str, Any]:
    steps = state.steps
    last = steps.last_done
    return {
        "run": state.run,
        "status": state.status or "running",
        "labels": dict(state.labels),
        "events": state.events,
        "started_ts": state.started_ts,
        "last_ts": state.clock,
        "step": last.number if last is not None else None,
        "total_steps": state.total_steps,
        "firing_count": firing,
        "dropped_events": state.processes.dropped(),  # by component, as emitters said
    }


def _run_of(line: bytes) -> str | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            obj = json.loads(line)  # NaN / Infinity tokens, which orjson refuses
        except ValueError:
            return None
    run = obj.get("run") if isinstance(obj, dict) else None
    return run if isinstance(run, str) else None

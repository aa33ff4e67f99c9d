"""`Service`: the rules, the history and the notifiers behind `runwatch serve`.

Input (HTTP requests, spool segments) comes in as batches of lines. A batch is validated,
the valid lines go to the event log (fsync) -- only then is it acknowledged -- and then to
the live driver (the Kafka worker's: skew correction, wall-clock ticks), the DuckDB batch
writer and the metrics. Alert transitions go to the alert log (fsync) before the notifiers
see them. On start, the event log is re-read to rebuild state; transitions the alert log
lacks are published, those it has are not repeated (`LiveDriver.finish_replay`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runwatch.service.wal import AlertLog, EventLog
from runwatch.store.writer import BatchWriter, HistoryHealth
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import admit, decode
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.live import LiveDriver, PublishedAlerts
from runwatch.stream.metrics.exporter import RunwatchMetrics
from runwatch.stream.metrics.roles import ServiceCounters, new_registry

log = logging.getLogger("runwatch.serve")

Notifier = Callable[[Alert], None]
CONSUMER, TOPIC = "serve", "wal"


@dataclass
class Ingested:
    accepted: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)


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
    ) -> None:
        self.lock = threading.RLock()
        self.driver = LiveDriver(config, topic=TOPIC)
        self.writer = BatchWriter(db, consumer=CONSUMER)
        self.db = db
        wal_dir.mkdir(parents=True, exist_ok=True)
        self.events = EventLog(wal_dir / "events.wal")
        self.alert_log = AlertLog(wal_dir / "alerts.jsonl")
        self.notifiers = list(notifiers)
        self.flush_interval = flush_interval
        self.registry = registry if registry is not None else new_registry()
        self.metrics = RunwatchMetrics(self.registry, lock=self.lock, clock=time.time)
        self.metrics.instrument(self.driver.engine, transitions=False)
        self.counters = ServiceCounters(self.registry)
        self.rejected, self.accepted = self.counters.rejected, self.counters.accepted
        self.recent: deque[Alert] = deque(maxlen=2000)
        self.last: dict[str, Alert] = {}  # alert key -> its latest transition
        self.ready = False
        self.history = HistoryHealth(db, log)
        self._writer_lock = threading.Lock()

    # -- start: rebuild from the logs ------------------------------------------------------

    def recover(self) -> int:
        """Rebuild state from the event log; publish only what the alert log lacks."""
        with self.lock:
            published = PublishedAlerts()
            old = self.alert_log.read()
            for a in old:
                published.add(a)
                self.writer.add_alert(a)  # DuckDB ignores transitions it holds
            stored = self.writer.positions().get((TOPIC, 0), 0)
            if stored > self.events.size:  # a compaction whose position never got stored
                stored = 0  # write the whole log again: the history keeps each id once
            driver = self.driver
            driver.start_replay()
            n = 0
            for line, arrival, end in self.events.read():
                n += 1
                try:
                    event = decode(line)
                except InvalidEvent:
                    continue  # a line that was valid when logged always is: not expected
                driver.feed_events([(event, line, arrival, end)])
                if end > stored:
                    self.writer.add_event(line, event)
            self.writer.advance(TOPIC, 0, self.events.size)
            for last in published.last.values():  # runs compacted away are not shown
                if last.run in driver.engine.runs:
                    self._remember(last)
            missing, _ = driver.finish_replay(published, time.time())
            self._publish(missing)
            self.ready = True
        self.flush()
        return n

    # -- input -----------------------------------------------------------------------------

    def ingest(self, lines: Sequence[bytes], source: str = "http") -> Ingested:
        """Validate, log durably, apply. Returns what was accepted and what was not (why)."""
        out = Ingested()
        good: list[tuple[bytes, Any]] = []
        received = time.time()
        check = self.driver.engine.check
        for i, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            try:
                event = admit(line, received)
                check(event)  # a run.started.config the rules refuse: refused now, not later
                good.append((line, event))
            except InvalidEvent as err:
                out.rejected.append((i, err.reason))
                self.rejected.labels("invalid_event").inc()
                with self._writer_lock:
                    self.writer.add_invalid(source, err.reason, line)
        self.metrics.record_invalid(len(out.rejected))
        if not good:
            return out
        with self.lock:
            arrival = time.time()
            ends = self.events.append(arrival, [g[0] for g in good])
            alerts, dead = self.driver.feed_events(
                [(event, line, arrival, end) for (line, event), end in zip(good, ends, strict=True)]
            )
            with self._writer_lock:
                for line, event in good:
                    self.writer.add_event(line, event)
                for d in dead:
                    self.writer.add_invalid(source, d.reason, d.raw)
                self.writer.advance(TOPIC, 0, self.events.size)
            self._publish(alerts)
        out.accepted = len(good)
        self.accepted.inc(len(good))
        return out

    def tick(self, now: float | None = None) -> None:
        with self.lock:
            self._publish(self.driver.tick(time.time() if now is None else now))

    # -- output ----------------------------------------------------------------------------

    def _remember(self, alert: Alert) -> None:
        self.last[alert.key] = alert
        self.recent.append(alert)

    def _publish(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        self.alert_log.append(alerts)
        self.metrics.record_transitions(alerts)
        with self._writer_lock:
            for a in alerts:
                self.writer.add_alert(a)
        for a in alerts:
            self._remember(a)
            for notify in self.notifiers:
                try:
                    notify(a)
                except Exception:  # a notifier's trouble must not stop the rules
                    log.exception("runwatch serve: notifier %r failed", notify)

    def flush(self) -> None:
        """Write the history; a failure is kept (and tried again at the next flush), said once
        per change of state, counted, and shown by /readyz -- never a traceback per try."""
        with self._writer_lock:
            try:
                self.writer.flush()
            except Exception as err:
                self.counters.history_failures.inc()
                self.history.failed(err)
                return
        self.history.written()

    def readiness(self) -> tuple[bool, str]:
        """/readyz: rebuilt from the logs, and the history being written."""
        if not self.ready:
            return False, "starting up: rebuilding state"
        problem = self.history.problem()
        return (False, problem) if problem is not None else (True, "ready")

    def compact(self, keep_finished_s: float = 3600.0) -> int:
        """Bound the event log (and so the restart): drop the events of runs that finished
        more than `keep_finished_s` ago -- they are in DuckDB -- from the log and from the
        rules' state. Returns the log's new size."""
        with self.lock:
            self.flush()  # everything in the log is in the history before the log shrinks
            now, runs = time.time(), self.driver.engine.runs
            gone = {
                run
                for run, tracked in runs.items()
                if tracked.state.finished_ts is not None
                and tracked.state.finished_ts < now - keep_finished_s
            }
            if not gone:
                return self.events.size
            size = self.events.rewrite(lambda line: _run_of(line) not in gone)
            for run in gone:
                del runs[run]
            self.last = {k: a for k, a in self.last.items() if a.run not in gone}
            with self._writer_lock:
                self.writer.advance(TOPIC, 0, size)
            self.flush()
            return size

    def flush_due(self) -> None:
        with self._writer_lock:
            due = self.writer.due(50_000, self.flush_interval)
        if due:
            self.flush()

    def close(self) -> None:
        self.flush()
        self.writer.close()
        self.events.close()
        self.alert_log.close()

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
            out["transitions"] = [a.to_dict() for a in self.recent if a.run == run]
            return out

    def alerts(self, state: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        if state == "firing":
            return self.firing()
        with self.lock:
            items = [a.to_dict() for a in self.recent if state is None or a.state == state]
        return items[-limit:]


def _run_summary(state: Any, firing: int) -> dict[str, Any]:
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

"""Prometheus metrics for live runs: a custom collector that reads run states at scrape time.

Why a collector and not gauges set per event: the per-event path stays as it is (one dict
increment for "events by kind"), and a scrape computes every per-run gauge from the
`RunState`s the engines already keep. A finished run drops out `finished_grace` seconds
after its `run.finished`; a run that went silent without finishing drops out after
`stale_after`. Labels are bounded: never one series per trajectory or request; phases,
servers, progress bars and components are capped per run (`Limits`), and the rest are
summed under `other`. README "Metrics" lists the series and their cardinality per run.

Use (the worker does this with `--metrics-port`; the embedded service the same):

    metrics = RunwatchMetrics(registry=CollectorRegistry())
    metrics.instrument(engine)            # counts events by kind and alert transitions
    server = metrics.serve(9464)          # /metrics from a daemon thread; server.close()

Scrapes from another thread than the one applying events: pass `lock=` (held around
`engine.apply` by the caller) or rely on the collector's snapshot-and-retry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.exporter_http import MetricsServer, start_metrics_server
from runwatch.stream.state import RunState

#: The step reward as `zero_reward` reads it by default (contract §4).
REWARD_KEYS = (
    "critic/score/mean",
    "critic/rewards/mean",
    "task_reward/avg",
    "reward/mean",
    "reward",
)
#: Event kinds counted under their own name; any other kind counts as `other` past this many.
MAX_KINDS = 64
OTHER = "other"


@dataclass(frozen=True)
class Limits:
    """Caps on label values per run; what exceeds a cap is summed under `other`."""

    phases: int = 16
    servers: int = 32
    progress: int = 16
    components: int = 16
    labels: int = 16
    step_phases: int = 16


EngineSource = Callable[[], Iterable[Engine]]


class RunwatchMetrics(Collector):
    """The collector. Register it once; add engines (or a callable returning them)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        finished_grace: float = 600.0,
        stale_after: float | None = 86_400.0,
        limits: Limits | None = None,
        lock: Any = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if finished_grace < 0:
            raise ValueError(f"finished_grace must be >= 0, not {finished_grace}")
        self.finished_grace = finished_grace
        self.stale_after = stale_after
        self.limits = limits or Limits()
        self.lock = lock
        self.clock = clock  # "now" for ages; default: each engine's own `now`
        self._engines: list[Engine] = []
        self._sources: list[EngineSource] = []
        self.kinds: dict[str, int] = {}
        self.invalid = 0
        self.transitions: dict[tuple[str, str, str], int] = {}
        self.lag: float | None = None
        #: step.done `timing` per (engine id, run): the state keeps no per-phase timing
        self.step_timing: dict[str, tuple[int, dict[str, float]]] = {}
        self.scrapes = 0
        self.registry = registry
        if registry is not None:
            registry.register(self)

    # -- wiring ----------------------------------------------------------------------------

    def add_engine(self, engine: Engine) -> None:
        if not any(e is engine for e in self._engines):
            self._engines.append(engine)

    def remove_engine(self, engine: Engine) -> None:
        self._engines = [e for e in self._engines if e is not engine]

    def add_source(self, source: EngineSource) -> None:
        """Engines that come and go (a worker's partitions): asked for at each scrape."""
        self._sources.append(source)

    def engines(self) -> list[Engine]:
        out = list(self._engines)
        for source in self._sources:
            out += [e for e in source() if not any(e is o for o in out)]
        return out

    def instrument(self, engine: Engine, *, transitions: bool = True, track: bool = True) -> Engine:
        """Count this engine's events by kind (and, unless the caller counts what it
        publishes itself, its alert transitions); also adds the engine.

        Wraps the instance's `apply` (and `_transition`): one call and one dict increment
        per event. Idempotent. `track=False`: the engine comes from a source instead."""
        if track:
            self.add_engine(engine)
        if getattr(engine, "_runwatch_metrics", None) is self:
            return engine
        engine._runwatch_metrics = self  # type: ignore[attr-defined]
        inner_apply = engine.apply
        kinds = self.kinds
        timing = self.step_timing
        record = self.record_transitions

        def apply(event: Any, now: float | None = None) -> list[Alert]:
            kind = event.kind
            n = kinds.get(kind)
            if n is not None:
                kinds[kind] = n + 1
            elif len(kinds) < MAX_KINDS:
                kinds[kind] = 1
            else:
                kinds[OTHER] = kinds.get(OTHER, 0) + 1
            if kind == "step.done":
                t = getattr(event, "timing", None)
                if t:
                    timing[event.run] = (event.step, dict(t))
            return inner_apply(event, now)

        engine.apply = apply  # type: ignore[method-assign]
        if transitions:
            # every transition, from an event or from a timer, is made by `_transition`
            inner_transition = engine._transition

            def transition(*args: Any) -> Alert:
                alert = inner_transition(*args)
                record((alert,))
                return alert

            engine._transition = transition  # type: ignore[method-assign,assignment]
        return engine

    # -- service counters (cheap, called by drivers) ---------------------------------------

    def record_transitions(self, alerts: Iterable[Alert]) -> None:
        t = self.transitions
        for a in alerts:
            key = (a.rule, a.state, a.severity)
            t[key] = t.get(key, 0) + 1

    def record_invalid(self, count: int = 1) -> None:
        self.invalid += count

    def record_lag(self, seconds: float) -> None:
        """Wall clock minus the arrival time of the latest event processed."""
        self.lag = seconds

    def serve(self, port: int, host: str = "0.0.0.0") -> MetricsServer:
        """Serve this collector's registry on http://host:port/metrics from a daemon thread."""
        if self.registry is None:
            raise ValueError("serve() needs the collector to be built with a registry")
        return start_metrics_server(self.registry, port, host)

    # -- the scrape ------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []  # no describe-time samples: registering must not scrape

    def collect(self) -> Iterator[Metric]:
        lock = self.lock
        if lock is not None:
            with lock:
                families = self._collect()
        else:
            families = self._collect_retrying()
        self.scrapes += 1
        yield from families

    def _collect_retrying(self) -> list[Metric]:
        # Another thread may mutate a dict mid-iteration; a scrape is cheap to redo.
        for _ in range(4):
            try:
                return self._collect()
            except RuntimeError:
                time.sleep(0.005)
        return self._collect()

    def _collect(self) -> list[Metric]:
        f = _Families()
        live = finished = 0
        for engine in self.engines():
            now = self.clock() if self.clock is not None else engine.now
            for run, tracked in list(engine.runs.items()):
                state = tracked.state
                if not self._visible(state, now):
                    continue
                if state.finished:
                    finished += 1
                else:
                    live += 1
                self._run(f, run, state, now)
                firing: dict[tuple[str, str], int] = {}
                for index, conds in list(tracked.firing.items()):
                    if not conds:
                        continue
                    rule = engine.rules[index]
                    sev: str = rule.severity_of(tracked.overrides.get(rule.rule_id, rule.params))
                    k = (rule.rule_id, sev)
                    firing[k] = firing.get(k, 0) + len(conds)
                for (rule_id, sev), n in firing.items():
                    f.alerts.add_metric([run, rule_id, sev], n)
                f.alerts_total.add_metric([run], sum(firing.values()))
        f.runs.add_metric(["live"], live)
        f.runs.add_metric(["finished"], finished)
        for kind, n in sorted(self.kinds.items()):
            f.events.add_metric([kind], n)
        f.invalid.add_metric([], self.invalid)
        for (rule_id, st, sev), n in sorted(self.transitions.items()):
            f.transitions.add_metric([rule_id, st, sev], n)
        if self.lag is not None:
            f.lag.add_metric([], self.lag)
        return f.all()

    def _visible(self, state: RunState, now: float) -> bool:
        if state.finished:
            end = state.finished_ts if state.finished_ts is not None else state.clock
            return now - end <= self.finished_grace
        return self.stale_after is None or now - state.clock <= self.stale_after

    def _run(self, f: _Families, run: str, state: RunState, now: float) -> None:
        lim = self.limits
        status = state.status or "running"
        f.info.add_metric([run, status], 1)
        for name, value in _capped(sorted(state.labels.items()), lim.labels):
            f.label.add_metric([run, name, value], 1)
        f.last_event.add_metric([run], max(0.0, now - state.clock))
        if state.started_ts is not None:
            f.started.add_metric([run], state.started_ts)
        self._trajectories(f, run, state, now)
        self._inference(f, run, state, now)
        self._progress(f, run, state, now)
        self._steps(f, run, state)
        self._heartbeats(f, run, state, now)
        ranks = state.ranks
        if ranks.by_rank:
            for phase, members in _bucket(
                ((r.phase, 1) for r in list(ranks.by_rank.values())), lim.phases
            ):
                f.ranks.add_metric([run, phase], members)
            last = ranks.last_change()
            if last is not None:
                f.ranks_change.add_metric([run], max(0.0, now - last))

    def _trajectories(self, f: _Families, run: str, state: RunState, now: float) -> None:
        inf = state.inference
        by_phase: dict[str, int] = {}
        oldest: float | None = None
        oldest_phase_since = 0.0
        for t in list(inf.pending.values()):
            by_phase[t.phase] = by_phase.get(t.phase, 0) + 1
            if oldest is None or t.started < oldest:
                oldest, oldest_phase_since = t.started, t.phase_since
        # "generate" always present, so a run with nothing pending shows 0, not no data
        by_phase.setdefault("generate", 0)
        for phase, n in _bucket(by_phase.items(), self.limits.phases):
            f.pending.add_metric([run, phase], n)
        f.oldest.add_metric([run], max(0.0, now - oldest) if oldest is not None else 0.0)
        f.oldest_phase.add_metric(
            [run], max(0.0, now - oldest_phase_since) if oldest is not None else 0.0
        )

    def _inference(self, f: _Families, run: str, state: RunState, now: float) -> None:
        inf = state.inference
        servers = list(inf.servers.items())
        if not servers:
            return
        shown = servers[: self.limits.servers]
        for name, srv in shown:
            if srv.stats_ts is not None:
                running, waiting = srv.running, srv.waiting
            else:
                running, waiting = len(srv.in_flight), 0
            f.running.add_metric([run, name], running)
            f.waiting.add_metric([run, name], waiting)
            if srv.kv_cache_usage is not None:
                f.kv.add_metric([run, name], srv.kv_cache_usage)
            f.server_idle.add_metric([run, name], 1 if (srv.idle and not srv.final) else 0)
        rest = servers[self.limits.servers :]
        if rest:
            f.running.add_metric([run, OTHER], sum(s.running for _, s in rest))
            f.waiting.add_metric([run, OTHER], sum(s.waiting for _, s in rest))
        since = inf.idle_since
        f.idle_pending.add_metric([run], 1 if since is not None else 0)
        f.idle_pending_s.add_metric([run], max(0.0, now - since) if since is not None else 0.0)

    def _progress(self, f: _Families, run: str, state: RunState, now: float) -> None:
        counters = list(state.progress.by_key.items())[: self.limits.progress]
        for (component, name), c in counters:
            labels = [run, component, name]
            f.progress_n.add_metric(labels, c.n)
            if c.total is not None:
                f.progress_total.add_metric(labels, c.total)
            f.progress_stall.add_metric(labels, max(0.0, now - c.last_advance))

    def _steps(self, f: _Families, run: str, state: RunState) -> None:
        steps = state.steps
        if steps.latest is not None:
            f.step.add_metric([run], steps.latest)
        if state.total_steps is not None:
            f.step_total.add_metric([run], state.total_steps)
        done = steps.last_done
        if done is not None:
            f.step_done.add_metric([run], done.number)
            if done.duration is not None:
                f.step_duration.add_metric([run], done.duration)
            f.step_gap.add_metric([run], done.gap)
        for step in reversed(list(steps.by_number.values())):
            reward = step.reward(REWARD_KEYS)
            if reward is not None:
                f.reward.add_metric([run], reward)
                f.reward_step.add_metric([run], step.number)
                break
        timing = self.step_timing.get(run)
        if timing is not None:
            for phase, seconds in _capped(sorted(timing[1].items()), self.limits.step_phases):
                f.step_phase.add_metric([run, phase], seconds)

    def _heartbeats(self, f: _Families, run: str, state: RunState, now: float) -> None:
        # per component: the stalest live process (the one heartbeat_lost would name)
        ages: dict[str, float] = {}
        counts: dict[tuple[str, str], int] = {}
        timeout = state.config.heartbeat_timeout
        for proc in list(state.processes.by_id.values()):
            if proc.last_beat is None:
                continue
            comp = proc.component
            if proc.final:
                what = "exited"
            else:
                age = max(0.0, now - proc.last_beat)
                if comp not in ages or age > ages[comp]:
                    ages[comp] = age
                what = "alive" if age < timeout else "lost"
            counts[(comp, what)] = counts.get((comp, what), 0) + 1
        for comp, age in _capped(sorted(ages.items()), self.limits.components):
            f.heartbeat.add_metric([run, comp], age)
        for (comp, what), n in sorted(counts.items())[: 3 * self.limits.components]:
            f.processes.add_metric([run, comp, what], n)


def _capped(items: Iterable[tuple[str, Any]], cap: int) -> list[tuple[str, Any]]:
    return list(items)[:cap]


def _bucket(items: Iterable[tuple[str, int]], cap: int) -> list[tuple[str, int]]:
    """Counts by name, the largest `cap - 1` kept by name when over the cap, the rest summed."""
    counts: dict[str, int] = {}
    for name, n in items:
        counts[name] = counts.get(name, 0) + n
    if len(counts) <= cap:
        return sorted(counts.items())
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    kept = ranked[: cap - 1]
    return sorted([*kept, (OTHER, sum(n for _, n in ranked[cap - 1 :]))])


class _Families:
    """Every family one scrape yields (built fresh per scrape: no state between scrapes)."""

    def __init__(self) -> None:
        g = GaugeMetricFamily
        r = ["run"]
        self.info = g(
            "runwatch_run_info",
            "1 per visible run; status: running/ok/failed/killed",
            labels=[*r, "status"],
        )
        self.label = g(
            "runwatch_run_label",
            "run.started labels, one series each",
            labels=[*r, "name", "value"],
        )
        self.last_event = g(
            "runwatch_run_last_event_age_seconds", "seconds since the run's latest event", labels=r
        )
        self.started = g("runwatch_run_started_timestamp_seconds", "run.started time", labels=r)
        self.pending = g(
            "runwatch_trajectories_pending",
            "trajectories started and not finished, by current phase",
            labels=[*r, "phase"],
        )
        self.oldest = g(
            "runwatch_trajectory_oldest_pending_age_seconds",
            "age of the oldest pending trajectory (0: none)",
            labels=r,
        )
        self.oldest_phase = g(
            "runwatch_trajectory_oldest_pending_phase_seconds",
            "time the oldest pending trajectory has spent in its phase",
            labels=r,
        )
        self.running = g(
            "runwatch_inference_running",
            "requests running per inference server",
            labels=[*r, "server"],
        )
        self.waiting = g(
            "runwatch_inference_waiting",
            "requests waiting per inference server",
            labels=[*r, "server"],
        )
        self.kv = g(
            "runwatch_inference_kv_cache_usage",
            "KV-cache usage 0..1 per server",
            labels=[*r, "server"],
        )
        self.server_idle = g(
            "runwatch_inference_server_idle",
            "1 when the server is live and idle (nothing running or waiting)",
            labels=[*r, "server"],
        )
        self.idle_pending = g(
            "runwatch_inference_idle_with_pending",
            "1 while every server is idle and trajectories wait",
            labels=r,
        )
        self.idle_pending_s = g(
            "runwatch_inference_idle_with_pending_seconds",
            "how long every server has been idle while work waits",
            labels=r,
        )
        pl = [*r, "component", "name"]
        self.progress_n = g("runwatch_progress_n", "progress counter value", labels=pl)
        self.progress_total = g("runwatch_progress_total", "progress counter total", labels=pl)
        self.progress_stall = g(
            "runwatch_progress_stall_seconds", "seconds since the counter last advanced", labels=pl
        )
        self.step = g("runwatch_step", "highest training step seen", labels=r)
        self.step_total = g("runwatch_step_total", "run.started total_steps", labels=r)
        self.step_done = g("runwatch_step_last_done", "the last finished step", labels=r)
        self.step_duration = g(
            "runwatch_step_duration_seconds", "duration of the last finished step", labels=r
        )
        self.step_gap = g(
            "runwatch_step_idle_gap_seconds",
            "GPU-idle gap of the last finished step (idle while work waited)",
            labels=r,
        )
        self.step_phase = g(
            "runwatch_step_phase_seconds",
            "the last step.done's timing by phase",
            labels=[*r, "phase"],
        )
        self.reward = g("runwatch_step_reward", "reward of the latest step that has one", labels=r)
        self.reward_step = g(
            "runwatch_step_reward_step", "the step runwatch_step_reward is of", labels=r
        )
        self.heartbeat = g(
            "runwatch_heartbeat_age_seconds",
            "seconds since the last heartbeat of the component's stalest live process",
            labels=[*r, "component"],
        )
        self.processes = g(
            "runwatch_processes",
            "processes by component and alive/lost/exited",
            labels=[*r, "component", "state"],
        )
        self.ranks = g("runwatch_ranks", "trainer ranks by current phase", labels=[*r, "phase"])
        self.ranks_change = g(
            "runwatch_ranks_since_change_seconds", "seconds since any rank changed phase", labels=r
        )
        self.alerts = g(
            "runwatch_alerts_firing",
            "firing alerts by rule and severity",
            labels=[*r, "rule", "severity"],
        )
        self.alerts_total = g(
            "runwatch_alerts_firing_total_per_run", "firing alerts of the run, all rules", labels=r
        )
        self.runs = g(
            "runwatch_runs", "runs exported, live or finished (within the grace)", labels=["state"]
        )
        self.events = CounterMetricFamily(
            "runwatch_events", "events applied, by kind", labels=["kind"]
        )
        self.invalid = CounterMetricFamily(
            "runwatch_events_invalid", "invalid events (dead-lettered)"
        )
        self.transitions = CounterMetricFamily(
            "runwatch_alert_transitions",
            "alert transitions by rule, state, severity",
            labels=["rule", "state", "severity"],
        )
        self.lag = g(
            "runwatch_processing_lag_seconds",
            "wall clock minus arrival time of the latest event processed",
        )

    def all(self) -> list[Metric]:
        return [v for v in vars(self).values() if isinstance(v, Metric)]


def engines_of(drivers: Callable[[], Iterable[Any]]) -> EngineSource:
    """An engine source over live drivers (anything with `.engine`)."""
    return lambda: [d.engine for d in drivers()]


__all__ = [
    "Limits",
    "MetricsServer",
    "RunwatchMetrics",
    "engines_of",
    "start_metrics_server",
]

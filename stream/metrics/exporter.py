"""Prometheus metrics for live runs: a custom collector that reads run states at scrape time.

Why a collector and not gauges set per event: the per-event path stays as it is (one dict
increment for "events by kind"), and a scrape computes every per-run gauge from the
`RunState`s the engines already keep. A finished run drops out `finished_grace` seconds
after its `run.finished`; a run that went silent without finishing drops out after
`stale_after`. Labels are bounded: never one series per trajectory or request; phases,
servers, progress bars and components are capped per run (`Limits`), and the rest are
summed under `other`. In a large fleet (more runs than `Limits.detailed_runs`) a run with
no alert firing shows 6 brief series. docs/metrics.md lists the series and the budget.

Use (the worker does this with `--metrics-port`; the embedded service the same):

    metrics = RunwatchMetrics(registry=CollectorRegistry())
    metrics.instrument(engine)            # counts events by kind and alert transitions
    server = metrics.serve(9464)          # /metrics from a daemon thread; server.close()

Scrapes from another thread than the one applying events: pass `lock=` (held around
`engine.apply` by the caller) or rely on the collector's snapshot-and-retry.

One job, a little over 400 lines: the run gauges, one method per family of series; the text
writer is `families.py`, the servers `http.py`.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine, KindCounts
from runwatch.stream.fleet.causes import subject
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.metrics.families import Families, render
from runwatch.stream.metrics.http import MetricsServer, start_metrics_server
from runwatch.stream.state.run import RunState

#: Event kinds counted under their own name; any other kind counts as `other` past this many.
MAX_KINDS = 64
OTHER = "other"
#: The families a scrape fills without visiting any run (with their counters' sample names):
#: asked for alone (`exposition(names)`), they cost nothing per run.
_SERVICE_WIDE = frozenset({
    "runwatch_events", "runwatch_events_total", "runwatch_events_invalid",
    "runwatch_events_invalid_total", "runwatch_alert_transitions",
    "runwatch_alert_transitions_total", "runwatch_processing_lag_seconds",
    "runwatch_fleet_incident_runs",
})  # fmt: skip


@dataclass(frozen=True)
class Limits:
    """Caps on label values per run; what exceeds a cap is summed under `other`."""

    phases: int = 16
    servers: int = 32
    progress: int = 16
    components: int = 16
    labels: int = 16
    step_phases: int = 16
    #: the fleet's budget: while more runs than this are tracked, a run with no firing
    #: alert and no open incident shows only its brief series (`_brief`: 6), the others
    #: every family -- 10,000 jobs stay near 60,000 series, not 400,000
    detailed_runs: int = 500


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
        self._instrumented: weakref.WeakSet[Engine] = weakref.WeakSet()
        self._sources: list[EngineSource] = []
        #: what holds the fleet incidents (serve's driver: its `fleet`, None when off)
        self._fleets: list[Callable[[], FleetStage | None]] = []
        self.kinds = KindCounts(MAX_KINDS, OTHER)  # events applied by kind (the engines count)
        self.invalid = 0
        self.transitions: dict[tuple[str, str, str], int] = {}
        self.lag: float | None = None
        #: step.done `timing` per (engine id, run): the state keeps no per-phase timing
        self.step_timing: dict[str, tuple[int, dict[str, float]]] = {}
        self.scrapes = 0
        self._local = threading.local()
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

    def add_fleet(self, source: Callable[[], FleetStage | None]) -> None:
        """The fleet stage whose open incidents to export (asked for at each scrape)."""
        self._fleets.append(source)

    def engines(self) -> list[Engine]:
        out = list(self._engines)
        for source in self._sources:
            out += [e for e in source() if not any(e is o for o in out)]
        return out

    def instrument(self, engine: Engine, *, transitions: bool = True, track: bool = True) -> Engine:
        """Count this engine's events by kind (and, unless the caller counts what it
        publishes itself, its alert transitions); also adds the engine.

        Observes the engine (`Engine.observe`): one call and one dict increment per event.
        Idempotent. `track=False`: the engine comes from a source instead."""
        if track:
            self.add_engine(engine)
        if engine in self._instrumented:
            return engine
        self._instrumented.add(engine)
        engine.count_into(self.kinds)
        engine.observe(
            events=self._step_done,
            kinds=("step.done",),
            transitions=(lambda alert: self.record_transitions((alert,))) if transitions else None,
        )
        return engine

    def _step_done(self, event: Any) -> None:
        t = getattr(event, "timing", None)
        if t:
            self.step_timing[event.run] = (event.step, dict(t))

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
        return start_metrics_server(self.exposition, port, host)

    # -- the scrape ------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []  # no describe-time samples: registering must not scrape

    def collect(self) -> Iterator[Metric]:
        if getattr(self._local, "rendering", False):
            return  # `exposition()` writes these itself, faster
        yield from (f.metric() for f in self._families())

    def exposition(self, names: Collection[str] | None = None) -> bytes:
        """The registry's /metrics body: other collectors through prometheus-client, this
        one's families written directly (several times faster at 1,000 runs). `names`: only
        the families of those names (a scrape's `name[]`, `http.Select`); a look at the
        service-wide ones (the lag, the counters) visits no run."""
        was_enabled = gc.isenabled()
        gc.disable()  # see _families
        try:
            families = self._families(names is None or not _SERVICE_WIDE.issuperset(names))
            if names is not None:
                families = [f for f in families if f.name in names or f"{f.name}_total" in names]
            mine = render(families)
        finally:
            if was_enabled:
                gc.enable()
        if self.registry is None:
            return mine
        self._local.rendering = True
        try:
            registry = self.registry if names is None else self.registry.restricted_registry(names)
            others = generate_latest(registry)
        finally:
            self._local.rendering = False
        return others + mine

    def _families(self, runs: bool = True) -> list[Any]:
        # A scrape allocates ~50 small objects per run and frees none of them until it
        # ends: with the cyclic GC on, those allocations trigger full collections over
        # every run state (most of a scrape's time at 1,000 runs). Nothing here makes cycles.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            if self.lock is not None:
                families = self._collect(self.lock, runs)
            else:
                families = self._collect_retrying(runs)
        finally:
            if was_enabled:
                gc.enable()
        self.scrapes += 1
        return families

    def _collect_retrying(self, runs: bool) -> list[Any]:
        # Another thread may mutate a dict mid-iteration (RuntimeError) or between two reads
        # of one state (an incident's root gone from its members: a LookupError); a scrape
        # is cheap to redo.
        for _ in range(4):
            try:
                return self._collect(nullcontext(), runs)
            except (RuntimeError, LookupError):
                time.sleep(0.005)
        return self._collect(nullcontext(), runs)

    def _collect(self, lock: Any, runs_too: bool = True) -> list[Any]:
        """With the caller's lock taken per run, not for the whole scrape: events go on
        between runs, so a scrape of many runs never holds the path that applies them.
        `runs_too` False: the service-wide families only (`_SERVICE_WIDE`)."""
        f = Families()
        live = finished = 0
        shown: set[str] = set()
        engines = list(self.engines()) if runs_too else []
        with lock:
            brief = sum(len(e.runs) for e in engines) > self.limits.detailed_runs
        for engine in engines:
            with lock:
                runs = list(engine.runs.items())
            for run, tracked in runs:
                with lock:
                    now = self.clock() if self.clock is not None else engine.now
                    state = tracked.state
                    if not self._visible(state, now):
                        continue
                    if state.finished:
                        finished += 1
                    else:
                        live += 1
                    shown.add(run)
                    firing: dict[tuple[str, str], int] = {}
                    for index, conds in list(tracked.firing.items()):
                        if not conds:
                            continue
                        rule = engine.rules[index]
                        params = tracked.overrides.get(rule.rule_id, rule.params)
                        sev: str = rule.severity_of(params)
                        k = (rule.rule_id, sev)
                        firing[k] = firing.get(k, 0) + len(conds)
                    roots: dict[str, int] = {}
                    for incident in tracked.incidents.open:
                        root = incident.members[incident.root].rule
                        roots[root] = roots.get(root, 0) + 1
                    if brief and not firing and not roots:
                        self._brief(f, run, state, now)
                    else:
                        self._run(f, run, state, now)
                for (rule_id, sev), n in firing.items():
                    f.alerts.add([run, rule_id, sev], n)
                for root, n in roots.items():
                    f.incidents.add([run, root], n)
                f.alerts_total.add([run], sum(firing.values()))
        with lock:
            f.runs.add(["live"], live)
            f.runs.add(["finished"], finished)
            for kind, n in sorted(self.kinds.items()):
                f.events.add([kind], n)
            f.invalid.add([], self.invalid)
            for (rule_id, st, sev), n in sorted(self.transitions.items()):
                f.transitions.add([rule_id, st, sev], n)
            if self.lag is not None:
                f.lag.add([], self.lag)
            for source in self._fleets:
                stage = source()
                for fleet in list(stage.state.fleets.values()) if stage is not None else ():
                    kind, _ = fleet.thing
                    f.fleet.add([subject(fleet.thing), kind], len(set(fleet.members.values())))
            if runs_too:
                for run in [r for r in self.step_timing if r not in shown]:
                    self.step_timing.pop(run, None)  # gone from every engine, or its grace
        return f.all()

    def _visible(self, state: RunState, now: float) -> bool:
        if state.finished:
            end = state.finished_ts if state.finished_ts is not None else state.clock
            return now - end <= self.finished_grace
        return self.stale_after is None or now - state.clock <= self.stale_after

    def _brief(self, f: Families, run: str, state: RunState, now: float) -> None:
        """A quiet run in a large fleet: whether it lives, how far it got, what waits and
        for how long inference has been idle under it (with the alerts total, 6 series)."""
        f.info.add([run, state.status or "running"], 1)
        f.last_event.add([run], max(0.0, now - state.clock))
        if state.steps.latest is not None:
            f.step.add([run], state.steps.latest)
        inf = state.inference
        f.pending.add([run, OTHER], len(inf.pending))
        since = inf.idle_since
        f.idle_pending_s.add([run], max(0.0, now - since) if since is not None else 0.0)

    def _run(self, f: Families, run: str, state: RunState, now: float) -> None:
        lim = self.limits
        status = state.status or "running"
        f.info.add([run, status], 1)
        for name, value in _capped(sorted(state.labels.items()), lim.labels):
            f.label.add([run, name, value], 1)
        f.last_event.add([run], max(0.0, now - state.clock))
        if state.started_ts is not None:
            f.started.add([run], state.started_ts)
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
                f.ranks.add([run, phase], members)
            last = ranks.last_change()
            if last is not None:
                f.ranks_change.add([run], max(0.0, now - last))

    def _trajectories(self, f: Families, run: str, state: RunState, now: float) -> None:
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
            f.pending.add([run, phase], n)
        f.oldest.add([run], max(0.0, now - oldest) if oldest is not None else 0.0)
        f.oldest_phase.add([run], max(0.0, now - oldest_phase_since) if oldest is not None else 0.0)

    def _inference(self, f: Families, run: str, state: RunState, now: float) -> None:
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
            f.running.add([run, name], running)
            f.waiting.add([run, name], waiting)
            if srv.kv_cache_usage is not None:
                f.kv.add([run, name], srv.kv_cache_usage)
            f.server_idle.add([run, name], 1 if (srv.idle and not srv.final) else 0)
        rest = servers[self.limits.servers :]
        if rest:
            f.running.add([run, OTHER], sum(s.running for _, s in rest))
            f.waiting.add([run, OTHER], sum(s.waiting for _, s in rest))
        since = inf.idle_since
        f.idle_pending.add([run], 1 if since is not None else 0)
        f.idle_pending_s.add([run], max(0.0, now - since) if since is not None else 0.0)

    def _progress(self, f: Families, run: str, state: RunState, now: float) -> None:
        counters = list(state.progress.by_key.items())[: self.limits.progress]
        for (component, name), c in counters:
            labels = [run, component, name]
            f.progress_n.add(labels, c.n)
            if c.total is not None:
                f.progress_total.add(labels, c.total)
            f.progress_stall.add(labels, max(0.0, now - c.last_advance))

    def _steps(self, f: Families, run: str, state: RunState) -> None:
        steps = state.steps
        if steps.latest is not None:
            f.step.add([run], steps.latest)
        if state.total_steps is not None:
            f.step_total.add([run], state.total_steps)
        done = steps.last_done
        if done is not None:
            f.step_done.add([run], done.number)
            if done.duration is not None:
                f.step_duration.add([run], done.duration)
            f.step_gap.add([run], done.gap)
        for step in reversed(list(steps.by_number.values())):
            reward = step.reward(DEFAULT_REWARD_KEYS)
            if reward is not None:
                f.reward.add([run], reward)
                f.reward_step.add([run], step.number)
                break
        timing = self.step_timing.get(run)
        if timing is not None:
            for phase, seconds in _capped(sorted(timing[1].items()), self.limits.step_phases):
                f.step_phase.add([run, phase], seconds)

    def _heartbeats(self, f: Families, run: str, state: RunState, now: float) -> None:
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
            f.heartbeat.add([run, comp], age)
        for (comp, what), n in sorted(counts.items())[: 3 * self.limits.components]:
            f.processes.add([run, comp, what], n)
        for comp, n in _capped(sorted(state.processes.dropped().items()), self.limits.components):
            f.dropped.add([run, comp], n)


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

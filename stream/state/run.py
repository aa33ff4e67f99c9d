"""`RunState`: everything runwatch knows about one run, folded from its events.

Pure on purpose: `apply(event)` reads no clock and does no I/O, so the same state drives the
live worker, the embedded service, `runwatch replay` and backtests identically. Time inside
the state is event time: `clock` is the largest `ts` applied, so late events never move
intervals backwards.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import msgspec

from runwatch.stream.state.compact import EMPTY, Compact
from runwatch.stream.state.failures import NO_COLLECTIVES, NO_FAILURES, Collectives, Failures
from runwatch.stream.state.holds import NO_HOLDS, Holds
from runwatch.stream.state.inference import Inference
from runwatch.stream.state.processes import Process, Processes, shared
from runwatch.stream.state.progress import NO_PROGRESS, ProgressCounters
from runwatch.stream.state.ranks import NO_RANKS, Ranks
from runwatch.stream.state.restarts import Restarts, Slot
from runwatch.stream.state.stacks import NO_STACKS, Stacks
from runwatch.stream.state.steps import Steps
from runwatch.stream.state.weights import NO_WEIGHTS, Weights

if TYPE_CHECKING:  # (the models are not imported where events are applied)
    from runwatch.emitters import events as ev


class StateConfig(msgspec.Struct, frozen=True):
    """What the rules configured for a run need the state to keep. (A record defined
    without generating code at import, as a dataclass would: `runwatch replay`'s start.)"""

    watched_metrics: frozenset[str] = frozenset()
    progress_window: int = 20
    keep_steps: int = 16
    #: the latest steps whose watched metrics (and when they came) are kept, the older of
    #: them past `keep_steps` with nothing else (`PastStep`): a spike rule's long baseline
    metric_steps: int = 0
    #: the latest steps whose `step.done.timing` is kept (step_slowdown's; none without it):
    #: the per-phase seconds are most of a step's size, and only that rule reads them
    timing_steps: int = 0
    #: silence after which a process counts as lost (heartbeat_lost's `timeout`)
    heartbeat_timeout: float = 60.0
    #: (component, kind) pairs whose last arrival an `absent` rule watches
    watched_arrivals: frozenset[tuple[str, str]] = frozenset()
    #: metric keys whose first `early_steps` values are kept for good (a run's own
    #: early-training level, which entropy_collapse compares against)
    early_metrics: frozenset[str] = frozenset()
    early_steps: int = 0
    #: progress bar names that stand for pending trajectories (inference_idle_with_pending)
    pending_bars: frozenset[str] = frozenset()


#: services a run's state remembers having waited on (`RunState.deps`)
MAX_DEPS = 64
INF = float("inf")


class RunState(Compact):
    """One run's state: processes, servers and trajectories, steps, progress, ranks."""

    __slots__ = ("begun", "clock", "collectives", "config", "deps", "events", "failures",
                 "finished_ts", "first_ts", "holds", "inference", "labels", "last_arrival",
                 "ledger", "postponed", "processes", "progress", "progress_at", "ranks",
                 "restarts", "run", "stacks", "started_ts", "status", "steps", "total_steps",
                 "weights")  # fmt: skip
    #: the heartbeat ledger is a cache of what `processes` and `restarts` hold, found by a
    #: process's beat: a checkpoint leaves it out, and each process's first beat after a
    #: takeover finds its entry again (the long way, `_heartbeat_in_full`, which makes
    #: of a routine beat what the short way makes)
    _unsaved = ("ledger",)

    def __init__(self, run: str, config: StateConfig | None = None) -> None:
        cfg = config or StateConfig()
        self.run = run
        self.config = cfg
        self.first_ts: float | None = None
        self.clock = float("-inf")  # largest event ts applied
        self.started_ts: float | None = None
        self.finished_ts: float | None = None
        self.status: str | None = None  # from run.finished
        self.labels: dict[str, str] = {}
        #: the services its work waited on (`dep`, contract section 8) and when it last did:
        #: which runs use a service, when many stall on one (`runwatch.stream.fleet`)
        self.deps: dict[str, float] = EMPTY
        self.total_steps: int | None = None
        self.events = 0
        self.processes = Processes()
        self.inference = Inference()
        self.steps = Steps(cfg.keep_steps, cfg.watched_metrics, cfg.timing_steps,
                           cfg.metric_steps)  # fmt: skip
        self.steps.keep_early(cfg.early_metrics, cfg.early_steps)
        #: the parts most runs never write hold the shared blank of their kind until the
        #: run writes its own (`compact.blank`: each empty one cost a run 100-250 bytes)
        self.progress: ProgressCounters = NO_PROGRESS
        self.ranks: Ranks = NO_RANKS
        self.weights: Weights = NO_WEIGHTS
        self.restarts = Restarts()
        #: the heartbeat ledger: (component, host, pid, instance, rank) of a beating process
        #: -> its process, its restart slot (None without a pid) and the slot's [first, last]
        #: beat of its pid (`Slot.pids`), found once: a routine beat looks up nothing more
        self.ledger: dict[tuple[str, str | None, int | None, str | None, int | None],
                          tuple[Process, Slot | None, list[float] | None]] = {}  # fmt: skip
        self.failures: Failures = NO_FAILURES
        self.collectives: Collectives = NO_COLLECTIVES
        #: the processes' stacks, asked for when a hang opens (`own_stacks`)
        self.stacks: Stacks = NO_STACKS
        #: the services its processes hold their work to (the fleet pause, opted in)
        self.holds: Holds = NO_HOLDS
        #: the latest `step.done`: progress that lets go of failures seen before it
        self.progress_at: float | None = None
        self.last_arrival: dict[tuple[str, str], float] = EMPTY
        #: after a routine heartbeat (a live process beating again, nothing else new): when
        #: that process would have counted as lost without it; None after any other event.
        #: Rules that only learn from such a beat that a deadline moved later skip it
        #: (`Rule.skips_routine_beats`). Infinite after a beat the engine looks closer at
        #: (`begun`): a process's first beat, that only makes it one that can be lost (no
        #: restart, no drop, not `final`), or a `final` beat with no new drop
        self.postponed: float | None = None
        #: (read only while `postponed` is infinite) after a first beat, when its process
        #: would count as lost: a rule that skips routine beats is skipped where its next
        #: check comes no later; None after a `final` beat (`Rule.skips_final_beats`)
        self.begun: float | None = None

    @property
    def finished(self) -> bool:
        return self.status is not None

    def reconfigure(self, config: StateConfig) -> None:
        """Per-run rule parameters (from run.started.config) change what must be kept."""
        self.config = config
        self.steps.keep = config.keep_steps
        self.steps.depth = max(config.keep_steps, config.metric_steps)
        self.steps.timing_steps = config.timing_steps
        self.steps.settled += 1  # what step rules read may differ now
        self.steps.watched = config.watched_metrics
        self.steps.keep_early(config.early_metrics, config.early_steps)
        if self.progress is not NO_PROGRESS:
            self.progress.window = config.progress_window

    # -- folding events --------------------------------------------------------------------

    def apply(self, event: ev.Event) -> None:
        """Fold one validated event into the state (the caller has removed duplicates).

        (The handlers below take their kind's type by annotation, not `typing.cast`: a
        call per event.)"""
        ts = event.ts
        if ts > self.clock:  # (the first ts is at most the clock: nothing more to do)
            self.clock = ts
            if self.first_ts is None:
                self.first_ts = ts
        elif self.first_ts is None or ts < self.first_ts:
            self.first_ts = ts
        self.events += 1
        self.postponed = None
        kind = event.kind
        watched = self.config.watched_arrivals
        if watched:
            key = (event.src.component, kind)
            if key in watched and ts > self.last_arrival.get(key, -1e300):
                if self.last_arrival is EMPTY:
                    self.last_arrival = {}
                self.last_arrival[key] = ts
        if kind == "heartbeat":  # (half of all events: no look-up)
            self._heartbeat(event)
            return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event)

    def _idle_changed(self) -> None:
        span = self.inference.update_idle(self.clock)
        if span is not None:
            self.steps.idle_span(*span)

    def _run_started(self, event: ev.Event) -> None:
        e: ev.RunStarted = event  # type: ignore[assignment]
        if self.started_ts is None or e.ts < self.started_ts:
            self.started_ts = e.ts
        if e.labels:
            self.labels.update(e.labels)
        if e.total_steps is not None:
            self.total_steps = e.total_steps

    def _run_finished(self, event: ev.Event) -> None:
        e: ev.RunFinished = event  # type: ignore[assignment]
        self.status = e.status
        self.finished_ts = e.ts
        # the run is over: nothing it started is still waiting on anything
        self.inference.clear_pending()
        self._idle_changed()
        if self.holds:
            self.holds.ended(e.ts)

    def _heartbeat(self, event: ev.Event) -> None:
        """A beat of a known process that changes nothing but its latest beat -- not its
        first, not `final`, not after a `final`, not late, no new dropped count, its pid
        the newest of its slot (a routine beat, most of them) -- takes the short way;
        the others `_heartbeat_in_full`, which `EveryBeatInFull` takes for all."""
        e: ev.Heartbeat = event  # type: ignore[assignment]
        src, ts = e.src, e.ts
        known = self.ledger.get((src.component, src.host, src.pid, src.instance, src.rank))
        if known is None or e.final:
            return self._heartbeat_in_full(e)
        proc, slot, seen = known
        last = proc.last_beat
        if last is None or ts < last or proc.final:
            return self._heartbeat_in_full(e)
        dropped = e.dropped_events
        if dropped is not None and dropped != proc.dropped:
            return self._heartbeat_in_full(e)
        if slot is not None:  # (`Slot.beat`'s routine case; a pid let go is first at +inf)
            if seen is None or src.pid != slot.newest or ts < seen[0]:
                return self._heartbeat_in_full(e)
            if ts > seen[1]:
                seen[1] = ts
        proc.last_beat = ts
        was = last + self.config.heartbeat_timeout
        if ts < was:
            self.postponed = was
        # its `final` stays false: only a server out of the picture can change (back in)
        if self.inference.finals and self.inference.process_final(proc):
            self._idle_changed()
        return None

    def _heartbeat_in_full(self, e: ev.Heartbeat) -> None:
        final, src, ts = bool(e.final), e.src, e.ts
        key = (src.component, src.host, src.pid, src.instance, src.rank)
        known = self.ledger.get(key)
        if known is None:  # kept: its names as the one string of each value (`shared`)
            key = (shared(src.component), shared(src.host), src.pid, shared(src.instance),
                   src.rank)  # fmt: skip
            proc, slot = self.processes.named(src), self.restarts.slot(src)
        else:
            proc, slot, _ = known
        last = proc.last_beat
        timeout = self.config.heartbeat_timeout
        was = None if last is None or proc.final else last + timeout
        # heard for the first time, in a slot of its own: it can restart nothing
        first = last is None and (slot is None or not slot.pids)
        dropped = proc.dropped
        proc.beat(ts, final, e.dropped_events)
        if proc.dropped_at is not None:
            self.processes.dropping = True
        restarted = slot is not None and slot.beat(src.pid, ts, final)  # type: ignore[arg-type]
        if slot is None:
            if known is None:
                self.ledger[key] = (proc, None, None)
        else:
            if restarted and len(slot.pids) > 1:
                self.restarts.shared = True
            seen = slot.pids.get(src.pid)  # type: ignore[arg-type]
            if known is None or known[2] is not seen:
                self.ledger[key] = (proc, slot, seen)
        if proc.dropped != dropped:
            pass
        elif final:
            self.postponed, self.begun = INF, None
        elif was is not None and ts < was and not restarted:
            self.postponed = was
        elif first:
            self.postponed, self.begun = INF, ts + timeout
        if final and self.holds:  # a clean exit lets go of what the process held
            self.holds.exited(proc.name, ts)
        if self.inference.servers and self.inference.process_final(proc):
            # the idle condition depends on heartbeats only through servers' clean exits;
            # every other change re-evaluates it on its own, so nothing else can be stale
            self._idle_changed()

    def _step_started(self, event: ev.Event) -> None:
        e: ev.StepStarted = event  # type: ignore[assignment]
        self.steps.started(e.step, e.ts)

    def _step_done(self, event: ev.Event) -> None:
        e: ev.StepDone = event  # type: ignore[assignment]
        self.steps.done(e.step, e.ts, e.duration_s, self.inference.idle_since, e.timing)
        if self.progress_at is None or e.ts > self.progress_at:
            self.progress_at = e.ts

    def _step_metrics(self, event: ev.Event) -> None:
        e: ev.StepMetrics = event  # type: ignore[assignment]
        self.steps.metrics(e.step, e.ts, e.metrics)

    def _reward(self, event: ev.Event) -> None:
        e: ev.Reward = event  # type: ignore[assignment]
        self.steps.reward(e.step, e.ts, e.mean)

    def _traj_started(self, event: ev.Event) -> None:
        e: ev.TrajectoryStarted = event  # type: ignore[assignment]
        if self.status is not None:  # (finished)
            return
        inference = self.inference
        waited = bool(inference.pending)
        inference.started(e.traj, e.ts, e.step, e.group)
        if not waited:  # (with work pending already, one more changes no server's idleness)
            self._idle_changed()

    def _traj_phase(self, event: ev.Event) -> None:
        e: ev.TrajectoryPhase = event  # type: ignore[assignment]
        self.inference.phase(e.traj, e.phase, e.ts, e.dep)
        if e.dep is not None:
            self._used(e.dep, e.ts)

    def _used(self, dep: str, ts: float) -> None:
        deps = self.deps
        if deps is EMPTY:
            deps = self.deps = {}
        if ts > deps.get(dep, float("-inf")):
            deps[dep] = ts
            if len(deps) > MAX_DEPS:  # a run names a handful; a runaway emitter, the oldest go
                del deps[next(iter(deps))]

    def _traj_done(self, event: ev.Event) -> None:
        e: ev.TrajectoryDone = event  # type: ignore[assignment]
        if e.reward is not None and math.isfinite(e.reward):
            began = self.inference.pending.get(e.traj)
            group = e.group if e.group is not None else began.group if began else None
            step = e.step if e.step is not None else began.step if began else None
            # counted once: a second done of the same trajectory (another id) is not
            again = began is None and self.inference.has_ended(e.traj)
            if group is not None and step is not None and not again:
                self.steps.group_reward(step, group, e.reward)
        inference = self.inference
        waited = bool(inference.pending)
        inference.done(e.traj)
        if waited and not inference.pending:  # else the idle condition is as it was
            self._idle_changed()

    def _server_name(self, server: str | None, event: ev.Event) -> str:
        if server:
            return server
        return event.src.instance or event.src.host or "inference"

    def _request(self, event: ev.Event) -> None:
        e: ev.RequestQueued | ev.RequestDone = event  # type: ignore[assignment]
        name = self._server_name(e.server, e)
        proc = self.processes.get(e.src) if e.src.component == "inference" else None
        self.inference.request(name, proc, e.req, done=event.kind == "request.done")
        self._idle_changed()
        if e.dep is not None:
            self._used(e.dep, e.ts)

    def _inference_stats(self, event: ev.Event) -> None:
        e: ev.InferenceStats = event  # type: ignore[assignment]
        proc = self.processes.get(e.src)
        # (the idle condition is kept up to date on every event that can change it: a
        # snapshot that leaves every server's idleness as it was leaves it as it was)
        if self.inference.stats(e.server, proc, e.ts, e.running, e.waiting, e.kv_cache_usage,
                                e.gen_tokens_per_s, e.prompt_tokens_per_s,
                                e.stalled_since):  # fmt: skip
            self._idle_changed()

    def _progress(self, event: ev.Event) -> None:
        e: ev.Progress = event  # type: ignore[assignment]
        if self.progress is NO_PROGRESS:
            self.progress = ProgressCounters(self.config.progress_window)
        self.progress.update(e.src.component, e.name, e.n, e.total, e.ts)
        if e.name in self.config.pending_bars and not self.finished:
            key = (e.src.component, e.name)
            if self.inference.bars is EMPTY:
                self.inference.bars = {}
            self.inference.bars[key] = self.progress.by_key[key]
            self._idle_changed()

    def _rank_status(self, event: ev.Event) -> None:
        e: ev.RankStatus = event  # type: ignore[assignment]
        if self.ranks is NO_RANKS:
            self.ranks = Ranks()
        self.ranks.status(e.rank, e.world_size, e.phase, e.since, e.step, e.ts)

    def _weights_published(self, event: ev.Event) -> None:
        e: ev.WeightsPublished = event  # type: ignore[assignment]
        self._own_weights().publish(e.version, e.ts, e.step)

    def _weights_loaded(self, event: ev.Event) -> None:
        e: ev.WeightsLoaded = event  # type: ignore[assignment]
        proc = self.processes.get(e.src)
        self._own_weights().load(self._server_name(e.server, e), e.version, e.ts, proc.name)

    def _component_failed(self, event: ev.Event) -> None:
        e: ev.ComponentFailed = event  # type: ignore[assignment]
        proc = self.processes.get(e.src)
        if self.failures is NO_FAILURES:
            self.failures = Failures()
        self.failures.failed(proc.name, proc.component, e.ts, e.error, e.how, e.exit_code)

    def _collective_timeout(self, event: ev.Event) -> None:
        e: ev.CollectiveTimeout = event  # type: ignore[assignment]
        fields = {name: getattr(e, name) for name in COLLECTIVE_FIELDS}
        if self.collectives is NO_COLLECTIVES:
            self.collectives = Collectives()
        self.collectives.timeout(self.processes.get(e.src).name, e.ts, fields)

    def _dep_held(self, event: ev.Event) -> None:
        e: ev.DepHeld = event  # type: ignore[assignment]
        if self.holds is NO_HOLDS:
            self.holds = Holds()
        self.holds.held(e.dep, self.processes.get(e.src).name, e.ts, e.fleet)
        self._used(e.dep, e.ts)

    def _dep_released(self, event: ev.Event) -> None:
        e: ev.DepReleased = event  # type: ignore[assignment]
        if self.holds is not NO_HOLDS:  # (nothing held: nothing to let go of)
            self.holds.released(e.dep, self.processes.get(e.src).name, e.ts)

    def _process_stacks(self, event: ev.Event) -> None:
        self.own_stacks().answer(self.processes.get(event.src).name, event)

    def _own_weights(self) -> Weights:
        if self.weights is NO_WEIGHTS:
            self.weights = Weights()
        return self.weights

    def own_stacks(self) -> Stacks:
        """The run's own `stacks`, to write to (made on the first write)."""
        if self.stacks is NO_STACKS:
            self.stacks = Stacks()
        return self.stacks

    def failed_after_progress(self, at: float) -> bool:
        """Whether something that went wrong at `at` still stands: no step ended after it,
        and the run did not finish well. A step that ended at the same moment is not after it
        (the events of one batch can share a moment once put on the broker's clock)."""
        if self.status == "ok":
            return False
        return self.no_progress_after(at)

    def no_progress_after(self, at: float) -> bool:
        """Whether no step ended after `at` (one at the same moment is not after it)."""
        return self.progress_at is None or self.progress_at <= at


class EveryBeatInFull(RunState):
    """A run's state that takes every heartbeat the long way (`_heartbeat_in_full`): what
    the engine's reference (`Engine(shortcuts=False)`) folds, so that the short way of a
    routine beat is held to it (tests/unit/stream/test_shortcuts.py)."""

    __slots__ = ()

    def _heartbeat(self, event: ev.Event) -> None:
        self._heartbeat_in_full(event)  # type: ignore[arg-type]


#: the `collective.timeout` fields a rank's record keeps
COLLECTIVE_FIELDS = ("backend", "rank", "group_rank", "pg", "op", "seq", "timeout_s", "ran_s",
                     "last_enqueued", "last_completed", "message")  # fmt: skip

_HANDLERS = {
    "run.started": RunState._run_started,
    "run.finished": RunState._run_finished,
    "step.started": RunState._step_started,
    "step.done": RunState._step_done,
    "step.metrics": RunState._step_metrics,
    "reward": RunState._reward,
    "trajectory.started": RunState._traj_started,
    "trajectory.phase": RunState._traj_phase,
    "trajectory.done": RunState._traj_done,
    "request.queued": RunState._request,
    "request.done": RunState._request,
    "inference.stats": RunState._inference_stats,
    "progress": RunState._progress,
    "rank.status": RunState._rank_status,
    "weights.published": RunState._weights_published,
    "weights.loaded": RunState._weights_loaded,
    "component.failed": RunState._component_failed,
    "collective.timeout": RunState._collective_timeout,
    "process.stacks": RunState._process_stacks,
    "dep.held": RunState._dep_held,
    "dep.released": RunState._dep_released,
}

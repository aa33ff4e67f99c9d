"""The engine: folds events into run states and runs the rules on event time.

It owns the alert lifecycle: a condition that ripens becomes a `firing` transition, one
that stops holding becomes `resolved`, and per key the two alternate. Conditions that
ripen with no new event (a heartbeat that stops) are caught by timers: every rule reports
when its verdict could next change, and `advance(now)` evaluates those moments in order.

No clock and no I/O: drivers pass the time. Replay passes event time; live drivers pass
the wall clock.

Two clocks. Events are applied, and most rules judged, on event time (`now`). The rules on
silence (`Rule.silence`: a heartbeat that stops, progress that does not come) are judged on
`heard`, which follows `now` except where a live driver holds it (`hold`): a driver that
knows it has not heard everything yet -- its broker was away, emitters are still delivering
what they spooled through the outage -- holds the silence clock at what it has read, so
that an outage is not taken for silence, while a NaN step read meanwhile is still judged at
its own time, as a replay of the same events judges it. Replay never holds: there the two
clocks are one.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from runwatch.stream import engine_dump
from runwatch.stream.alerts import Alert, AlertState, alert_key, transition_id
from runwatch.stream.config import RulesConfig
from runwatch.stream.exceptions import ConfigError, InvalidEvent
from runwatch.stream.incidents import Bookkeeper, open_summaries
from runwatch.stream.rules import Condition, Params, Rule
from runwatch.stream.rules.base import QUIET, run_finished
from runwatch.stream.state.run import EveryBeatInFull, RunState
from runwatch.stream.tracked import KindCounts, RecentIds, TrackedRun, id_window

if TYPE_CHECKING:  # (replay runs without the pydantic models: only the live roles build views)
    from runwatch.emitters import events as ev
    from runwatch.emitters.runview import RunView

__all__ = ["CHECKED_KINDS", "Engine", "KindCounts", "RecentIds", "TrackedRun"]


def _weakly(method: Callable[[str], None]) -> Callable[[str], None]:
    """`method` (a bound method), called through a weak reference to its object."""
    ref = weakref.WeakMethod(method)

    def call(run: str) -> None:
        bound = ref()
        if bound is not None:
            bound(run)

    return call


INF = float("inf")
#: kinds whose application does more than fold and judge the rules watching them (a run's
#: config; a person's word; a run's end, which every rule firing in it is judged on)
_IN_FULL = frozenset({"run.started", "run.resumed", "run.finished"})
#: the kinds `Engine.check` may refuse
CHECKED_KINDS = frozenset({"run.started"})


class Engine:
    """Run states for many runs and their alerts."""

    def __init__(
        self,
        config: RulesConfig | None = None,
        *,
        dedup_capacity: int = 500_000,
        shortcuts: bool = True,
    ) -> None:
        """`shortcuts=False` evaluates every rule after every event (no index by kind, no
        skipped routine heartbeat): the reference the shortcuts are held to (tests, bench)."""
        self.config = config or RulesConfig.default()
        self._shortcuts = shortcuts
        self.rules: tuple[Rule[Any], ...] = self.config.rules
        self._rule_ids = tuple(rule.rule_id for rule in self.rules)
        self._enabled = {rule.rule_id: rule.params.enabled for rule in self.rules}
        #: the rule judged across runs (`shared_cause`): a run's opt-in to the fleet pause
        self.fleet_rule = next((r for r in self.rules if getattr(r, "fleet", False)), None)
        # told through a weak reference: an engine and its bookkeeper make no cycle, so an
        # engine let go (a partition given away) is freed at once, not at the cyclic
        # collector's next full pass, which a worker makes rare (`stream/collector.py`)
        self._incidents: Bookkeeper[TrackedRun] = Bookkeeper(
            self.config.incidents, _weakly(self._view_changed)
        )
        self._evidence = [i for i, rule in enumerate(self.rules) if rule.evidence]
        self._gathering = [i for i, rule in enumerate(self.rules) if rule.gathers]
        self._skip_routine = frozenset(i for i, r in enumerate(self.rules) if r.skips_routine_beats)
        self._skip_final = frozenset(i for i, r in enumerate(self.rules) if r.skips_final_beats)
        #: the rules the config turns on: what a new run's first event evaluates
        self._on = [i for i, rule in enumerate(self.rules) if rule.params.enabled]
        #: per rule, its `quiet` test where it has one (and shortcuts are on)
        self._quiet = [
            r.quiet if shortcuts and type(r).quiet is not Rule.quiet else None for r in self.rules
        ]
        self._by_kind = self._index({})
        #: kind -> the rules a routine heartbeat of a run with no alert firing evaluates;
        #: those a `final` beat does
        self._routine = {kind: [i for i in rules if i not in self._skip_routine]
                         for kind, rules in self._by_kind.items()}  # fmt: skip
        self._after_final = {kind: [i for i in rules if i not in self._skip_final]
                             for kind, rules in self._by_kind.items()}  # fmt: skip
        self._state_config = self.config.state_config()
        self.runs: dict[str, TrackedRun] = {}
        self.now = float("-inf")
        #: the silence clock (`Rule.silence`): `now`, held back no further than `hold`, and
        #: never moving back
        self.heard = float("-inf")
        #: how far a live driver lets the silence clock go (infinite: as far as `now`)
        self.hold = float("inf")
        self._silent = frozenset(i for i, rule in enumerate(self.rules) if rule.silence)
        self.seen = id_window(dedup_capacity)
        #: (when, run, rule index): checks due at one instant run in run and rule order,
        #: whatever order they were scheduled in (what a skipped evaluation cannot change).
        #: A run's `timers` holds when each check is wanted; the heap has an entry at or
        #: before it. The checks of the rules on silence fall due on `heard`: their own heap
        self._timers: list[tuple[float, str, int]] = []
        self._silence_timers: list[tuple[float, str, int]] = []
        #: the earliest entry of either heap (infinite: none): an event before it has no
        #: check falling due, whatever the hold (one compare per event instead of four)
        self._due = INF
        #: events not applied because their id was seen: by the engine or by a driver that
        #: checks before it (the live driver, ahead of its clock-skew bookkeeping)
        self.duplicates = 0
        #: (observer, the kinds it watches; None: all of them)
        self._on_event: list[tuple[Callable[[ev.Event], None], frozenset[str] | None]] = []
        self._on_transition: list[Callable[[Alert], None]] = []
        #: the kinds `_apply_in_full` takes (observers of some kinds add theirs)
        self._full_kinds = _IN_FULL
        #: events applied by kind, where a counter asked (`count_into`)
        self.counts: KindCounts | None = None
        #: runs whose run view (`run_view`) may have changed since the driver last took
        #: them (`take_run_views`); None: nobody publishes views (serve reads them)
        self.views_changed: set[str] | None = None
        #: every event takes `_apply_in_full` (observers need it, and the reference)
        self._in_full = not shortcuts

    def observe(
        self,
        *,
        events: Callable[[ev.Event], None] | None = None,
        transitions: Callable[[Alert], None] | None = None,
        kinds: Iterable[str] | None = None,
    ) -> None:
        """Call `events` with every event applied (duplicates are not) -- or only those of
        `kinds`, which leaves the others on the short path -- and `transitions` with every
        alert transition made, from an event or from a timer. For observers that count (the
        Prometheus exporter): they must be cheap and must not raise."""
        if events is not None:
            watched = None if kinds is None else frozenset(kinds)
            self._on_event.append((events, watched))
            if watched is None:
                self._in_full = True
            else:
                self._full_kinds = self._full_kinds | watched
        if transitions is not None:
            self._on_transition.append(transitions)

    def count_into(self, counts: KindCounts) -> None:
        """Count the events applied by kind into `counts` (shared by the engines a counter
        watches): one look-up per event, no observer's call."""
        self.counts = counts

    def _index(self, overrides: dict[str, Params]) -> dict[str, list[int]]:
        """kind -> the enabled rules that watch it (a rule turned off costs nothing)."""
        by_kind: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            if overrides.get(rule.rule_id, rule.params).enabled:
                for kind in rule.watches:
                    by_kind.setdefault(kind, []).append(i)
        return by_kind

    def _reindex(self, tracked: TrackedRun) -> None:
        enabled = self._enabled
        switched = any(p.enabled != enabled[r] for r, p in tracked.overrides.items())
        tracked.by_kind = self._index(tracked.overrides) if switched else None

    # -- input -----------------------------------------------------------------------------

    def apply(self, event: ev.Event, now: float | None = None) -> list[Alert]:
        """Fold one event in and evaluate the rules it may affect.

        `now` defaults to event time (the largest `ts` seen). Raises InvalidEvent when the
        event is well-formed but unusable (a bad `run.started.config`): it changes nothing.
        """
        seen, event_id = self.seen, event.id
        if event_id in seen:
            self.duplicates += 1
            return []
        tracked = self.runs.get(event.run)
        kind = event.kind
        if tracked is None or kind in self._full_kinds or self._in_full:
            return self._apply_in_full(event, now, tracked)
        # the usual event (a known run, a kind only its rules judge, shortcuts on): written out
        t = event.ts if now is None else now
        current = self.now
        if t > current:
            current = t
        if current >= self._due:
            out = self.advance(current)
        else:  # nothing falls due: what `advance` would do, without the call
            out = []
            self.now = current
            if current > self.heard:  # (the silence clock never moves back)
                heard = current if current < self.hold else self.hold
                if heard > self.heard:
                    self.heard = heard
        seen.add(event_id)
        counts = self.counts
        if counts is not None:  # `KindCounts.add` written out
            n = counts.get(kind)
            if n is None:
                counts.first(kind)
            else:
                counts[kind] = n + 1
        state = tracked.state
        state.apply(event)
        postponed = state.postponed
        if postponed is None or postponed <= current:
            indexes = (tracked.by_kind or self._by_kind).get(kind)
        elif tracked.firing or tracked.by_kind is not None or postponed == INF:
            indexes = self._routine_of(tracked, kind)
        else:  # a routine heartbeat with nothing firing in the run: made once per kind
            indexes = self._routine.get(kind)
        if indexes:
            quiet, firing, timers_of = self._quiet, tracked.firing, tracked.timers
            for i in indexes:
                test = quiet[i]
                if test is not None and i not in firing and i not in timers_of and test(state):
                    continue  # it would hold nothing and ask for nothing: nothing to change
                self._evaluate(tracked, i, current, out)
        return out

    def _routine_of(self, tracked: TrackedRun, kind: str) -> list[int]:
        """After a routine heartbeat: only the rules it can change, and those firing (it may
        be what resolves them). After a process's first beat (`RunState.begun`) also those
        whose next check comes after the deadline it brings, or that have none; after a
        `final` beat, all but those that skip such beats (`Rule.skips_final_beats`)."""
        skip, firing = self._skip_routine, tracked.firing
        watching = (tracked.by_kind or self._by_kind).get(kind, ())
        state = tracked.state
        if state.postponed != INF:
            if tracked.by_kind is None:  # those that take routine beats, and the few firing
                routine = self._routine.get(kind, [])
                extra = [i for i in firing if i in skip and i in watching]
                return sorted(routine + extra) if extra else routine
            return [i for i in watching if i not in skip or firing.get(i)]
        begun, timers = state.begun, tracked.timers
        if begun is None:  # a `final` beat
            if not firing and tracked.by_kind is None:
                return self._after_final.get(kind, [])
            skip = self._skip_final
            return [i for i in watching if i not in skip or firing.get(i)]
        return [i for i in watching
                if i not in skip or firing.get(i) or timers.get(i, INF) > begun]  # fmt: skip

    def _apply_in_full(
        self, event: ev.Event, now: float | None, tracked: TrackedRun | None
    ) -> list[Alert]:
        """`apply` for a run's first event, its config (run.started), a person's word
        (run.resumed), its end, with observers, or with the shortcuts off (the reference)."""
        seen, event_id, kind = self.seen, event.id, event.kind
        overrides = self._run_params(event) if kind == "run.started" else None
        t = event.ts if now is None else now
        target = t if t > self.now else self.now
        if target >= self._due:
            out = self.advance(target)
        else:
            out = []
            self.now = target
            heard = target if target < self.hold else self.hold
            if heard > self.heard:
                self.heard = heard
        if kind == "run.resumed":  # a person's word on the alerts, not run activity
            seen.add(event_id)
            if tracked is not None:
                self._resume(tracked, cast("ev.RunResumed", event))
            return out
        new_run = tracked is None
        if tracked is None:
            made = RunState if self._shortcuts else EveryBeatInFull  # (the reference's)
            tracked = self.runs[event.run] = TrackedRun(made(event.run, self._state_config))
        seen.add(event_id)
        if self.counts is not None:
            self.counts.add(kind)
        for observer, kinds in self._on_event:
            if kinds is None or kind in kinds:
                observer(event)
        state = tracked.state
        state.apply(event)
        if overrides:
            tracked.overrides = {**tracked.overrides, **overrides}
            state.reconfigure(self.config.state_config(tracked.overrides))
            self._reindex(tracked)
            self._view_changed(event.run)  # its opt-ins (the fleet pause) are in the view
        now = self.now
        # a run's first event starts the clocks of rules that watch for silence (`absent`);
        # its end resolves whatever fires (contract section 8), whichever kinds a rule watches
        if overrides or not self._shortcuts or kind == "run.finished":
            indexes: Iterable[int] = range(len(self.rules))
        elif new_run:  # (a rule the config turns off holds nothing in a new run)
            indexes = self._on
        else:
            postponed = state.postponed
            if postponed is None or postponed <= now:
                indexes = (tracked.by_kind or self._by_kind).get(kind, ())
            elif tracked.firing or tracked.by_kind is not None or postponed == INF:
                indexes = self._routine_of(tracked, kind)
            else:
                indexes = self._routine.get(kind, ())
        if kind == "run.finished":
            self._gathered(tracked, now, out)
        quiet, firing, timers_of = self._quiet, tracked.firing, tracked.timers
        for i in indexes:
            test = quiet[i]
            if test is not None and i not in firing and i not in timers_of and test(state):
                continue
            self._evaluate(tracked, i, now, out)
        return out

    def _gathered(self, tracked: TrackedRun, now: float, out: list[Alert]) -> None:
        """A run's end completes what the rules that gather wait for (`Rule.gathers`): a
        condition of theirs that holds at the end fires now, and the end then closes it."""
        overrides = tracked.overrides
        for index in self._gathering:
            rule, rule_id = self.rules[index], self._rule_ids[index]
            params = overrides.get(rule_id, rule.params) if overrides else rule.params
            if not params.enabled:
                continue
            at = min(now, self.heard) if index in self._silent else now
            firing = tracked.firing.get(index, {})
            for cond in rule.gathered(tracked.state, at, params).holding:
                if cond.key not in firing:
                    firing[cond.key] = cond
                    out.append(self._transition(tracked, rule, params, cond, at, "firing"))
            if firing:
                tracked.firing[index] = firing

    def check(self, event: ev.Event) -> None:
        """Raise InvalidEvent if `apply` would refuse this event (a bad `run.started.config`).

        Drivers that hold events before applying them (the reorder window) check first, so
        that an event that will be refused moves nothing, not even the window's watermark.
        """
        if event.kind in CHECKED_KINDS:
            self._run_params(event)

    def _run_params(self, event: ev.Event) -> dict[str, Params] | None:
        try:
            return self.config.run_params(getattr(event, "config", None))
        except ConfigError as err:
            raise InvalidEvent(f"run.started {err}", "refused_by_rules") from None

    def _resume(self, tracked: TrackedRun, event: ev.RunResumed) -> None:
        """Lift the firing alerts (of `event.rule`, or all) from the run's guard."""
        for index, conds in tracked.firing.items():
            rule_id = self._rule_ids[index]
            if event.rule is None or event.rule == rule_id:
                for cond in conds.values():
                    key = alert_key(rule_id, tracked.state.run, cond.key)
                    tracked.lift(transition_id(key, tracked.transitions[key]))
        tracked.resumed = {"ts": event.ts, "by": event.by, "rule": event.rule}
        self._view_changed(tracked.state.run)

    def advance(self, now: float) -> list[Alert]:
        """Move time forward to `now` (the silence clock as far as `hold` lets it),
        evaluating every check that falls due on the way, in time order."""
        out: list[Alert] = []
        timers, silence = self._timers, self._silence_timers
        heard = now if now < self.hold else self.hold
        while True:
            due = timers[0] if timers and timers[0][0] <= now else None
            if silence and silence[0][0] <= heard and (due is None or silence[0] < due):
                heap = silence
            elif due is not None:
                heap = timers
            else:
                break
            at, run, index = heapq.heappop(heap)
            tracked = self.runs.get(run)
            want = None if tracked is None else tracked.timers.get(index)
            if want != at:
                if want is not None and want > at:  # postponed since: wait on until then
                    heapq.heappush(heap, (want, run, index))
                continue  # else superseded by a later evaluation
            assert tracked is not None
            del tracked.timers[index]
            self.now = max(self.now, at)
            if heap is silence:
                self.heard = max(self.heard, at)
            self._evaluate(tracked, index, self.now, out)
        self.now = max(self.now, now)
        self.heard = max(self.heard, heard)
        self._due = min(timers[0][0] if timers else INF, silence[0][0] if silence else INF)
        return out

    # -- the alert lifecycle ---------------------------------------------------------------

    def _evaluate(self, tracked: TrackedRun, index: int, now: float, out: list[Alert]) -> None:
        silent = index in self._silent
        if silent and now > self.heard:  # a rule on silence judges what has been heard
            now = self.heard
        rule = self.rules[index]
        overrides = tracked.overrides
        params = overrides.get(self._rule_ids[index], rule.params) if overrides else rule.params
        # a run's end closes its alerts (contract section 8): nothing holds after it
        live = params.enabled and tracked.state.status is None  # (not finished)
        verdict = rule.check(tracked.state, now, params) if live else QUIET
        firing = tracked.firing.get(index)
        next_check = verdict.recheck_at
        holding = verdict.holding
        if holding or firing:  # (most verdicts hold nothing where nothing fires)
            ripe: set[str] = set()
            for cond in holding:
                if cond.fire_at <= now:
                    ripe.add(cond.key)
                    if firing is None:
                        firing = tracked.firing[index] = {}
                    if cond.key not in firing:
                        firing[cond.key] = cond
                        out.append(self._transition(tracked, rule, params, cond, now, "firing"))
                elif next_check is None or cond.fire_at < next_check:
                    next_check = cond.fire_at
            if firing:
                for key in [k for k in firing if k not in ripe]:
                    cond = firing.pop(key)
                    out.append(self._transition(tracked, rule, params, cond, now, "resolved"))
                if not firing:  # none left: `tracked.firing` holds only rules that fire
                    del tracked.firing[index]
        if self._incidents.closed:  # the evidence of what closed resolves
            for closed in self._incidents.settled():
                for i in self._evidence:
                    self._evaluate(closed, i, now, out)
        if next_check is not None and next_check > now:
            scheduled = tracked.timers.get(index)
            if scheduled != next_check:
                tracked.timers[index] = next_check
                # a check put off needs no new entry: the earlier one, when due, moves on to
                # the later time (`advance`); most evaluations only put a check off
                if scheduled is None or next_check < scheduled:
                    heap = self._silence_timers if silent else self._timers
                    heapq.heappush(heap, (next_check, tracked.state.run, index))
                    if next_check < self._due:
                        self._due = next_check
        else:
            tracked.timers.pop(index, None)

    def _transition(
        self,
        tracked: TrackedRun,
        rule: Rule[Any],
        params: Params,
        cond: Condition,
        now: float,
        state: AlertState,
    ) -> Alert:
        run = tracked.state
        key = alert_key(rule.rule_id, run.run, cond.key)
        number = tracked.transitions.get(key, 0) + 1
        tracked.transitions[key] = number
        if state == "resolved" and tracked.lifted:
            tracked.lifted.discard(transition_id(key, number - 1))
        self._view_changed(run.run)
        return self._alert(tracked, rule, params, cond, now, state, key, number)

    def _view_changed(self, run: str) -> None:
        if self.views_changed is not None:
            self.views_changed.add(run)

    def _alert(
        self,
        tracked: TrackedRun,
        rule: Rule[Any],
        params: Params,
        cond: Condition,
        now: float,
        state: AlertState,
        key: str,
        number: int,
    ) -> Alert:
        run = tracked.state
        at = now
        if state == "firing":
            desc = rule.describe(run, cond, now, params)
        elif run.finished_ts is not None:  # at the run's end, saying so
            at = max(run.finished_ts, cond.since)
            desc = run_finished(rule.rule_id, run, cond, at)
        else:
            desc = rule.describe_resolved(run, cond, now, params)
        incident = self._incidents.record(
            tracked, tracked.incidents, run, key, rule, cond, state == "firing", now
        )
        alert = Alert(
            id=transition_id(key, number),
            ts=at,
            rule=rule.rule_id,
            run=run.run,
            state=state,
            severity=rule.severity_of(params),
            key=key,
            since=cond.since,
            summary=desc.summary,
            details=desc.details,
            subject=cond.subject,
            labels=dict(run.labels),
            action=params.action,
            incident=incident,
        )
        for observer in self._on_transition:
            observer(alert)
        return alert

    def time_of(self, rule_id: str) -> float:
        """The time rule `rule_id` is judged at now: `heard` for a rule on silence."""
        silent = any(self.rules[i].rule_id == rule_id for i in self._silent)
        return self.heard if silent else self.now

    def restate(self, run: str, key: str, number: int) -> Alert | None:
        """Alert `key` as its `number`-th transition, firing, if it fires now (else None):
        what restores alternation when the published sequence ran ahead of this engine's
        (`LiveDriver.finish_replay`). The run's transition count becomes `number`."""
        tracked = self.runs.get(run)
        if tracked is None:
            return None
        for index, conds in tracked.firing.items():
            rule = self.rules[index]
            for cond in conds.values():
                if alert_key(rule.rule_id, run, cond.key) == key:
                    params = tracked.overrides.get(rule.rule_id, rule.params)
                    tracked.transitions[key] = number
                    now = self.heard if index in self._silent else self.now
                    return self._alert(tracked, rule, params, cond, now, "firing", key, number)
        return None

    # -- checkpoints and run views (stream/engine_dump.py, stream/runviews.py) ----------------

    def dump_state(self) -> dict[str, Any]:
        """Everything a re-read of the input would rebuild, as objects a checkpoint can
        pickle (`engine_dump.dump_state`)."""
        return engine_dump.dump_state(self)

    def load_state(self, state: dict[str, Any]) -> None:
        """Take over what `dump_state` gave (`engine_dump.load_state`): all or nothing."""
        engine_dump.load_state(self, state)

    def run_view(self, run: str) -> RunView | None:
        """What a run's own processes read (`runviews.run_view`); None for a run not
        tracked."""
        from runwatch.stream import runviews

        return runviews.run_view(self, run)

    def take_run_views(self) -> list[RunView]:
        """The views of the runs whose view may have changed since the last call."""
        changed = self.views_changed
        if not changed:
            return []
        self.views_changed = set()
        return [view for run in sorted(changed) if (view := self.run_view(run)) is not None]

    # -- introspection ---------------------------------------------------------------------

    def open_incidents(self, run: str | None = None) -> list[dict[str, Any]]:
        """The incidents open now (of `run`, or all): their id, root and alerts."""
        runs = self.runs.items() if run is None else [(run, self.runs.get(run))]
        return [
            summary
            for name, tracked in runs
            if tracked is not None
            for summary in open_summaries(name, tracked.incidents)
        ]

    def firing(self) -> list[tuple[str, str, Condition]]:
        """(run, rule id, condition) for every alert that is firing now."""
        return [
            (run, self.rules[i].rule_id, cond)
            for run, tracked in self.runs.items()
            for i, conds in tracked.firing.items()
            for cond in conds.values()
        ]

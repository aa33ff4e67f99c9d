"""`emitter_dropping`: an emitter says it is dropping events -- the monitor itself is losing
this run's data (its queue overflowed, or its spool is full).

Every heartbeat carries `dropped_events`, the count the emitting process has dropped so far.
A count that rises is a loss happening now: the alert fires at the beat that shows it, and
resolves once `quiet_for` passes with no further rise. A run whose emitters drop nothing
never fires; a process that comes back counting from zero (a restart) is not a loss.
"""

from __future__ import annotations

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Deadlines,
    Description,
    Params,
    PositiveInt,
    Rule,
    Seconds,
    Verdict,
)
from runwatch.stream.state.run import RunState


class EmitterDroppingParams(Params, frozen=True):
    quiet_for: Seconds = 600.0
    min_dropped: PositiveInt = 1


class EmitterDroppingRule(Rule[EmitterDroppingParams]):
    id = "emitter_dropping"
    severity = "warning"
    silence = True
    fires_when = (
        "an emitter's `dropped_events` rose: runwatch is losing the run's data (resolves "
        "after `quiet_for`, {quiet_for:g} s, without more)"
    )
    params_model = EmitterDroppingParams
    watches = frozenset({"heartbeat", "run.finished"})
    skips_routine_beats = True
    skips_final_beats = True

    def quiet(self, run: RunState) -> bool:
        return not run.processes.dropping  # no emitter has said it dropped events

    def check(self, run: RunState, now: float, params: EmitterDroppingParams) -> Verdict:
        if run.finished:
            return QUIET
        due = Deadlines(now)
        for proc in run.processes.by_id.values():
            at = proc.dropped_at
            if at is None or proc.dropped < params.min_dropped:
                continue
            quiet = at + params.quiet_for
            if now < quiet:  # holds until it has been quiet that long
                due.hold(proc.name, at, at, proc.name)
                due.later(quiet)
        return due.verdict()

    def describe(
        self, run: RunState, cond: Condition, now: float, params: EmitterDroppingParams
    ) -> Description:
        proc = run.processes.by_id[cond.key]
        return Description(
            f"{proc.component} emitter {proc.name} has dropped {proc.dropped} events: "
            "runwatch is losing this run's data",
            {
                "process": proc.name,
                "component": proc.component,
                "dropped": proc.dropped,
                "last_drop": proc.dropped_at,
            },
        )

"""`dep_held`: a run's processes hold their work to a service (the fleet pause).

The incident: a sandbox pool was down for 75 minutes; the run that used it saw 1,280
errored episodes and aborted within 23 minutes, where its team wanted it to wait. A run that
opts in (`run.started.config`: `{"shared_cause": {"hold": true}}`) has its calls to a
service held while that service's fleet incident is open (`runwatch.emitters.hold`), and
its processes say so (`dep.held`, `dep.released`).

This alert is what keeps the pause from lifting itself. A fleet incident resolves when its
member incidents close; held work fails nothing and may leave the inference servers busy
with other work, so the stall that opened the run's incident can resolve while the service
is still down -- the fleet incident would resolve, the hold lift, and the calls fail again.
Held work fires this alert instead, naming the service (`details.dep`): it keeps the run's
incident open (a symptom of a stall that waits on a service, else the root of its own,
which joins the fleet incident), until the processes let go -- a canary call that
succeeded, the service's own heartbeats, the emitter's end -- or the run finishes.
"""

from __future__ import annotations

from runwatch.stream.rules.base import QUIET, Condition, Description, Params, Rule, Verdict
from runwatch.stream.state.run import RunState


class DepHeldParams(Params, frozen=True):
    pass


class DepHeldRule(Rule[DepHeldParams]):
    id = "dep_held"
    severity = "info"
    fires_when = (
        "a process of the run holds its calls to a service while the service's fleet "
        "incident is open (the run opted in: `shared_cause.hold`); `subject` the service, "
        "`details.dep` too, so the run's incident stays in the fleet incident until it lets go"
    )
    params_model = DepHeldParams
    watches = frozenset({"dep.held", "dep.released", "heartbeat", "run.finished"})
    #: holds change on `dep.*`, a `final` beat and the run's end, never on a routine beat
    skips_routine_beats = True

    def quiet(self, run: RunState) -> bool:
        return not run.holds.by_dep  # (`Holds.__bool__` without its call)

    def check(self, run: RunState, now: float, params: DepHeldParams) -> Verdict:
        if run.finished or not run.holds:
            return QUIET
        held = [
            Condition(dep, since, since, dep)
            for dep, holders in run.holds.holding().items()
            for since in (min(h.since for h in holders.values()),)
        ]
        return Verdict(tuple(held)) if held else QUIET

    def describe(
        self, run: RunState, cond: Condition, now: float, params: DepHeldParams
    ) -> Description:
        holders = run.holds.holding().get(cond.key, {})
        fleets = sorted({h.fleet for h in holders.values() if h.fleet is not None})
        return Description(
            f"{len(holders)} process(es) hold their calls to {cond.key} while its fleet "
            "incident is open",
            {"dep": cond.key, "processes": sorted(holders), "fleet": fleets[0] if fleets else None},
        )

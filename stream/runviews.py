"""A run's view (`runwatch.emitters.runview`): what its own processes read of the engine --
the alerts firing that no person lifted, with their rule's policy, a request for stacks, its
opt-in to the fleet pause. `Engine.run_view` is `run_view`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runwatch.emitters.runview import HoldPolicy, Resumed, RunView, StacksAsked, ViewAlert
from runwatch.stream.alerts import alert_key, transition_id
from runwatch.stream.tracked import TrackedRun

if TYPE_CHECKING:
    from runwatch.stream.engine import Engine


def run_view(engine: Engine, run: str) -> RunView | None:
    """What a run's own processes read (`runwatch.emitters.runview`): the alerts firing
    now that no person lifted, with their rule's policy, and a request for stacks while
    one is open; None for a run not tracked."""
    tracked = engine.runs.get(run)
    if tracked is None:
        return None
    alerts: list[ViewAlert] = []
    for index, conds in tracked.firing.items():
        rule = engine.rules[index]
        params = tracked.overrides.get(rule.rule_id, rule.params)
        for cond in conds.values():
            key = alert_key(rule.rule_id, run, cond.key)
            ident = transition_id(key, tracked.transitions[key])
            if ident not in tracked.lifted:
                alerts.append(
                    ViewAlert(id=ident, rule=rule.rule_id, key=key, subject=cond.subject,
                              severity=rule.severity_of(params), action=params.action,
                              since=cond.since)
                )  # fmt: skip
    alerts.sort(key=lambda a: (a.since, a.key))
    stacks = tracked.state.stacks
    asked = None
    if stacks.request is not None:
        asked = StacksAsked(request=stacks.request, at=stacks.requested_at)
    resumed = Resumed(**tracked.resumed) if tracked.resumed is not None else None
    return RunView(run=run, ts=engine.now, alerts=alerts, lifted=len(tracked.lifted),
                   resumed=resumed, stacks=asked, hold=hold_policy(engine, tracked))  # fmt: skip


def hold_policy(engine: Engine, tracked: TrackedRun) -> HoldPolicy | None:
    """The run's opt-in to the fleet pause (`shared_cause.hold`), if it gave one."""
    rule = engine.fleet_rule
    if rule is None:
        return None
    params = tracked.overrides.get(rule.rule_id, rule.params)
    if not (params.enabled and getattr(params, "hold", False)):
        return None
    return HoldPolicy(canary_every=params.canary_every)

"""`restart_loop`: one role of a run keeps coming back with a new pid -- a crash loop that
a supervisor (Ray, Kubernetes, a bash `while`) hides, while the job makes no progress.

Restarts come from the heartbeat ledger (`runwatch.stream.state.restarts`): a new pid in a
slot (component, host, rank, instance) after the previous one went quiet. The alert fires
when `restarts` of them fall within `within` seconds, confirmed `confirm` seconds after the
last one (emitters beat every 10 s: pids that start together and only looked quiet in
between have beaten again by then). It resolves once fewer than `restarts` are left in the
window, or the run finishes.
"""

from __future__ import annotations

from runwatch.stream.rules.base import (
    QUIET,
    STALLS,
    Condition,
    Deadlines,
    Description,
    Params,
    PositiveInt,
    Rule,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState


class RestartLoopParams(Params, frozen=True):
    restarts: PositiveInt = 3
    within: Seconds = 1800.0
    confirm: Seconds = 30.0


def recent(times: list[float], now: float, within: float) -> list[float]:
    return [t for t in times if now - within < t <= now]


class RestartLoopRule(Rule[RestartLoopParams]):
    id = "restart_loop"
    severity = "critical"
    silence = True
    fires_when = (
        "one role (component + host + rank + instance) came back with a new pid `restarts` "
        "({restarts}) times within `within` ({within:g} s): a crash loop a supervisor hides"
    )
    params_model = RestartLoopParams
    watches = frozenset({"heartbeat", "run.finished"})
    skips_routine_beats = True
    explains = STALLS | {"heartbeat_lost", "inference_idle_with_pending", "zero_reward"}

    def quiet(self, run: RunState) -> bool:
        return not run.restarts.shared  # no slot has had a second pid (most runs)

    def check(self, run: RunState, now: float, params: RestartLoopParams) -> Verdict:
        if run.finished:
            return QUIET
        due = Deadlines(now)
        for name, slot in run.restarts.slots.items():
            if slot.many is None:  # one pid restarted nothing (most slots, most of the time)
                continue
            times = recent(slot.restarts(), now, params.within)
            if len(times) < params.restarts:
                continue
            # ripe `confirm` after the restart that made the count (later ones do not
            # postpone it: a loop faster than `confirm` must fire too)
            due.hold(name, times[0], times[params.restarts - 1] + params.confirm, name)
            # the window lets go of its oldest restart then: look again
            due.later(times[-params.restarts] + params.within)
        return due.verdict()

    def describe(
        self, run: RunState, cond: Condition, now: float, params: RestartLoopParams
    ) -> Description:
        slot = run.restarts.slots[cond.key]
        times = recent(slot.restarts(), now, params.within)
        pids = [pid for pid, (first, _) in sorted(slot.pids.items(), key=lambda p: p[1][0])]
        return Description(
            f"{cond.key} restarted {len(times)} times in {fmt_duration(now - times[0])} "
            f"(a new pid each time: {', '.join(map(str, pids[-len(times) - 1 :]))}): a crash "
            "loop",
            {"slot": cond.key, "restarts": times, "pids": pids[-len(times) - 1 :]},
        )

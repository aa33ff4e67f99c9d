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

from pydantic import PositiveFloat, PositiveInt

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    Rule,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState


class RestartLoopParams(Params):
    restarts: PositiveInt = 3
    within: PositiveFloat = 1800.0
    confirm: PositiveFloat = 30.0


def recent(times: list[float], now: float, within: float) -> list[float]:
    return [t for t in times if now - within < t <= now]


class RestartLoop(Rule[RestartLoopParams]):
    id = "restart_loop"
    severity = "critical"
    params_model = RestartLoopParams
    watches = frozenset({"heartbeat", "run.finished"})

    def check(self, run: RunState, now: float, params: RestartLoopParams) -> Verdict:
        if run.finished:
            return QUIET
        held = []
        recheck: float | None = None
        for name, slot in run.restarts.slots.items():
            times = recent(slot.restarts(), now, params.within)
            if len(times) < params.restarts:
                continue
            # ripe `confirm` after the restart that made the count (later ones do not
            # postpone it: a loop faster than `confirm` must fire too)
            ripe = times[params.restarts - 1] + params.confirm
            held.append(Condition(name, times[0], ripe, name))
            # the window lets go of its oldest restart then: look again
            leaves = times[-params.restarts] + params.within
            recheck = leaves if recheck is None else min(recheck, leaves)
        return Verdict(tuple(held), recheck)

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

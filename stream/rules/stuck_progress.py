"""`stuck_progress`: a progress bar stopped advancing, judged against its own pace.

A bar that advances every 2 hours is healthy at 90 minutes; one that advanced every 3 s and
has not moved for 10 minutes is not. The limit is `max(min_stall, factor x median pace)`.
"""

from __future__ import annotations

from msgspec import field
from msgspec.structs import replace

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    PositiveFloat,
    PositiveInt,
    Rule,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.progress import Counter
from runwatch.stream.state.run import RunState, StateConfig


class StuckProgressParams(Params, frozen=True):
    min_stall: Seconds = 300.0
    factor: PositiveFloat = 10.0
    window: PositiveInt = 20
    stall_after: dict[str, Seconds] = field(default_factory=dict)


def stall_limit(counter: Counter, params: StuckProgressParams) -> float | None:
    """Seconds without an advance after which this counter is stuck; None: pace unknown."""
    fixed = params.stall_after.get(counter.name)
    if fixed is not None:
        return fixed
    pace = counter.pace()
    if pace is None:
        return None
    return max(params.min_stall, params.factor * pace)


class StuckProgressRule(Rule[StuckProgressParams]):
    id = "stuck_progress"
    severity = "warning"
    fires_when = (
        "a progress bar has not advanced for `max(min_stall, factor × its usual pace)` "
        "({min_stall:g} s, ×{factor:g})"
    )
    hang = True
    silence = True
    params_model = StuckProgressParams
    watches = frozenset({"progress", "run.finished"})
    explains = frozenset({"step_slowdown", "idle_gap_growing", "dep_held"})

    def state_needs(self, params: StuckProgressParams, base: StateConfig) -> StateConfig:
        return replace(base, progress_window=params.window)

    def check(self, run: RunState, now: float, params: StuckProgressParams) -> Verdict:
        if run.finished:
            return QUIET
        held = []
        for (component, name), counter in run.progress.by_key.items():
            if counter.complete:
                continue
            limit = stall_limit(counter, params)
            if limit is None:
                continue
            since = counter.last_advance
            held.append(Condition(f"{component}:{name}", since, since + limit, name))
        return Verdict(tuple(held))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: StuckProgressParams
    ) -> Description:
        component, _, name = cond.key.partition(":")
        counter = run.progress.by_key[(component, name)]
        limit = stall_limit(counter, params)
        pace = counter.pace()
        at = f"{counter.n}/{counter.total}" if counter.total is not None else str(counter.n)
        usual = f"; it usually advances every {fmt_duration(pace)}" if pace is not None else ""
        details: dict[str, object] = {
            "name": name,
            "component": component,
            "n": counter.n,
            "total": counter.total,
            "stalled_s": round(now - counter.last_advance, 3),
            "pace_s": None if pace is None else round(pace, 3),
            "limit_s": limit,
        }
        waits_on = run.inference.waits_on(now, counter.last_advance)
        if waits_on is not None:  # the service the run's pending work waits on (section 8)
            details["dep"] = waits_on
            usual += f"; its pending work waits on {waits_on}"
        return Description(
            f"progress '{name}' ({component}) stuck at {at} for "
            f"{fmt_duration(now - counter.last_advance)}{usual}",
            details,
        )

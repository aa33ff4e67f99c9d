"""`idle_gap_growing`: the GPU-idle gap inside each step keeps growing.

The incident: before the job stalled for good, the idle gap per step had grown 20 -> 21 ->
26 minutes. Caught there, the 99-minute stall would not have happened.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated

from msgspec import Meta
from msgspec.structs import replace

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    NonNegativeFloat,
    Params,
    Rule,
    TimeValued,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step


class IdleGapParams(Params, frozen=True):
    steps: Annotated[int, Meta(ge=2)] = 3
    min_gap: Annotated[NonNegativeFloat, TimeValued()] = 300.0


def _growing(done: list[Step], params: IdleGapParams) -> int | None:
    """Index in `done` of the step that made the gaps grow, if they have not shrunk since."""
    n = params.steps
    # The scan back from the latest step stops at the first gap that shrank, so no gap it
    # reads is larger than the latest: the latest below `min_gap` (the usual case) settles it.
    if not done or done[-1].gap < params.min_gap:
        return None
    for i in range(len(done) - 1, -1, -1):
        if i >= n - 1:
            window = done[i - n + 1 : i + 1]
            rising = all(a.gap < b.gap for a, b in pairwise(window))
            if rising and done[i].gap >= params.min_gap:
                return i
        if i > 0 and done[i].gap < done[i - 1].gap:
            return None  # a step whose gap shrank resolves it
    return None


class IdleGapGrowingRule(Rule[IdleGapParams]):
    id = "idle_gap_growing"
    severity = "warning"
    fires_when = (
        "the GPU-idle gap per step grew over `steps` ({steps}) steps and is ≥ `min_gap` "
        "({min_gap:g} s)"
    )
    params_model = IdleGapParams
    watches = frozenset({"step.done"})

    def state_needs(self, params: IdleGapParams, base: StateConfig) -> StateConfig:
        return replace(base, keep_steps=max(base.keep_steps, params.steps + 1))

    @staticmethod
    def _done(run: RunState) -> list[Step]:
        return [s for s in run.steps.recent(run.steps.keep) if s.done is not None]

    def check(self, run: RunState, now: float, params: IdleGapParams) -> Verdict:
        last = run.steps.last_done  # the latest done step: `_growing`'s quick answer first
        if last is None or last.gap < params.min_gap:
            return QUIET
        done = self._done(run)
        i = _growing(done, params)
        if i is None:
            return QUIET
        ts = done[i].done
        assert ts is not None
        return Verdict((Condition("", ts, ts),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: IdleGapParams
    ) -> Description:
        done = self._done(run)
        i = _growing(done, params) or len(done) - 1
        window = done[max(0, i - params.steps + 1) : i + 1]
        minutes = " -> ".join(fmt_duration(s.gap) for s in window)
        return Description(
            f"GPU-idle gap per step is growing: {minutes} over steps "
            f"{window[0].number}-{window[-1].number}",
            {"gaps": {str(s.number): round(s.gap, 3) for s in window}},
        )

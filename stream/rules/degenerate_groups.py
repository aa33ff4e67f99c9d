"""`degenerate_groups`: in GRPO-style training most prompt groups have rewards that are all
equal -- every answer right, or every one wrong -- so their advantages are zero and the batch
teaches nothing, while the reward curve can look flat and fine.

Groups come from the trajectories themselves: `trajectory.started` / `trajectory.done`
carry `group` (the prompt's id) and `step`, and `trajectory.done` the `reward`
(`em.trajectory(id, step=s, group=g)`). No framework logs a ready-made fraction under one
name (PRIME-RL's `solved_none` / `solved_all` carry the agent's name in their keys,
OpenRLHF's `dynamic_filtering_pass_rate` counts samples against prompts), so the rule counts.
For each done step with at least `min_groups` groups of two or more trajectories, the
fraction whose highest and lowest reward differ by at most `epsilon`; it fires when that
fraction is at least `max_fraction` for `steps` done steps in a row (steps with fewer groups
are passed over), and resolves at the first step below.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Annotated

from msgspec import Meta
from msgspec.structs import replace

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    NonNegativeFloat,
    Params,
    PositiveInt,
    Rule,
    Verdict,
)
from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step

_GROUPS = attrgetter("groups")


class DegenerateGroupsParams(Params, frozen=True):
    max_fraction: Annotated[float, Meta(gt=0, le=1)] = 0.8
    steps: PositiveInt = 5
    min_groups: PositiveInt = 4
    epsilon: NonNegativeFloat = 1e-9


class DegenerateGroupsRule(Rule[DegenerateGroupsParams]):
    id = "degenerate_groups"
    severity = "warning"
    fires_when = (
        "GRPO: at least `max_fraction` ({max_fraction:.0%}) of a step's prompt groups have "
        "rewards that are all equal (zero advantage) for `steps` ({steps}) steps in a row; "
        "groups come from `em.trajectory(id, step=s, group=prompt_id)`"
    )
    params_model = DegenerateGroupsParams
    watches = frozenset({"step.done", "trajectory.done"})

    def __init__(self, params: DegenerateGroupsParams) -> None:
        super().__init__(params)
        self._hash = hash(params)

    def state_needs(self, params: DegenerateGroupsParams, base: StateConfig) -> StateConfig:
        return replace(base, keep_steps=max(base.keep_steps, params.steps + 1))

    def _fraction(self, step: Step, params: DegenerateGroupsParams) -> float | None:
        if step.done is None:
            return None
        same, groups = step.degenerate(params.epsilon)
        return same / groups if groups >= params.min_groups else None

    def _streak(self, run: RunState, params: DegenerateGroupsParams) -> tuple[Step, ...]:
        steps = run.steps.recent(run.steps.keep)
        if not any(map(_GROUPS, steps)):  # trajectories without groups (most runs)
            return ()
        limit = params.max_fraction
        return trailing_streak(
            steps, lambda s: self._fraction(s, params), lambda f: f >= limit
        ).steps

    def quiet(self, run: RunState) -> bool:
        return not run.steps.grouped  # no group, no streak (most runs)

    def check(self, run: RunState, now: float, params: DegenerateGroupsParams) -> Verdict:
        # most trajectories end in a step still open, which changes no done step's groups:
        # the streak is read again only when `settled` moved (or the parameters differ)
        steps = run.steps
        key = self._hash if params is self.params else hash(params)  # (hashing costs)
        memo = steps.memo.get(self.id)
        if memo is None or memo[0] != steps.settled or memo[1] != key:
            streak = self._streak(run, params)
            held = None
            if len(streak) >= params.steps:
                held = (streak[0].done or now, streak[params.steps - 1].done or now)
            memo = steps.memo[self.id] = (steps.settled, key, held)
        held = memo[2]
        return QUIET if held is None else Verdict((Condition("", *held),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: DegenerateGroupsParams
    ) -> Description:
        streak = self._streak(run, params)
        if not streak:
            return Description("prompt groups are degenerate", {})
        last = streak[-1]
        same, groups = last.degenerate(params.epsilon)
        series = {str(s.number): round(self._fraction(s, params) or 0.0, 4) for s in streak[-10:]}
        return Description(
            f"{same} of {groups} prompt groups in step {last.number} have rewards that are all "
            f"equal (zero advantage), at least {params.max_fraction:.0%} for {len(streak)} "
            f"steps ({streak[0].number}–{last.number}): the batches teach nothing",
            {"first_step": streak[0].number, "count": len(streak), "degenerate": same,
             "groups": groups, "series": series},
        )  # fmt: skip

"""`step_slowdown`: training steps take far longer than this run's own steps did -- and
where the time goes. A straggling rollout, a slower sandbox, a data loader starving, a
node with a sick GPU: each shows first as steps that stretch, long before anything stops.

The baseline is the run's own: the median and MAD of the `window` done steps before the
latest `steps`. It fires when each of the latest `steps` done steps took over `z` robust
standard deviations, at least `min_rise` (a fraction) and `min_rise_s` seconds longer than
the median (sub-second steps double on any load, and that is no stall) -- one slow
step (validation, a checkpoint) does not. When the steps report `timing` (seconds per phase,
step.done), the time of the periodic phases in `exclude_phases` (verl's `testing` and
`save_checkpoint`) is left out of the duration compared -- a validation that lands between
two stragglers does not make a third -- and the details name the phase that grew the most
against its own median.
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
from runwatch.stream.rules.levels import median, spiking
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step


class SlowdownParams(Params, frozen=True):
    exclude_phases: list[str] = field(default_factory=lambda: ["testing", "save_checkpoint"])
    steps: PositiveInt = 3
    window: PositiveInt = 20
    warmup: PositiveInt = 10
    z: PositiveFloat = 6.0
    min_rise: PositiveFloat = 0.5
    # a step must also be this many seconds longer: sub-second steps (a small model, a
    # CPU run) double on any load, and such a slowdown is no stall (issue 32's real runs)
    min_rise_s: Seconds = 5.0


class StepSlowdownRule(Rule[SlowdownParams]):
    id = "step_slowdown"
    severity = "warning"
    fires_when = (
        "`steps` ({steps}) done steps in a row each far longer than the run's own (median ± "
        "MAD of the `window`, {window}, before: robust z > `z`, {z:g}, and ≥ {min_rise:.0%} "
        "and `min_rise_s` ({min_rise_s:g} s) longer); names the phase of `step.done.timing` "
        "that grew most"
    )
    params_model = SlowdownParams
    watches = frozenset({"step.done"})

    def state_needs(self, params: SlowdownParams, base: StateConfig) -> StateConfig:
        steps = params.window + params.steps
        return replace(base, keep_steps=max(base.keep_steps, steps),
                       timing_steps=max(base.timing_steps, steps))  # fmt: skip

    def _slow(
        self, run: RunState, params: SlowdownParams
    ) -> tuple[list[Step], list[Step], float, float] | None:
        """(the slow steps, the baseline steps, median, MAD) when the latest are slow."""
        done = [s for s in run.steps.recent(run.steps.keep) if s.duration is not None]
        p = params
        durations = [_working(s, p.exclude_phases) for s in done]
        band = spiking(durations, p.steps, p.window, p.warmup, p.z, p.min_rise)
        if band is None:
            return None
        mid, mad = band
        if any(d - mid < p.min_rise_s for d in durations[-p.steps :]):
            return None
        recent, base = done[-p.steps :], done[: -p.steps][-p.window :]
        return recent, base, mid, mad

    def check(self, run: RunState, now: float, params: SlowdownParams) -> Verdict:
        slow = self._slow(run, params)
        if slow is None:
            return QUIET
        recent = slow[0]
        since = recent[0].done if recent[0].done is not None else now
        fire_at = recent[-1].done if recent[-1].done is not None else now
        return Verdict((Condition("", since, fire_at),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: SlowdownParams
    ) -> Description:
        slow = self._slow(run, params)
        if slow is None:  # described at the moment it fired: always found then
            return Description("training steps are taking far longer than before", {})
        recent, base, mid, _ = slow
        last = recent[-1]
        details: dict[str, object] = {
            "first_step": recent[0].number,
            "median_s": round(mid, 3),
            "durations_s": {str(s.number): round(s.duration or 0.0, 3) for s in recent},
        }
        where = ""
        phase = _grown_phase(last, base)
        if phase is not None:
            name, was, now_s = phase
            details.update(phase=name, phase_median_s=round(was, 3), phase_s=round(now_s, 3))
            where = f"; {name} grew most: {fmt_duration(now_s)} against {fmt_duration(was)}"
        return Description(
            f"training steps {recent[0].number}–{last.number} took "
            f"{fmt_duration(last.duration or 0.0)} against a usual {fmt_duration(mid)}{where}",
            details,
        )


def _working(step: Step, exclude: list[str]) -> float:
    """The step's duration without its periodic phases (validation, checkpoints)."""
    duration = step.duration or 0.0
    if step.timing and exclude:
        duration -= sum(step.timing.get(phase) or 0.0 for phase in exclude)
    return max(duration, 0.0)


def _grown_phase(last: Step, base: list[Step]) -> tuple[str, float, float] | None:
    """(phase, its median over the baseline steps, its seconds in `last`) for the phase of
    step.done.timing that grew the most, in seconds; None without timings."""
    if not last.timing:
        return None
    best: tuple[str, float, float] | None = None
    for name, seconds in last.timing.items():
        if seconds is None:
            continue
        before = [t for s in base if s.timing and (t := s.timing.get(name)) is not None]
        was = median(before) if before else 0.0
        if best is None or seconds - was > best[2] - best[1]:
            best = (name, was, seconds)
    return best

"""A run's own levels, written once for the rules that compare a value with them: far above
its robust recent band (kl_spike, grad_norm_spike, step_slowdown), or sunk below a fraction
of its early-training level (entropy_collapse, response_length_drift)."""

from __future__ import annotations

from statistics import median

from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState
from runwatch.stream.state.steps import Step

#: MAD × this estimates the standard deviation of normally distributed data.
MAD_SCALE = 1.4826


def band(values: list[float]) -> tuple[float, float]:
    """(median, median absolute deviation): a centre and a spread one outlier cannot move."""
    mid = median(values)
    return mid, median(abs(v - mid) for v in values)


def far_above(x: float, mid: float, mad: float, z: float, min_rise: float) -> bool:
    """Whether `x` is over `z` robust standard deviations above `mid` and at least
    `min_rise` (a fraction of |mid|) above it -- the second keeps a series so steady that
    its MAD is ~0 from firing on noise."""
    if x - mid <= min_rise * abs(mid):
        return False
    spread = MAD_SCALE * mad
    return spread <= 0 or (x - mid) / spread > z


def sunk(
    run: RunState, keys: list[str], early_steps: int, fraction: float
) -> tuple[str, float, tuple[Step, ...]] | None:
    """For the first of `keys` with `early_steps` early values: (key, its early level -- the
    median of those values --, the latest reporting steps below `fraction` of it, oldest
    first). None when no key has its early level yet, or the level is not positive."""
    early = run.steps.early
    key = next((k for k in keys if len(early.get(k, ())) >= early_steps), None)
    if key is None:
        return None
    level = median(early[key][:early_steps])
    if level <= 0:
        return None
    low = fraction * level
    streak = trailing_streak(
        run.steps.recent(run.steps.keep), lambda s: s.metrics.get(key), lambda v: v < low
    )
    return key, level, streak.steps


def values_of(steps: tuple[Step, ...] | list[Step], key: str, last: int = 10) -> dict[str, float]:
    """The last steps' values of `key`, by step number (the series an alert shows)."""
    return {str(s.number): v for s in steps[-last:] if (v := s.metrics.get(key)) is not None}

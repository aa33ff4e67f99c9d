"""A run's own levels, written once for the rules that compare a value with them: far above
its robust recent band (kl_spike, grad_norm_spike, step_slowdown), sunk below a fraction
of its early-training level (entropy_collapse, response_length_drift), or held at a limit
(response_length_drift's clipping, staleness_growing)."""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState, StateConfig
from runwatch.stream.state.steps import Step


def median(values: Iterable[float]) -> float:
    """`statistics.median`, imported when first asked: a replay whose rules never ask starts
    without it (and the `fractions`, `random` and `decimal` it imports)."""
    from statistics import median as of

    return of(values)


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


def spiking(
    values: list[float], steps: int, window: int, warmup: int, z: float, min_rise: float
) -> tuple[float, float] | None:
    """(median, MAD) of the `window` values before the last `steps` when each of those last
    ones is far above them (`far_above`); None when not, or with fewer than `warmup` before."""
    recent, base = values[-steps:], values[:-steps][-window:]
    if len(base) < warmup or len(recent) < steps:
        return None
    mid = median(base)
    rise = min_rise * abs(mid)
    if any(x - mid <= rise for x in recent):  # `far_above`'s first test, before the MAD
        return None
    mad = median(abs(v - mid) for v in base)
    return (mid, mad) if all(far_above(x, mid, mad, z, min_rise) for x in recent) else None


def keeping_early(
    base: StateConfig, keys: list[str], early_steps: int, last_steps: int
) -> StateConfig:
    """What a rule comparing `keys` with their early level needs kept: the keys per step, their
    first `early_steps` values for good, and the `last_steps` latest steps."""
    watched = frozenset(keys)
    return replace(
        base,
        watched_metrics=base.watched_metrics | watched,
        early_metrics=base.early_metrics | watched,
        early_steps=max(base.early_steps, early_steps),
        keep_steps=max(base.keep_steps, last_steps),
    )


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


def held_at_least(
    run: RunState, keys: list[str], limit: float
) -> tuple[str, tuple[Step, ...]] | None:
    """For the first of `keys` the run's recent steps logged: (key, the latest reporting
    steps whose value is at least `limit`, oldest first). None when none is logged."""
    logged = run.steps.logged
    keys = [k for k in keys if k in logged]
    if not keys:
        return None
    recent = run.steps.recent(run.steps.keep)
    key = next((k for k in keys if any(s.metrics.get(k) is not None for s in recent)), None)
    if key is None:
        return None
    streak = trailing_streak(recent, lambda s: s.metrics.get(key), lambda v: v >= limit)
    return key, streak.steps


def values_of(steps: tuple[Step, ...] | list[Step], key: str, last: int = 10) -> dict[str, float]:
    """The last steps' values of `key`, by step number (the series an alert shows)."""
    return {str(s.number): v for s in steps[-last:] if (v := s.metrics.get(key)) is not None}

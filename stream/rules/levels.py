"""A metric that sank below a fraction of its own early-training level and stays there: the
shape of entropy_collapse and of response_length_drift's collapse, written once."""

from __future__ import annotations

from statistics import median

from runwatch.stream.rules.streaks import trailing_streak
from runwatch.stream.state.run import RunState
from runwatch.stream.state.steps import Step


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

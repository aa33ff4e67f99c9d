"""Runs of consecutive steps that meet a test: shared by the step-based rules."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from runwatch.stream.state.steps import Step


class Streak(msgspec.Struct, frozen=True):
    steps: tuple[Step, ...]  # oldest first; every one meets the test

    @property
    def first(self) -> Step:
        return self.steps[0]


def trailing_streak(
    steps: list[Step],
    value: Callable[[Step], float | None],
    test: Callable[[float], bool],
) -> Streak:
    """The latest steps, in step order, whose value meets `test`.

    Steps with no value (nothing logged for that key yet) are passed over, so a streak is
    consecutive among the steps that reported.
    """
    run: list[Step] = []
    for step in reversed(steps):
        v = value(step)
        if v is None:
            continue
        if not test(v):
            break
        run.append(step)
    run.reverse()
    return Streak(tuple(run))

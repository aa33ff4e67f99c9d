"""The records a console's metric lines make, numbered and weighed (issue 41): the part every
metric reader of `runwatch.emitters.metric_lines` shares -- a line's, a block's over lines
(`metric_blocks`), a bar's postfix (`metric_bars`) -- so a record is numbered, its 0/0
statistics dropped and its overflow-skipped values held the same way whoever read it."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from runwatch.emitters.logparse import notes
from runwatch.emitters.metric_settings import undefined
from runwatch.emitters.metric_shape import EMPTY_MEAN_MARKER
from runwatch.emitters.step_numbers import OVERFLOW_STEPS, StepNumbers
from runwatch.emitters.trainer import step_events

Found = tuple[str, dict[str, Any]]
#: numpy's warning that `np.mean` averaged an empty array: `_methods._mean` warns "Mean of
#: empty slice" with stacklevel 2, so the line names its caller, `np.mean` in fromnumeric.py
#: (numpy 1.x and 2.x). The lone NaN a script prints next, naming no step, is that average of
#: nothing (kohya_ss#55's `mean ar error (without repeats): nan`). The same words naming the
#: script's own file -- `ndarray.mean()`, or `np.nanmean` of values that were all NaN -- tell
#: no empty array from NaN data: no excuse.
EMPTY_MEAN = re.compile(r"fromnumeric\.py:\d+: RuntimeWarning: Mean of empty slice")
#: how many of the source's lines the scanner shows may come between the warning and the NaN
EMPTY_MEAN_LINES = 8
#: a key that names a step's mean reward in words, where a console has none of the reward
#: keys (`reward_keys`): NeMo-RL's grpo.py prints `  • Avg Reward: {mean:.4f}` (or `Avg Total
#: Reward`) under each step's `📊 Training Results:`. Words, not a logger's key: `avg_reward`
#: and `mean_reward` are as often a classic RL script's episode return or an evaluation's
#: (stable-baselines3's `eval/mean_reward`), which sit at 0 for long stretches of a healthy run
MEAN_REWARD = re.compile(r"^(?:Avg|Average|Mean)(?: Total)? Rewards?$")


class MetricRecords:
    """Records as events, per source: numbered, with overflow skips weighed, by
    `StepNumbers`; `notes` say why a value that looked like a failure was held."""

    def __init__(self, reward_keys: Sequence[str], overflow_steps: int = OVERFLOW_STEPS) -> None:
        self.reward_keys = tuple(reward_keys)
        self.steps = StepNumbers(overflow_steps)
        #: why lines that looked like metrics gave none, since the owner last took them
        self.notes = notes()
        #: records made so far, and those of them that named no step (the console's order
        #: numbered them): a line whose records all did is no step further by its own word
        self.made = self.unnamed = 0
        #: the lines shown so far (`read_warning` counts them), and per source the count
        #: when it last warned of an empty mean (`EMPTY_MEAN`)
        self._shown = 0
        self._empty: dict[Any, int] = {}

    def read_warning(self, source: Any, line: str) -> bool:
        """Whether the line is numpy's warning that `np.mean` averaged an empty array
        (`EMPTY_MEAN`): the source's next record, if it is one NaN naming no step within a few
        lines, prints that average. Counts every line it is shown."""
        self._shown += 1
        if EMPTY_MEAN_MARKER not in line or EMPTY_MEAN.search(line) is None:
            return False
        self._empty[source] = self._shown
        return True

    def _empty_mean(self, source: Any, named: int | None, metrics: dict[str, float | None]) -> bool:
        """Whether a record is the NaN numpy's warning just said an empty array's mean gave
        (`read_warning`): one value, naming no step, within `EMPTY_MEAN_LINES` of it; the
        source's warning is spent on its next record either way."""
        warned = self._empty.pop(source, None)
        if warned is None or self._shown - warned > EMPTY_MEAN_LINES:
            return False
        if named is not None or len(metrics) != 1:
            return False
        ((key, value),) = metrics.items()
        if value is None or not math.isnan(value):
            return False
        self.notes.append(
            f"`{key}` is nan just after numpy's warning that a mean was taken of an empty array: "
            "an average of nothing, no training metric"
        )
        return True

    def saw(self, found: list[Found]) -> None:
        """The events a line gave, every reader's: the steps the run has reached."""
        for kind, fields in found:
            if kind == "step.metrics":
                self.steps.saw(fields["step"])

    def _record(
        self, source: Any, named: int | None, metrics: dict[str, float | None],
        skipped: int | None = None, rewards: bool = True,
    ) -> list[Found]:  # fmt: skip
        if self._empty and self._empty_mean(source, named, metrics):
            return []
        if any(undefined(k, v, metrics) for k, v in metrics.items()):
            metrics = {k: v for k, v in metrics.items() if not undefined(k, v, metrics)}  # 0/0
            if not metrics:
                return []
        bad = any(v is not None and not math.isfinite(v) for v in metrics.values())
        step = self.steps.step(source, named, bad)
        self.made += 1
        self.unnamed += named is None
        records = self.steps.record(source, step, metrics, skipped)
        kept = {k for s, m in records if s == step for k in m}
        held = [k for k, v in metrics.items() if k not in kept and v is not None]
        if held:
            self.notes.append(
                f"`{held[0]}` is {metrics[held[0]]} at step {step}, which the log says was "
                "skipped for a loss-scale overflow: routine until "
                f"{self.steps.overflow_steps} skips in a row or more than one at a loss scale of 1 "
                "(RUNWATCH_OVERFLOW_STEPS)"
            )
        return self._emit_all(records, rewards)

    def _emit_all(
        self, records: list[tuple[int, dict[str, float | None]]], rewards: bool = True
    ) -> list[Found]:
        out: list[Found] = []
        for step, metrics in records:
            keys = self._reward_keys(metrics) if rewards else ()
            out += step_events(metrics, step, keys, done=False)
        return out

    def _reward_keys(self, metrics: dict[str, float | None]) -> tuple[str, ...]:
        """The reward keys, matched without regard to case (`Reward` in PRIME-RL's older
        console, `reward` in TRL's table); where a record has none of them, a key that names
        a step's mean reward in words (`MEAN_REWARD`: NeMo-RL's `Avg Reward`)."""
        lower = {k.lower(): k for k in metrics}
        keys = tuple(lower[k.lower()] for k in self.reward_keys if k.lower() in lower)
        if keys:
            return keys
        return tuple(k for k in metrics if MEAN_REWARD.match(k))[:1]

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
from runwatch.emitters.step_numbers import OVERFLOW_STEPS, StepNumbers
from runwatch.emitters.trainer import step_events

Found = tuple[str, dict[str, Any]]
#: numpy's warning that `np.mean` (numpy/core/fromnumeric.py, numpy/_core/_methods.py
#: `_mean`: `warnings.warn("Mean of empty slice.", RuntimeWarning)`) averaged an empty array --
#: the NaN a script prints next, naming no step, is that average of nothing (kohya_ss#55's
#: `mean ar error (without repeats): nan`). `np.nanmean`'s same words come from
#: nanfunctions.py, where every value was NaN: those are no empty data.
EMPTY_MEAN_MARKER = "Mean of empty slice"
EMPTY_MEAN = re.compile(r"(?:fromnumeric|_methods)\.py:\d+: RuntimeWarning: Mean of empty slice")
#: how many records after the warning, naming no step, may print its NaN
EMPTY_MEAN_RECORDS = 2
#: a key that names a step's mean reward in words, where a console has none of the reward
#: keys (`reward_keys`): an average's word before or after `reward` (NeMo-RL's grpo.py prints
#: `  • Avg Reward: {mean:.4f}` under each step's `📊 Training Results:`; `avg_reward`,
#: `reward_mean`, `rewards/mean`), one word of what it sums at most (`Avg Total Reward`)
MEAN_REWARD = re.compile(
    r"(?i)^(?:(?:train|rollout|critic)[/_. ])?(?:(?:avg|average|mean)[/_. ](?:(?:total|task|raw"
    r"|overall)[/_. ])?rewards?|rewards?[/_. ](?:avg|average|mean))$"
)


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
        #: source -> records it may still print that average nothing (`EMPTY_MEAN`)
        self._empty: dict[Any, int] = {}

    def read_warning(self, source: Any, line: str) -> bool:
        """Whether the line is numpy's warning that `np.mean` averaged an empty array
        (`EMPTY_MEAN`): the source's next records that name no step may print its NaN."""
        if EMPTY_MEAN_MARKER not in line or EMPTY_MEAN.search(line) is None:
            return False
        self._empty[source] = EMPTY_MEAN_RECORDS
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
        if self._empty and (left := self._empty.pop(source, 0)) and named is None:
            empty = [k for k, v in metrics.items() if v is not None and math.isnan(v)]
            if empty:
                self.notes.append(
                    f"`{empty[0]}` is nan just after numpy's warning that a mean was taken of "
                    "an empty array: an average of nothing, no training metric"
                )
                metrics = {k: v for k, v in metrics.items() if k not in empty}
            if left > 1:
                self._empty[source] = left - 1
            if not metrics:
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

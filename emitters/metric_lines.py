"""A trainer's metrics as a console prints them: any record of numbers with a step.

- transformers' `Trainer.log` (so TRL's GRPOTrainer, PPOTrainer, ...) prints one `str(dict)`
  per logging step: `{'loss': 0.0, 'grad_norm': 0.0866, ..., 'reward': 1.71, 'epoch': 0.31}`
  (transformers 4.x: floats), `{'loss': '0', 'reward': '0', 'entropy': '5.593', ...}`
  (transformers 5 with TRL 1.16: every float a string with 4 significant digits), NaN as
  `nan` / `'nan'`, an unscorable reward as `None`, and a last summary dict
  (`train_runtime`, `train_samples_per_second`, ...) that is no step. The dict carries no
  step: it is the step the bar refreshed just before it names (`StepNumbers`). A dict
  pretty-printed over several lines is read whole.
- ms-swift prints the same as JSON, with `"global_step/max_steps": "300/1296"`.
- A progress bar's postfix: OpenRLHF's `Train epoch [e/E]` bar's, the step's metrics; any
  other's, the metrics of the step its count names (`metric_bars`).
- Any other line of key/value pairs with a step (`runwatch.emitters.metric_shape`: Megatron's
  `iteration N/M | lm loss: ... |`, mmengine's `Epoch(train) [1][240/735] ... grad_norm: nan`,
  `epoch: 0|step: N|act_loss: inf`, `[step] 104`, a Keras bar's `4/234 [===>...] - loss: inf`,
  ...), or without one but with a value that is not finite; a table's header and its rows
  of numbers (`Step | Training Loss | reward | kl`, then `1 | -0.28 | 13.4 | nan`); a
  two-column table's rows (rlpyt's `| loss/Average   nan`), one record; a header naming a
  step (`Iteration 3027`, `Learning iteration 8391/10000`) and the `key: value` lines or
  two-column rows under it (baselines' `| KL | nan |`, RSL-RL's right-aligned `Value function
  loss: inf`), one record of that step -- up to the next header, or a few lines that are
  none of its. A printed list of numbers with a `nan` in it (numpy's `Losses: [array([0.5]),
  array([nan], dtype=float32)]`) is its key's `nan` (`metric_pairs.nan_lists`). Rows of numbers
  that name nothing, a count first (`76980 nan`), are a step's metrics in a series of them,
  the count rising (`metric_tables.unkeyed_row`).

A line of pairs a terminal hard-wrapped is joined back and read whole (`metric_wraps`).
Records spread over lines are followed by `metric_blocks`; every record is numbered and
weighed by `metric_records`. A record starts only on a line holding one of
`metric_shape.MARKERS` -- what `runwatch watch`'s scanner shows the parsers -- so `runwatch
diagnose`, which reads every line, reads the same records."""

from __future__ import annotations

import math
from typing import Any

from runwatch.emitters.metric_bars import BarPostfixes
from runwatch.emitters.metric_blocks import OpenRecord, RecordsOverLines
from runwatch.emitters.metric_records import Found
from runwatch.emitters.metric_settings import labelled, settings
from runwatch.emitters.metric_shape import (
    MARKERS,
    banner,
    header,
    label_count,
    pairs,
    read_line,
    read_step,
    single_pair,
    step_key,
    table_step,
)
from runwatch.emitters.metric_tables import column_header, table_header, unkeyed_row
from runwatch.emitters.metric_wraps import WRAP_MAX, continues, goes_on, may_be_cut
from runwatch.emitters.printed_dicts import DICT, DICT_OPEN, metrics_dict
from runwatch.emitters.step_numbers import loss_scale_overflow

__all__ = ["Found", "MetricLines", "plain"]

#: box drawing (rich's and tabulate's tables) as ASCII tables draw it: verticals (`│`, `┃`,
#: `║`) are `|`, corners and junctions `+` (horizontals stay: Keras 3 draws its bar with `━`;
#: `metric_tables.is_rule` reads them); full-width forms
#: (`step：12，loss：nan`, typed with a CJK input method) their ASCII letters
_PLAIN = str.maketrans(
    {
        **dict.fromkeys("│┃║╎╏┆┇┊┋", "|"),
        **dict.fromkeys("┌┐└┘├┤┬┴┼┏┓┗┛┣┫┳┻╋┡┩╇╈┢┪╀╁╂╃╄╅╆╉╊┍┑┕┙┝┥┯┷┿", "+"),
        **dict.fromkeys("╒╕╘╛╞╡╤╧╪╓╖╙╜╟╢╥╨╫╔╗╚╝╠╣╦╩╬", "+"),
        **{chr(0xFF01 + i): chr(0x21 + i) for i in range(94)},
    }
)


def plain(line: str) -> str:
    """The line with table verticals and full-width forms as ASCII (`_PLAIN`)."""
    return line if line.isascii() else line.translate(_PLAIN)


class MetricLines(RecordsOverLines, BarPostfixes):
    """Every metric record of a console, per source (module docstring): numbered, with
    overflow skips weighed, by `StepNumbers` (`metric_records`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: source -> (a line a terminal wrapped, as far as it is joined; its lines so far; the
        #: first line's length, the terminal's width)
        self._wrapped: dict[Any, tuple[str, int, int]] = {}
        #: source -> the latest row of numbers that names nothing (`unkeyed_row`), and whether
        #: a row before it began its series
        self._rows: dict[Any, tuple[tuple[int, list[float | None]], bool]] = {}

    @property
    def following(self) -> bool:
        """A record spread over lines, or a wrapped line, is being read."""
        return bool(self._wrapped) or bool(self._open)

    def more(self, source: Any, line: str) -> tuple[bool, list[Found]]:
        """(whether the line goes on a record of its source spread over lines, what it
        gives): read before any other reader, so a line that does not go on it ends it."""
        if (wrapped := self._wrapped.pop(source, None)) is not None:
            return self._unwrap(source, wrapped, plain(line))
        held = self._open.get(source)
        return (False, []) if held is None else self._more(source, held, plain(line))

    def _unwrap(
        self, source: Any, wrapped: tuple[str, int, int], line: str
    ) -> tuple[bool, list[Found]]:
        """A line after a wrapped one: its rest (joined, and read once whole), or a line of
        its own (the wrapped line is read as it is)."""
        text, lines, width = wrapped
        if not continues(text, line):
            return False, self.read(source, text, joined=True)
        text += line
        if lines + 1 < WRAP_MAX and goes_on(width, line, text):
            self._wrapped[source] = (text, lines + 1, width)
            return True, []
        return True, self.read(source, text, joined=True)

    def finish(self) -> list[Found]:
        """The output ended: a wrapped line is read as far as it goes, then what the records
        spread over lines hold."""
        out: list[Found] = []
        for source, (text, _, _) in list(self._wrapped.items()):
            del self._wrapped[source]
            out += self.read(source, text, joined=True)
        return out + super().finish()

    def read(self, source: Any, line: str, joined: bool = False) -> list[Found]:
        """What a line no trainer-specific reader took says: a dict, a line of pairs with a
        step, a table's header, a two-column table's first row, a skipped step. A line of
        pairs a terminal's wrap cut is held for its rest (`metric_wraps`); `joined`: it is
        whole, as joined or as far as it went."""
        out: list[Found] = []
        line = plain(line)
        if not any(m in line for m in MARKERS) or self.read_warning(source, line):
            return out  # what the scanner would not show (`runwatch watch` reads the same)
        if (skip := loss_scale_overflow(line)) is not None:
            return out + self._emit_all(self.steps.overflow(source, skip))
        if "{" in line and (m := DICT_OPEN.search(line)) is not None:
            whole = DICT.search(line, m.start())
            if labelled(line[: m.start()]):  # `config: {...}`: settings, read to its end
                if whole is None:
                    out += self._hold(source, OpenRecord(text=line[m.start() :], settings=True))
                return out
            if whole is None:  # a dict pretty-printed over lines
                out += self._hold(source, OpenRecord(text=line[m.start() :]))
                return out
            got = metrics_dict(whole.group(0))  # a dict that is no step (a summary) is none
            if got is None:
                return out
            # a dict that names no step takes the one the line names before it (`step 40: {...}`),
            # or the dict it is printed in (ROLL's `metrics_tag: {"step": 4, "metrics": {...}}`)
            if (step := got[1]) is None:
                before = line[: whole.start()]
                step = read_step(before)
                if step is None and before.strip() and "{" not in before:
                    # a label's count (`rollout 3: {...}`), where it does not go back: slime
                    # counts rollouts and train steps apart, and the state drops a record
                    # whose step went back
                    count = label_count(before)
                    step = count if count is not None and count >= self.steps.last(source) else None
            return out + self._record(source, step, got[0])
        # a header first: a logging record's prefix may hold pairs of its own (`host:0`)
        head = header(line)
        if head is None and (record := read_line(line)) is not None:
            if not joined and may_be_cut(line):
                self._wrapped[source] = (line, 1, len(line))  # read whole with its rest
                return out
            step = record.step
            if record.coarse and step is not None:
                step = self.steps.coarse(source, step)
            return out + self._record(source, step, dict(record.metrics), record.skipped)
        if (cells := table_header(line)) is not None and any(step_key(c) for c in cells):
            out += self._hold(source, OpenRecord(header=cells))
        elif (columns := column_header(line)) is not None:
            out += self._hold(source, OpenRecord(columns=columns))
        elif banner(line):  # `***** eval metrics *****`: the step the console named last
            out += self._hold(source, OpenRecord(block=True))
        elif (head := head or table_step(line)) is not None:
            # a header, or a two-column table's first row naming its step (Spinning Up's
            # `| Epoch | 3 |` above its metrics): the lines under it are that step's
            kind, step = head
            if kind != "epoch":  # a step line: a dict printed after it is that step's
                self.steps.named(source, step)
            # an epoch's header numbers its lines coarsely: the step the console is at
            # where it counts finer (a record at an epoch's lower number would read as going
            # back, and be dropped)
            if kind == "epoch":
                step = self.steps.coarse(source, step)
            out += self._hold(source, OpenRecord(step=step))
        elif (pair := single_pair(line)) is not None:
            out += self._hold(source, OpenRecord(pair=pair))
        elif (named := read_step(line)) is not None:
            self.steps.named(source, named)
        elif (row := unkeyed_row(line)) is not None:
            out += self._unkeyed(source, row)
        else:
            self._why_not(line)
        return out

    def _unkeyed(self, source: Any, row: tuple[int, list[float | None]]) -> list[Found]:
        """A row of numbers that names nothing: a step's metrics once the next such row of
        its source, as many values wide, counts on from it (`76980 nan`, `76990 nan`), read
        as `column N` (the count column 1); one such row alone may be any numbers."""
        held = self._rows.get(source)
        series = held is not None and held[0][0] < row[0] and len(held[0][1]) == len(row[1])
        rows = [row] if series else []
        if series and held is not None and not held[1]:
            rows.insert(0, held[0])  # the row that began the series
        self._rows[source] = (row, series)
        out: list[Found] = []
        for count, values in rows:
            out += self._record(source, count, {f"column {i}": v for i, v in enumerate(values, 2)})
        if not series and any(v is not None and not math.isfinite(v) for v in row[1]):
            self.notes.append(
                f"a row of numbers that names nothing (`{row[0]} ...`) holds a value that is not "
                "finite: such rows are a step's metrics only in a series, as wide, the count rising"
            )
        return out

    def _why_not(self, line: str) -> None:
        """Say why a line with a value that is not finite gave no metrics (`notes`)."""
        found = pairs(line)
        bad = next((p for p in found if not math.isfinite(p.value)), None)
        if bad is None:
            return
        if settings(line):
            why = "the line prints settings (a configuration's repr or a labelled dict)"
        elif len(found) < 2:
            why = "it is the line's only number: a step's metrics are two pairs or more"
        else:
            why = (
                "the line names no step (a key like step, global_step, iteration, iter, it, "
                "`[epoch][iter/total]`, a count it starts with), prints no dict, and has no "
                "two pairs with a separator (`:`, `=`, `|`)"
            )
        self.notes.append(f"`{bad.key}` is {bad.value} but {why}")

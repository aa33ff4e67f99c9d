"""Metric records a console spreads over lines, followed line by line (issue 41): a dict
pretty-printed over lines (its text so far), a table under its header (`metric_tables`), a
two-column table's rows (rlpyt's `| loss/Average   nan`, baselines' `| KL | nan |`), and the
`key: value` lines or rows under a header naming a step (`Iteration 3027`, OLMo's `[step=1/
739328,epoch=0]`) -- one record of that step, up to the next header or a few lines that are
none of its. `runwatch.emitters.metric_lines` opens them; a line that does not go on one ends
it, and what it read is its record."""

from __future__ import annotations

import math
import re
from typing import Any

from runwatch.emitters.metric_records import Found, MetricRecords
from runwatch.emitters.metric_settings import no_limit
from runwatch.emitters.metric_shape import (
    MARKERS,
    Pair,
    banner,
    header,
    read_line,
    single_pair,
    step_row,
    table_step,
)
from runwatch.emitters.metric_tables import column_row, is_rule, table_row
from runwatch.emitters.printed_dicts import DICT_OPEN, cut_dict, metrics_dict

#: a two-column table's row that titles the rows under it, its value cell empty:
#: stable-baselines3's `| rollout/                |             |`
#: (stable_baselines3/common/logger.py, HumanOutputFormat.write)
_SECTION = re.compile(r"^\s*\|\s*[A-Za-z][\w./ -]{0,60}?\s*\|\s*\|\s*$")


def _alone(row: Pair) -> bool:
    """Whether one row under a header is a record: a value that is not finite, not a limit's
    setting (`Epoch : 8` then `LOSS : nan`, not `Epoch 1/10` then `max_grad_norm: inf`)."""
    return not math.isfinite(row.value) and not no_limit(row.key, row.value)


class OpenRecord:
    """A record spread over lines, being read: a pretty-printed dict (its text so far), a
    table (its header), a two-column table (its pairs so far), or the lines under a header
    (its step, and its pairs so far)."""

    __slots__ = ("block", "columns", "header", "lines", "misses", "pairs", "settings", "step",
                 "text")  # fmt: skip

    def __init__(self, text: str = "", header: list[str] | None = None,
                 pair: Pair | None = None, step: int | None = None,
                 columns: list[tuple[str, int, int]] | None = None,
                 block: bool = False, settings: bool = False) -> None:  # fmt: skip
        self.text = text
        self.settings = settings  # a dict of settings (`config: {`): read through, no record
        self.header = header
        self.columns = columns  # an aligned table's header: (name, start, end) per column
        self.pairs = [pair] if pair is not None else []
        self.step = step
        self.block = block or step is not None  # under a header (a banner names no step)
        self.lines = 1
        self.misses = 0  # lines in a row that were none of a header's


class RecordsOverLines(MetricRecords):
    """The records of a console spread over lines, per source (module docstring)."""

    #: a record spread over more lines than this is given up
    MAX_LINES = 200
    #: lines in a row that are none of a header's (its words, a wrapped line) that end it
    MAX_MISSES = 3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: dict[Any, OpenRecord] = {}  # source -> a record spread over lines

    @property
    def following(self) -> bool:
        """A record spread over lines is being read: the next lines matter."""
        return bool(self._open)

    def _more(self, source: Any, held: OpenRecord, line: str) -> tuple[bool, list[Found]]:
        """(whether the line goes on the record being read, what it gives): a dict's next
        line, a table's row, a two-column table's row -- or what the record gives once a
        line that does not go on it ends it."""
        held.lines += 1
        if held.lines > self.MAX_LINES:  # given up: what it holds whole is still a record
            del self._open[source]
            if held.text:
                return False, self._cut(source, held.text) if not held.settings else []
            return False, self._block(source, held.pairs, held.step) if held.pairs else []
        if held.columns is not None:
            return self._column_row(source, held.columns, line)
        if held.header is not None:
            if is_rule(line):  # under the header, or between rows (a grid's)
                return True, []
            row = table_row(held.header, line)
            if row is not None:
                return True, self._record(source, row.step, dict(row.metrics))
            del self._open[source]
            return False, []
        if held.block:
            return self._under_header(source, held, line)
        if held.pairs:
            pair = single_pair(line)
            if pair is not None:
                held.pairs.append(pair)
                return True, []
            if (step := step_row(line)) is not None:
                if held.step is None:
                    held.step = step  # the table's step, among its rows (the first it names)
                return True, []
            if "|" in line and _SECTION.match(line):
                return True, []  # a section's title among the rows (SB3's `| train/ |  |`)
            del self._open[source]
            return False, self._block(source, held.pairs, held.step)
        held.text += "\n" + line
        if held.text.count("}") < held.text.count("{"):
            return True, []
        del self._open[source]
        if held.settings:
            return True, []
        got = metrics_dict(held.text[: held.text.rfind("}") + 1])
        return True, self._record(source, got[1], got[0]) if got is not None else []

    def _column_row(
        self, source: Any, columns: list[tuple[str, int, int]], line: str
    ) -> tuple[bool, list[Found]]:
        """A line under an aligned header: a row (its record; the line is still every other
        reader's, a progress bar's refresh most often), a blank (taken), or the end of the
        table."""
        if not line.strip():
            return True, []
        row = column_row(columns, line)
        if row is None:
            del self._open[source]
            return False, []
        self._open[source].lines = 1  # a table goes on for as many rows as it has
        return False, self._record(source, row.step, dict(row.metrics))

    def _under_header(self, source: Any, held: OpenRecord, line: str) -> tuple[bool, list[Found]]:
        """A line under a header: one of its `key: value` lines or two-column rows (taken), a
        blank or a rule (taken), or something else -- which the other readers read, and which
        ends the header's record when it is a record or a header of its own, or the
        `MAX_MISSES`-th such line in a row."""
        if not line.strip() or is_rule(line):
            return True, []
        pair = single_pair(line, bare=True)
        if pair is not None:
            held.pairs.append(pair)
            held.misses = 0
            return True, []
        held.misses += 1
        if held.misses < self.MAX_MISSES and not self._starts(line):
            return False, []
        del self._open[source]
        return False, self._block(source, held.pairs, held.step)

    @staticmethod
    def _starts(line: str) -> bool:
        """Whether a line starts a record of its own (a header, a two-column table's step row
        -- the next table's `| Epoch | 4 |` -- a line of metrics, a dict)."""
        if not any(m in line for m in MARKERS):
            return False
        return (
            header(line) is not None
            or table_step(line) is not None
            or banner(line)
            or ("{" in line and DICT_OPEN.search(line) is not None)
            or read_line(line) is not None
        )

    def _block(self, source: Any, rows: list[Pair], step: int | None = None) -> list[Found]:
        """A two-column table's rows, or the pairs under a header, as one record (two rows
        or more): the header's step, else the one the console named last."""
        if len(rows) < 2 and not (step is not None and rows and _alone(rows[0])):
            return []
        metrics: dict[str, float | None] = {}
        for pair in rows:
            metrics.setdefault(pair.key, pair.value)
        return self._record(source, step, metrics)

    def _cut(self, source: Any, text: str) -> list[Found]:
        """A dict cut before its `}` (`printed_dicts.cut_dict`) as the record of its whole
        items."""
        whole = cut_dict(text)
        got = metrics_dict(whole) if whole is not None else None
        return self._record(source, got[1], got[0]) if got is not None else []

    def finish(self) -> list[Found]:
        """The output ended: a two-column table, or a header's lines, read to its end is a
        record."""
        out: list[Found] = []
        for source in list(self._open):
            out += self._close(source)
        return out

    def _hold(self, source: Any, opened: OpenRecord) -> list[Found]:
        """Read a record spread over lines from here; one the source still held ends (a
        table's header after an epoch's `key: value` lines): what it read is its record."""
        out = self._close(source)
        self._open[source] = opened
        return out

    def _close(self, source: Any) -> list[Found]:
        """The record a source held, ended: a two-column table's or a header's lines read so
        far, a dict cut before its `}` (its whole items); a configuration's dict is none."""
        held = self._open.pop(source, None)
        if held is None:
            return []
        if held.pairs:
            return self._block(source, held.pairs, held.step)
        if held.text and not held.settings:
            return self._cut(source, held.text)
        return []

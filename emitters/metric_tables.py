"""A table of metrics as a console prints it: a header of names (`Step | Training Loss |
reward | kl`, TRL's notebook table pasted as markdown), a ruling line, then rows of numbers, each
one step's metrics (`runwatch.emitters.metric_lines` follows them line by line)."""

from __future__ import annotations

import re

from runwatch.emitters.metric_shape import NUMBER, Record, step_key

_CELL_NUMBER = re.compile(rf"^(?:{NUMBER})$")
_RULE = re.compile(r"^[\s|:+=-]*$")


def table_header(text: str) -> list[str] | None:
    """The column names of a table's header (`Step | Training Loss | reward | kl`: two cells
    or more between `|`, none a number); None for anything else."""
    if text.count("|") < 1:
        return None
    cells = [c.strip() for c in text.strip().strip("|").split("|")]
    if len(cells) < 2 or any(not c or _CELL_NUMBER.match(c) for c in cells):
        return None
    if any(len(c) > 80 or ":" in c or "=" in c for c in cells):
        return None
    return cells


def is_rule(text: str) -> bool:
    """A table's ruling line (`-- | --`, `|---|---|`)."""
    return "-" in text and _RULE.match(text) is not None


def table_row(header: list[str], text: str) -> Record | None:
    """A row of numbers under `header` as one step's metrics, its step in the column a step
    key names; None for a line that is not such a row."""
    cells = [c.strip() for c in text.strip().strip("|").split("|")]
    if len(cells) != len(header):
        return None
    metrics: dict[str, float] = {}
    step: int | None = None
    numbers = 0
    for name, cell in zip(header, cells, strict=True):
        if not _CELL_NUMBER.match(cell):
            continue  # "No Log", a name
        numbers += 1
        value = float(cell)
        if step is None and step_key(name) is not None and value.is_integer() and value >= 0:
            step = int(value)
        else:
            metrics[name] = value
    if numbers * 2 < len(cells) or not metrics:
        return None
    return Record(metrics, step)

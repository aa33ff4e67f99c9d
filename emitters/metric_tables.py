"""A table of metrics as a console prints it: a header of names (`Step | Training Loss |
reward | kl`, TRL's notebook table pasted as markdown), a ruling line, then rows of numbers, each
one step's metrics (`runwatch.emitters.metric_lines` follows them line by line); or a header
whose names padding aligns (YOLOv5's `%11s` columns) over rows aligned the same way."""

from __future__ import annotations

import itertools
import re

from runwatch.emitters.metric_shape import NUMBER, STEP_RANK, Record, step_key

_CELL_NUMBER = re.compile(rf"^(?:{NUMBER})$")
#: a name in an aligned table's or a CSV's header
_WORD_CELL = re.compile(r"^[A-Za-z][\w./@%()+-]*$")
_RULE = re.compile(r"^[\s|:+=\-\u2500\u2501\u2550]*$")


def _cells(text: str) -> list[str] | None:
    """A table line's cells between its separators: `|`, else a tab, else a comma (a CSV
    logger's file, Lightning's `metrics.csv`, pasted)."""
    sep = next((s for s in ("|", "\t", ",") if s in text), None)
    if sep is None:
        return None
    return [c.strip() for c in text.strip().strip("|").split(sep)]


def table_header(text: str) -> list[str] | None:
    """The column names of a table's header (`Step | Training Loss | reward | kl`: two cells
    or more between `|` or tabs -- a notebook's HTML table copied as text --, none a number;
    a CSV's `epoch,step,train_loss`, its names one word each); None for anything else."""
    cells = _cells(text)
    if cells is None or len(cells) < 2 or any(not c or _CELL_NUMBER.match(c) for c in cells):
        return None
    if any(len(c) > 80 or ":" in c or "=" in c for c in cells):
        return None
    if (
        "|" not in text
        and "\t" not in text
        and any(" " in c or not _WORD_CELL.match(c) for c in cells)
    ):
        return None  # prose has commas too (not tabs: a notebook's table copied as text)
    return cells


def is_rule(text: str) -> bool:
    """A table's ruling line (`-- | --`, `|---|---|`, a grid's `+====+====+`, box drawing's
    `+━━━━+━━━━+`)."""
    return any(c in text for c in ("-", "==", "\u2500", "\u2501", "\u2550")) and (
        _RULE.match(text) is not None
    )


def table_row(header: list[str], text: str) -> Record | None:
    """A row of numbers under `header` as one step's metrics, its step in the column a step
    key names; None for a line that is not such a row."""
    cells = _cells(text)
    if cells is None or len(cells) != len(header):
        return None
    metrics: dict[str, float] = {}
    steps: list[tuple[int, int]] = []  # (rank, step): the finest names it (`epoch,step,...`)
    numbers = 0
    for name, cell in zip(header, cells, strict=True):
        if not _CELL_NUMBER.match(cell):
            continue  # "No Log", a name, a CSV's empty cell
        numbers += 1
        value = float(cell)
        kind = step_key(name)
        if kind is not None and value.is_integer() and value >= 0:
            rank = STEP_RANK.index(kind) if kind in STEP_RANK else len(STEP_RANK)
            steps.append((rank, int(value)))
        else:
            metrics[name] = value
    if numbers * 2 < len(cells) or not metrics:
        return None
    return Record(metrics, min(steps)[1] if steps else None)


_COUNT_CELL = re.compile(r"^(\d{1,18})/\d{1,18}$")


#: the column of a line number a paste put before each line (an editor's or a viewer's
#: gutter, `510       Epoch    GPU_mem ...`): no metric, no step
LINE_NUMBER = "#"


#: a header's name: up to three words one space apart (`Train Loss`, `Val Acc`)
_HEADER_CELL = re.compile(r"\S+(?: \S+){0,2}")


def column_header(text: str) -> list[tuple[str, int, int]] | None:
    """The columns of a header aligned by padding (YOLOv5's and Ultralytics' `'%11s' * 7`
    header, `Epoch    GPU_mem   box_loss ...`, a script's `Epoch    Train Loss    Val Loss`):
    three names or more, each of one to three words, two spaces or more between them, one a
    step's; as (name, start, end). A number before the names is the paste's line number, its
    column `LINE_NUMBER`. None for anything else (prose is one space apart)."""
    if len(text) > 300 or "|" in text or ":" in text or "=" in text:
        return None
    cells = [(m.group(0), m.start(), m.end()) for m in _HEADER_CELL.finditer(text.rstrip())]
    numbered = len(cells) > 3 and cells[0][0].isdigit()
    if numbered:
        cells[0] = (LINE_NUMBER, cells[0][1], cells[0][2])
    words = [w for c in cells[numbered:] for w in c[0].split(" ")]
    if len(cells) < 3 or not all(_WORD_CELL.match(w) for w in words):
        return None
    if any(b[1] - a[2] < 2 for a, b in itertools.pairwise(cells)):
        return None
    return cells if any(step_key(c[0]) for c in cells) else None


def column_row(header: list[tuple[str, int, int]], text: str) -> Record | None:
    """A row under an aligned header as one step's metrics: as many cells, each ending where
    its name ends (right-aligned) or starting where it starts, half of them numbers at least;
    the step in the step's column (`0/99`: the count). A progress bar whose description is
    the row (YOLOv5's `       0/99      3.28G        nan ...        640: 100%|...`) is read up
    to its description's colon. None for any other line."""
    if "%|" in text:
        text = text[: text.find("%|")]
        text = text[: text.rfind(":")] if ":" in text else ""
    cells = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\S+", text.rstrip())]
    if len(cells) == len(header) + 1 and cells[0][0].isdigit() and cells[0][2] < header[0][1]:
        cells = cells[1:]  # (pandas' index: a row's number left of the first column, unnamed)
    if len(cells) != len(header):
        return None
    right = all(c[2] == h[2] for c, h in zip(cells, header, strict=True))
    left = all(c[1] == h[1] for c, h in zip(cells, header, strict=True))
    if not (right or left):
        return None
    metrics: dict[str, float] = {}
    step: int | None = None
    numbers = 0
    for (name, _, _), (cell, _, _) in zip(header, cells, strict=True):
        count = _COUNT_CELL.match(cell)
        if name == LINE_NUMBER:
            if not cell.isdigit():
                return None
        elif step is None and step_key(name) is not None and (count or cell.isdigit()):
            step = int(count.group(1) if count else cell)
            numbers += 1
        elif _CELL_NUMBER.match(cell):
            numbers += 1
            metrics[name] = float(cell)
    if numbers * 2 < len(cells) or not metrics:
        return None
    return Record(metrics, step)


#: Python logging's `%(asctime)s` before a message (`2022-05-08 16:27:05,927 `)
_ASCTIME = re.compile(r"^\s*\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? +")
#: a cell a row leaves empty: dashes (`----`), as `'%8s' % '----'` pads a value not logged
_PLACEHOLDER = re.compile(r"^-{2,}$")


def unkeyed_row(text: str) -> tuple[int, list[float | None]] | None:
    """(its count, its values) of a row of numbers that names nothing: a count, then values
    alone (YANMTT's `76980 nan`, EPE's `17940 0.00 nan ---- ...` after the logging record's
    time), a value not logged as dashes (None). Only a series of such rows, the count rising,
    is a step's metrics (`MetricLines`): one row alone may be any numbers. None for a line
    with a word, a sign or a unit in it."""
    cells = _ASCTIME.sub("", text, count=1).split()
    if len(cells) < 2 or not cells[0].isdigit() or len(cells[0]) > 18:
        return None
    values: list[float | None] = []
    for cell in cells[1:]:
        if _PLACEHOLDER.match(cell):
            values.append(None)
        elif _CELL_NUMBER.match(cell):
            values.append(float(cell))
        else:
            return None
    if all(v is None for v in values):
        return None
    return int(cells[0]), values

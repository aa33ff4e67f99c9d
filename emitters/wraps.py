"""A pasted console's hard wraps taken out: the lines a terminal (tmux's copy, a narrow
window, a web log viewer) cut at its width, joined again before anything reads them.

A wrap leaves no mark but its length: every piece of a cut line but the last is exactly the
terminal's width, and the piece after it goes on mid-sentence. So a file's width is the length
of its longest lines where several are that long and most of those are followed by a piece
that goes on (`goes_on`): not a timestamp, a log level, a bracket, a traceback's head or frame,
an indented source line (a warning's, a frame's), a table's border, nor a line that starts as
the long one did (fixed-width records, a table's rows -- tabulate's box-drawn grid in AReaL's
stats, an ASCII grid's -- a padded console, lines of one format that happen to be longest and
equal). A line of that width is
joined with the next line that goes on; a file without such a width is read as it is.
Measured on the development parts (`tests/unit/test_wraps.py`): read as posted, no excerpt's
alerts change but one read better; hard-wrapped at 80 or 120 columns, what the wraps lost is
mostly found again.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice, pairwise

#: narrower than this, a "width" is a format's, not a terminal's
MIN_WIDTH = 60
#: how many lines of that width a file must have
MIN_WRAPPED = 2
#: the lines a file's width is judged from (its first), and at most this many characters of
#: them: they are held before the first is given out, and a file of long lines (a rollout's
#: samples, one JSON record a line) must not be held whole where it was read as it came
SAMPLE = 20_000
SAMPLE_CHARS = 4 << 20
#: how a line a process wrote begins (the next line after a long one that begins so is its own)
_FRESH = re.compile(
    r"\s*(?:\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b"
    r"|\[|\(|Traceback|File \"|[IWEF]\d{4} )"
)
#: how much of two lines' starts makes them one format's lines
_SAME_START = 6
#: a table's borders (box drawing, an ASCII grid's `|` and `+`): a row ends at one and the next
#: row begins with one, where a terminal's cut falls anywhere
_BORDERS = frozenset("|+" + "".join(chr(c) for c in range(0x2500, 0x2580)))


def goes_on(cut: str, line: str) -> bool:
    """Whether `line` can be the rest of `cut`, a line as long as the terminal was wide."""
    return not (
        not line.strip()
        or _FRESH.match(line) is not None
        or line[:_SAME_START] == cut[:_SAME_START]
        or cut.endswith("  ")  # padded to the width, not cut at it
        or cut[-1:] in _BORDERS  # a table's rows, as wide as each other
        or line.lstrip()[:1] in _BORDERS
        # indented: a source line Python shows under a warning's or a frame's line
        or line.startswith("  ")
    )


def terminal_width(lines: Sequence[str]) -> int | None:
    """The width the lines were hard-wrapped at, or None where they show none."""
    lengths = Counter(len(line) for line in lines)
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WIDTH or lengths[width] < MIN_WRAPPED:
        return None
    went_on = sum(1 for cut, after in pairwise(lines) if len(cut) == width and goes_on(cut, after))
    return width if 2 * went_on > lengths[width] else None


def unwrapped(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(number, line) with a hard-wrapped line's pieces joined, at its first piece's number
    (lines without their line ends)."""
    rest = iter(lines)
    head: list[tuple[int, str]] = []
    size = 0
    for number, line in islice(rest, SAMPLE):
        head.append((number, line))
        size += len(line)
        if size > SAMPLE_CHARS:
            break
    width = terminal_width([line for _, line in head])
    if width is None:
        yield from head
        yield from rest
        return
    held: tuple[int, str] | None = None
    for number, line in chain(head, rest):
        if held is not None:
            if goes_on(held[1][-width:], line):
                number, line = held[0], held[1] + line
            else:
                yield held
            held = None
        if len(line) >= width and len(line) % width == 0:
            held = (number, line)  # it filled the width: the next line may go on with it
        else:
            yield number, line
    if held is not None:
        yield held

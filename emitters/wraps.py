"""A pasted console's hard wraps taken out: the lines a terminal (tmux's copy, a narrow
window, a web log viewer) cut at its width, joined again before anything reads them.

A wrap leaves no mark but its length: every piece of a cut line but the last is exactly the
terminal's width, and the piece after it goes on mid-sentence. So a file's width is the length
of its longest lines where several are that long and most of those are followed by a piece
that goes on (`goes_on`): not a timestamp, a log level, a bracket, a traceback's head or frame,
an indented source line (a warning's, a frame's), a table's border, nor a line that starts as
the long one did (fixed-width records, a table's rows -- tabulate's box-drawn grid in AReaL's
stats, an ASCII grid's -- a padded console, lines of one format that happen to be longest and
equal, the numbers in their starts aside), nor one that starts as a line the console shows after
a line clearly shorter than the width (a record's header after its record: a line of its own
there, so here too). A line of that width is joined with the next line that goes on; a file
without such a width is read as it is. Measured on the development parts
(`tests/unit/test_wraps.py`): read as posted, no excerpt's alerts change but one read better;
hard-wrapped at 80 or 120 columns, what the wraps lost is mostly found again.

The width is learned from a console's first lines (`SAMPLE`) as they come (`Widths`,
`Unwrapper`): `runwatch diagnose` holds a file's before its first line is read (`unwrapped`),
`runwatch watch` joins its command's output read by read (`OutputUnwrapper`) -- a pasted
console given by `cat` comes whole, and every development excerpt read 4 KiB at a time is
joined as diagnose joins it; a live job's output shows no width and passes at once.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate

from runwatch.emitters.prefixes import GLOG_YEAR, launcher_lead, lead_form

#: narrower than this, a "width" is a format's, not a terminal's
MIN_WIDTH = 60
#: how many lines of that width a file must have
MIN_WRAPPED = 2
#: the lines a file's width is judged from (its first), and at most this many characters of
#: them: they are held before the first is given out, and a file of long lines (a rollout's
#: samples, one JSON record a line) must not be held whole where it was read as it came
SAMPLE = 20_000
SAMPLE_CHARS = 4 << 20
#: no terminal is this wide: an unfinished line longer than this ends `runwatch watch`'s
#: learning (`OutputUnwrapper`), as such a line, the longest, leaves a file no width
LONGEST = 1 << 16
#: how much shorter than the width a line must be for the line after it to be one of its own
#: (`Widths.starts`): a wrap's first piece may be short of the width by the margin a paste took
#: off it (a quote's `> `, a list item's indentation)
SHORTER = 8
#: how a line a process wrote begins (the next line after a long one that begins so is its own)
_FRESH = re.compile(
    r"\s*(?:\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b"
    rf"|\[|\(|Traceback|File \"|[IWEF]{GLOG_YEAR}\d{{4}} )"
)
_NUMBERS = re.compile(r"\d+")
#: how much of two lines' starts, their numbers left out, makes them one format's lines
_SAME_START = 6
#: a table's borders (box drawing, an ASCII grid's `|` and `+`): a row ends at one and the next
#: row begins with one, where a terminal's cut falls anywhere
_BORDERS = frozenset("|+" + "".join(chr(c) for c in range(0x2500, 0x2580)))


def _lead_shape(line: str) -> str:
    """The launcher's prefixes a line starts with, its numbers and times left out: one
    writer's lines, whatever rank, task or time they name, have one shape."""
    return _NUMBERS.sub("0", lead_form(launcher_lead(line)))


def _start_shape(line: str) -> str:
    """How a line starts, each run of digits as `0`: one format's lines (`step:9 - ...`,
    `step:10 - ...`) start alike whatever step they name."""
    return _NUMBERS.sub("0", line[: _SAME_START + 20])[:_SAME_START]


def _worded(shape: str) -> bool:
    """Whether a start holds a letter: numbers alone (`0 0.0 `, a wrapped array's pieces) say
    no format -- a wrap's pieces of one array start alike too."""
    return any(c.isalpha() for c in shape)


def goes_on(cut: str, line: str, whole: str | None = None) -> bool:
    """Whether `line` can be the rest of `cut`, a line as long as the terminal was wide
    (`whole`: the cut line entire, where `cut` is its last piece)."""
    return not (
        not line.strip()
        or _FRESH.match(line) is not None
        or line[:_SAME_START] == cut[:_SAME_START]
        or ((shape := _start_shape(line)) == _start_shape(cut) and _worded(shape))
        or cut.endswith("  ")  # padded to the width, not cut at it
        or cut[-1:] in _BORDERS  # a table's rows, as wide as each other
        or line.lstrip()[:1] in _BORDERS
        # indented: a source line Python shows under a warning's or a frame's line
        or line.startswith("  ")
        # the prefix the cut line began with (srun's label, a rank's, a container's), in its
        # shape: a launcher writes it before each line of a process, never before a wrap's
        # pieces -- which may begin with what looks like one (`86: Some workers`)
        or ((lead := _lead_shape(cut if whole is None else whole)) and _lead_shape(line) == lead)
    )


class Widths:
    """What a console's lines show of a terminal's width (module docstring): the longest lines'
    length, how many are that long, and how many of those a line that goes on follows --
    learned in batches as lines come (`saw`); over the same lines, however they were cut into
    batches, the same width."""

    def __init__(self) -> None:
        self.top = 0  # the longest line's length
        self.count = 0  # lines that long
        #: ... the start (`_start_shape`) of each line that goes on after one of them
        self.went: list[str] = []
        self.padded = 0  # ... ending in the terminal's padding
        self.seen = 0  # lines, blank ones left out
        #: how each line starts -> the shortest line before a line that starts so: a start seen
        #: after a line shorter than the width begins lines of their own (a record's: `Iter[2/20],
        #: Epoch [1/1]` after the options), not a wrap's pieces, however long the line before
        self.starts: dict[str, int] = {}
        self._before = 0  # the length of the line before the next batch's first
        self._last: str | None = None  # the last batch's last line, when that long

    def saw(self, lines: Sequence[str]) -> None:
        """A batch of lines (without their line ends), after those seen before."""
        if not lines:
            return
        if self._last is not None and len(self._last) == self.top and goes_on(self._last, lines[0]):
            self.went.append(_start_shape(lines[0]))
        self._last = None
        self.seen += sum(1 for line in lines if line.strip())
        lengths = list(map(len, lines))
        starts = self.starts
        for before, line in zip([self._before, *lengths], lines, strict=False):
            shape = _start_shape(line)
            if before < starts.get(shape, LONGEST):
                starts[shape] = before
        self._before = lengths[-1]
        longest = max(lengths)
        if longest < self.top:
            return
        if longest > self.top:
            self.top, self.count, self.went, self.padded = longest, 0, [], 0
        at = lengths.index(longest)
        while True:
            self.count += 1
            self.padded += lines[at].endswith("  ")
            if at + 1 < len(lines):
                if goes_on(lines[at], lines[at + 1]):
                    self.went.append(_start_shape(lines[at + 1]))
            else:
                self._last = lines[at]  # (the next batch's first line says whether it went on)
            try:
                at = lengths.index(longest, at + 1)
            except ValueError:
                return

    def own(self, line: str, width: int) -> bool:
        """Whether `line` starts as lines seen after one shorter than `width` did: a line of
        its own, not a wrap's piece."""
        return self._own_start(_start_shape(line), width)

    def _own_start(self, shape: str, width: int) -> bool:
        """... by its start (`_start_shape`); a start of numbers alone says no format
        (`_worded`)."""
        return _worded(shape) and self.starts.get(shape, LONGEST) < width - SHORTER

    @property
    def width(self) -> int | None:
        """The width the lines were hard-wrapped at, or None where they show none."""
        if self.top < MIN_WIDTH or self.count < MIN_WRAPPED:
            return None
        if self.padded >= MIN_WRAPPED and 2 * self.padded > self.seen:
            return self.top  # (a terminal that pads every line shows its width: most are padded)
        went = sum(1 for shape in self.went if not self._own_start(shape, self.top))
        return self.top if 2 * went > self.count else None


def terminal_width(lines: Sequence[str]) -> int | None:
    """The width the lines were hard-wrapped at, or None where they show none."""
    widths = Widths()
    widths.saw(lines)
    return widths.width


class Unwrapper:
    """A console's lines as they come, with a paste's hard wraps joined: the width is learned
    from its first lines (`SAMPLE`, at most `SAMPLE_CHARS` of them: `learn`), and each line
    is joined at the width those seen so far show. `runwatch diagnose` holds a file's sample
    before it joins its first line (`unwrapped`); `runwatch watch` joins each read of its
    command's output as it comes (`OutputUnwrapper`) -- a pasted console (`cat` of a saved
    log) comes whole, a live job's is no paste. One reading of a paste's wraps for both."""

    def __init__(self) -> None:
        self.widths = Widths()
        #: a line that filled the width: the next line may go on with it
        self.held: tuple[int, str] | None = None
        self._lines_left = SAMPLE
        self._chars_left = SAMPLE_CHARS

    @property
    def learning(self) -> bool:
        """The sample is not complete yet: the width may still change."""
        return self._lines_left > 0 and self._chars_left >= 0

    def learn(self, lines: Sequence[str]) -> None:
        """The next lines, as far as they are of the sample (the line that goes past its
        characters is its last)."""
        if not self.learning:
            return
        lines = lines[: self._lines_left]
        lengths = list(accumulate(map(len, lines)))
        if lengths and lengths[-1] > self._chars_left:
            lines = lines[: bisect_right(lengths, self._chars_left) + 1]
        self._lines_left -= len(lines)
        self._chars_left -= lengths[len(lines) - 1] if lines else 0
        self.widths.saw(lines)

    def join(self, lines: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
        """(number, line) of the next lines, learned from already, joined at the width."""
        width = self.widths.width
        if width is None:
            return self.release() + list(lines)
        out = []
        for number, line in lines:
            if (held := self.held) is not None:
                self.held = None
                if goes_on(held[1][-width:], line, held[1]) and not self.widths.own(line, width):
                    number, line = held[0], held[1] + line
                else:
                    out.append(held)
            if len(line) >= width and len(line) % width == 0:
                self.held = (number, line)  # it filled the width: the next may go on with it
            else:
                out.append((number, line))
        return out

    def release(self) -> list[tuple[int, str]]:
        """The line held, as a line of its own (the output paused or ended)."""
        held, self.held = self.held, None
        return [] if held is None else [held]


#: what a paste's margin is made of: indentation, and a markdown quote's marks (`> `, nested
#: `> > `; a reply quoting another's console quotes each of its lines)
MARGIN_CHARS = " \t>"
_MARGIN_BYTES = MARGIN_CHARS.encode()


def _quote_empty(line: str) -> bool:
    """Whether the line is a quote's empty line (`>`, `> > `): empty, once the margin is off."""
    return ">" in line and not line.strip(MARGIN_CHARS)


class Margin:
    """A paste's margin taken off: the indentation that every line so far began with (a
    console pasted inside a list item or a quote, each of its lines indented alike or
    quoted, `MARGIN_CHARS`), once a second line showed it -- the first is held till then: one
    indented line is a line's own (a prompt's, a frame's) -- until a line without it: then
    none, for good. A traceback's frames, a warning's source line and an exception line are
    told apart by their indentation, which the margin shifts; a live job's output (its first
    line unindented, as a program's lines are) is not looked at. A quote's empty line (`>`
    alone) is a blank line."""

    def __init__(self) -> None:
        self.margin: str | None = None  # (None: no line yet)
        self.off = False
        self.sure = False  # two lines showed it
        self.held: list[tuple[int, str]] = []  # the first line (and blank ones) till then

    def feed(self, number: int, line: str) -> list[tuple[int, str]]:
        """The lines to give now, the margin off where it is sure (a blank line says nothing
        of it)."""
        if self.off:
            return [(number, line)]
        if not self.sure and ("\r" in line or len(line) > LONGEST):
            self.off = True  # (a bar's refreshes, a blob: a live job's output, no paste's margin)
            return [*self.flush(), (number, line)]
        if not line.strip(MARGIN_CHARS):
            if self.sure:
                return [(number, "" if _quote_empty(line) else line)]
            self.held.append((number, line))
            return []
        indent = line[: len(line) - len(line.lstrip(MARGIN_CHARS))]
        if self.margin is not None and not indent.startswith(self.margin):
            pairs = enumerate(zip(self.margin, indent, strict=False))
            indent = self.margin[: next((k for k, (a, b) in pairs if a != b), len(indent))]
        if not indent:
            self.off = True
            return [*self.flush(), (number, line)]
        first = self.margin is None
        if first or len(indent) < len(self.margin or ""):
            self.margin = indent
        if first:
            self.held.append((number, line))  # (the first line: its own, till a second shows it)
            return []
        self.sure = True
        out = [(n, self.cut(text)) for n, text in [*self.held, (number, line)]]
        self.held = []
        return out

    def cut(self, line: str) -> str:
        """The line without the margin, where it has it (a quote's empty line, empty)."""
        if _quote_empty(line):
            return ""
        return line[len(self.margin) :] if self.margin and line.startswith(self.margin) else line

    def flush(self) -> list[tuple[int, str]]:
        """The lines held, as they are: no second line showed the margin."""
        held, self.held = self.held, []
        return held


def unwrapped(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(number, line) with a paste's margin taken off (`Margin`) and a hard-wrapped line's
    pieces joined, at its first piece's number (lines without their line ends): the sample is
    held before the first is given out."""
    unwrapper = Unwrapper()
    rest = _without_margin(lines, Margin())
    head = []
    for number, line in rest:
        head.append((number, line))
        unwrapper.learn([line])
        if not unwrapper.learning:
            break
    yield from unwrapper.join(head)
    if unwrapper.widths.width is None:  # the sample is complete and shows none: as it is
        yield from rest
        return
    for number, line in rest:
        yield from unwrapper.join(((number, line),))
    yield from unwrapper.release()


def _without_margin(lines: Iterable[tuple[int, str]], margin: Margin) -> Iterator[tuple[int, str]]:
    for number, line in lines:
        yield from margin.feed(number, line)
    yield from margin.flush()


class OutputMargin:
    """`Margin` on a command's output as it comes (bytes), as `unwrapped` takes a file's off:
    while every line so far began with the margin, whole lines are given without it (the
    first held till a second shows it) and the unfinished one is held to the next read or the
    output's pause (`pause`: a margin no second line showed is none); once a line without it
    came -- a live job's first -- the output passes as it comes, unlooked at."""

    def __init__(self) -> None:
        self.margin = Margin()
        self._open = b""  # the unfinished line
        self._given = False  # ... given at a pause as far as it came: its rest is no line start

    def feed(self, data: bytes) -> bytes:
        """What of the output so far can be read now."""
        if self.margin.off:
            return data
        data = self._open + data
        first = self.margin.margin is None and not self.margin.held
        if first and (start := data.lstrip(b"\r\n")[:1]) and start not in _MARGIN_BYTES:
            self.margin.off = True  # (an unindented first line: no paste's margin)
            self._open = b""
            return data
        end = data.rfind(b"\n")
        self._open = data[end + 1 :]
        if b"\r" in self._open or len(self._open) > LONGEST:
            # (a bar refreshed in place, or a blob: given as it comes, as at a pause -- a
            # margin no second line showed is given up, as `Margin` gives it up for such a line)
            head = self._lines(data[: end + 1]) if end >= 0 else b""
            return head + self.pause()
        return self._lines(data[: end + 1]) if end >= 0 else b""

    def _lines(self, data: bytes) -> bytes:
        """Whole lines (`data` ends in a line end), the margin off where it is sure."""
        lines = data[:-1].decode("utf-8", "replace").split("\n")
        out: list[tuple[int, str]] = []
        if self._given:  # (the rest of a line given at a pause)
            out.append((0, lines.pop(0)))
            self._given = False
        for line in lines:
            out += self.margin.feed(0, line)
        given = b"".join(line.encode() + b"\n" for _, line in out)
        if self.margin.off:
            given, self._open = given + self._open, b""
        return given

    def pause(self) -> bytes:
        """The output paused: a margin no second line showed is none (a live job's line), and
        the unfinished line is given as far as it came, without a sure margin."""
        if self.margin.sure and not self._given and not self._open.strip():
            return b""  # (only the indentation so far: nothing to give)
        held = self._unsure()
        if not self._open:
            return held
        rest, self._open = self._open.decode("utf-8", "replace"), b""
        if not self._given and self.margin.sure:
            # (as far as it came, its indentation is whole: the line as `Margin` reads it)
            rest = "".join(text for _, text in self.margin.feed(0, rest))
        self._given = True
        return held + rest.encode()

    def finish(self) -> bytes:
        """The output ended: its unfinished line is its last line."""
        rest, self._open = self._open.decode("utf-8", "replace"), b""
        if self._given:
            out, self._given = [rest], False
        else:
            out = [line for _, line in self.margin.feed(0, rest)] if rest else []
        held = self._unsure()
        return held + "\n".join(out).encode()

    def _unsure(self) -> bytes:
        """The lines held while no second line showed the margin, as they are: none then."""
        if self.margin.sure or self.margin.off:
            return b""
        self.margin.off = True
        return b"".join(line.encode() + b"\n" for _, line in self.margin.flush())


class OutputUnwrapper:
    """A command's output as it comes (bytes), with a paste's hard wraps joined (`Unwrapper`)
    before it is scanned. While the sample is learned, where the lines show no width, they
    pass as they came, at once; where they show one, they are given joined, a line that
    filled the width and the unfinished line after it held for the next read or the output's
    pause (`pause`). Once the sample is complete and shows no width, the output passes as it
    comes, unlooked at: a live job's output costs nothing more."""

    def __init__(self) -> None:
        self.lines = Unwrapper()
        self._open = b""  # the unfinished line (learned from once it ends)
        self._passed = 0  # ... how much of it was given out already
        #: no width, and none to learn: the bytes pass as they come
        self.through = False

    def feed(self, data: bytes) -> bytes:
        """What of the output so far can be scanned now."""
        if self.through:
            return data
        data = self._open + data
        end = data.rfind(b"\n")
        if len(data) - end > LONGEST:  # (a bar refreshed with "\r" for hours, a blob)
            self.through = True
            return self.pause() + data[len(self._open) :]
        if end < 0:  # the unfinished line goes on: given as it comes where no width shows
            self._open = data
            return self.pause() if self.lines.widths.width is None else b""
        self._open = data[end + 1 :]
        text = data[:end].decode("utf-8", "replace")
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
        texts = text.split("\n")
        self.lines.learn(texts)
        passed, self._passed = self._passed, 0
        if self.lines.widths.width is None and self.lines.held is None:
            self.through = not self.lines.learning
            self._passed = len(self._open)
            return data[passed:]
        given = b""
        if passed:  # a line given as far as it came (a pause): its rest, as a line of its own
            given = data[passed : data.index(b"\n") + 1]
            texts = texts[1:]
        lines = self.lines.join((0, line) for line in texts)
        return given + b"".join(line.encode() + b"\n" for _, line in lines)

    def pause(self) -> bytes:
        """The output paused: a line held is its own, and the unfinished line is given out as
        far as it came (a bar's refresh)."""
        held = b"".join(line.encode() + b"\n" for _, line in self.lines.release())
        rest, self._passed = self._open[self._passed :], len(self._open)
        return held + rest

    def finish(self) -> bytes:
        """The output ended: the rest of it (a last line without a line end is one)."""
        rest = self.feed(b"\n") if self._open and not self.through else b""
        return rest + self.pause()

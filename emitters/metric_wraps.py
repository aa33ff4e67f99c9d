"""A metric line a terminal hard-wrapped, joined back (issue 41): a console copied from a
terminal (tmux, screen, a Jupyter cell's output) breaks a long line every N columns, inside
a key or a number -- Megatron's `... | loss scale: 1.0 | grad norm` then `: nan | actual
seqlen: ...` -- so no line holds the pair, and a fragment reads as a pair it is not
(`number of n` / `an iterations: 0`) or as a step (a fragment's leading `88915968 |`).

A line of metrics is cut when it is long (`WRAP_MIN`) and ends inside a pair: after its
last whole pair, a key without its value, or a number cut after its point or in its
exponent. The lines after it that start unlike a line of their own (`continues`: not as the
cut line started, no timestamp, logger's or launcher's prefix, no bar) are its rest, joined
as the terminal cut them -- with nothing between -- while each is as long as the first (the
terminal's width; a cut after a space loses it) or the whole still ends inside a pair, up to
`WRAP_MAX` lines; the whole is read as one line."""

from __future__ import annotations

import re

from runwatch.emitters.metric_pairs import PAIR
from runwatch.emitters.prefixes import GLOG_YEAR

#: the shortest line taken for a terminal's wrap: terminals wrap at 80 columns or more, and
#: a paste drops the spaces a wrap left at a line's end
WRAP_MIN = 70
#: the lines one wrapped line may span
WRAP_MAX = 8
#: how a line cut inside a pair ends: a key (and its separator) without its value, or a
#: number cut after its exponent's `E`
#: (a unit glued to its number, `29072.79MB`, `3.22s/it`, ends a whole value)
_CUT_TAIL = re.compile(r"(?<![\w.])[A-Za-z_][\w./-]*\s*[:=]?\s*$|[:=]\s*$|\d[eE][-+]?$|\d\.$")
#: how a line of its own starts: a timestamp, a bracketed or parenthesised prefix (a logger's,
#: `[rank0]:`, Ray's `(Worker pid=N)`), glog's `I0101 `, a level, a traceback's lines
_OWN_START = re.compile(
    rf"^\s*(?:[\[(<]|\d{{4}}[-/.]\d|\d\d[-/]\d\d[-/ ]|[IWEF]{GLOG_YEAR}\d{{4}} |"
    r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|Traceback|File \")"
)


def cut_inside(line: str) -> bool:
    """Whether a line of metrics ends inside a pair, as a terminal's wrap cuts one (module
    docstring)."""
    if len(line) < WRAP_MIN:
        return False
    return _CUT_TAIL.search(line, _last_pair_end(line)) is not None


def _last_pair_end(line: str) -> int:
    """Where a line's last whole pair ends; in a line whose pairs have separators (`k: v`,
    `k=v`), a last one of spaces alone is a cut one's start (`| number of nan`)."""
    end = separated = 0
    for m in PAIR.finditer(line):
        end = m.end()
        if m.group("pk") is None:
            separated = end
    if separated and separated != end and sum(1 for _ in _SEPARATED.finditer(line)) >= 2:
        end = separated
    return end


_SEPARATED = re.compile(r"\w\s*[:=]\s*[-+.\d]")


def goes_on(width: int, line: str, text: str) -> bool:
    """Whether a wrapped line's rest goes on after `line`, joined into `text`: `line` is as
    wide as the first cut line (`width`, less the spaces a paste drops), or `text` still
    ends inside a pair."""
    return len(line) >= width - _DROPPED or cut_inside(text)


#: the spaces a paste may have dropped at a cut line's end (`global batch size:     8`)
_DROPPED = 6


def may_be_cut(line: str) -> bool:
    """Whether a line of metrics is a terminal's cut one, to hold for its rest: long, and
    after its last whole pair only a separator and a key's start (`| consumed tokens:`,
    `| grad norm`), or a number cut in its exponent. A line ending in words after its pairs
    (`throughput=16.2K tks/s`) is whole: holding it would delay its step."""
    if len(line) < WRAP_MIN:
        return False
    if _EXPONENT_CUT.search(line) is not None:
        return True
    return _KEY_CUT.match(line, _last_pair_end(line)) is not None


#: what follows a cut line's last whole pair: a separator and a key's start
_KEY_CUT = re.compile(r"\s*(?:[|,;]|(?<=\s)\s|-\s)\s*[A-Za-z_][\w ./()#-]*\s*[:=]?\s*$")
_EXPONENT_CUT = re.compile(r"\d[eE][-+]?$")


def continues(text: str, line: str) -> bool:
    """Whether a line is the rest of a wrapped line, `text` so far: it starts unlike a line of
    its own, and `text` ends inside a pair, or the two meet inside a number or a word, or
    between pairs (module docstring)."""
    if not line.strip() or "%|" in line or _lead(line) == _lead(text):
        return False
    if _OWN_START.match(line) is not None:
        return False
    end, start = text[-1:], line[:1]
    return (
        cut_inside(text)
        or ((end.isdigit() or end == ".") and start.isdigit())
        or (end.islower() and start.islower())
        or (line.lstrip()[:1] in "|,;" and end != "|")
    )


_LEAD = re.compile(r"\D{0,20}")


def _lead(line: str) -> str:
    """What a line starts with before its first digit (` iteration     `, `step `, `[`):
    how every line of a kind starts, and how a wrapped line's rest does not."""
    m = _LEAD.match(line)
    return m.group() if m is not None else ""

"""A process's failure read from its console, as `component.failed`.

Two kinds of evidence:

- **Fatal lines**, those only a dying component prints, or a failed collective or weight
  update: the signatures of the fatal-error catalogue (`runwatch.emitters.catalogue`, data
  read from the frameworks' sources: docs/catalogue.md lists them). Each is a failure at
  once, of the component its signature implicates, unless its logger prefix names a level
  below the one its source writes it at.
- **An uncaught exception**: a traceback (`Traceback (most recent call last):`, its frames,
  chained tracebacks, Ray's remote traceback after `RayTaskError(...)`) whose last line names
  the exception. A handled exception prints the same thing, so a traceback is only *pending*
  until the process says more: if the same source goes on working (a step, a progress bar,
  engine stats: anything the parsers read as progress) it was handled; if the output ends
  with it (the file, or the watched command) it was the process's last word -- a failure.
  A traceback logged at WARNING, INFO or DEBUG is a warning, never a failure.

Lines are read with whatever prefix their logger puts before each line of a record (vLLM's
`ERROR 04-28 02:37:03 [core.py:398] `, loguru's time and level): the prefix of the
`Traceback` line, with its digits free, is the prefix of the record's other lines.
"""

from __future__ import annotations

import re
from typing import Any

from runwatch.emitters.catalogue import CATALOGUE

Found = tuple[str, dict[str, Any]]

#: literal pieces a line must hold for `Failures.read` to look at it (the scanner's markers):
#: a traceback's head, Ray's exceptions (a traceback's tail), and the catalogue's literals
MARKERS = ("Traceback (most recent call last)", "ray.exceptions.", *CATALOGUE.literals)
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
_EXCEPTION = re.compile(
    r"^(?P<name>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Iteration|"
    r"Warning|Dead|Timeout|Failure|Fault|Abort|Killed)(?:\([\w.]*\))?)(?::(?:\s.*)?|\s*)$"
)
#: a tqdm bar's last refresh, which a traceback printed to the same terminal or file follows
#: on the same line (stdout and stderr in one: `...| 2/8 [00:00<00:01, 4.74it/s]Traceback`)
_BAR_BEFORE = re.compile(r"\|\s*[\d.]+[kMGT]?(?:/[\d.]+[kMGT]?|/\?)?\s*\[[^\]]*\]\s*$")
_QUIET_LEVELS = re.compile(r"\b(?:WARNING|WARN|INFO|DEBUG)\b")
#: a record longer than this is given up (a loop printing frames is not a traceback)
MAX_RECORD_LINES = 2000


def fatal(line: str) -> Found | None:
    """A catalogued fatal line as `component.failed` (how = fatal), with the component its
    signature implicates as a hint for a line no launcher names the source of."""
    signature = CATALOGUE.match(line)
    if signature is None:
        return None
    fields: dict[str, Any] = {"error": line.strip()[:2000], "how": "fatal"}
    if signature.component != "process":  # "process": whichever printed it, as the prefix says
        fields["component"] = signature.component
    return ("component.failed", fields)


def _shape(prefix: str) -> re.Pattern[str]:
    """The prefix of a record's lines, its digits free (timestamps move)."""
    return re.compile(re.sub(r"\d+", lambda _: r"\d+", re.escape(prefix)))


class _Record:
    """A traceback being read, or read and waiting for its process to say more."""

    __slots__ = ("error", "lines", "open", "quiet", "shape")

    def __init__(self, prefix: str, quiet: bool = False) -> None:
        self.shape = _shape(prefix)
        self.error: str | None = None  # the exception line so far (the last one wins)
        self.lines = 0
        self.open = True  # still reading its lines
        self.quiet = quiet  # logged as a warning: read through, never a failure


class Failures:
    """Reads fatal markers and tracebacks, per source (a Ray worker, a rank, the process)."""

    def __init__(self) -> None:
        self._records: dict[Any, _Record] = {}
        self._before: dict[Any, str] = {}  # source -> its line before (a logger's record)

    @property
    def reading(self) -> bool:
        """A traceback is being read: every next line matters (not only marked ones)."""
        return any(r.open for r in self._records.values())

    def read(self, source: Any, line: str) -> list[Found]:
        """What this line says of its source's failure."""
        out: list[Found] = []
        before, self._before[source] = self._before.get(source, ""), line
        record = self._records.get(source)
        if record is not None and record.open:
            if self._continue(record, line):
                return out
            record.open = False  # the traceback ended; it waits for the process to say more
        if (found := fatal(line)) is not None:
            out.append(found)
        if (at := line.find(_TRACEBACK)) >= 0:
            prefix = line[:at]
            # Python's logging prints a record's traceback on the lines after its message:
            # the level is on the line before
            level = prefix if prefix.strip() else before[:80]
            # "Scheduler hit an exception: Traceback ...": a message introduces it, and its
            # frames follow on lines of their own
            # -- or it follows a progress bar's refresh on the same line
            glued = prefix.rstrip().endswith(":") or _BAR_BEFORE.search(prefix) is not None
            shape = "" if glued else prefix
            self._records[source] = _Record(shape, quiet=bool(_QUIET_LEVELS.search(level)))
        elif (
            record is None
            and (before[:1] in (" ", "\t") or line.startswith("ray.exceptions."))
            and _EXCEPTION.match(line)
        ):
            # the end of a traceback whose head was not in the output (a pasted tail; Ray's
            # errors name themselves)
            tail = _Record("")
            tail.error, tail.open = line.strip()[:2000], False
            self._records[source] = tail
        return out

    def _continue(self, record: _Record, line: str) -> bool:
        """Whether the line is more of the traceback being read."""
        m = record.shape.match(line)
        if m is None:
            return bool(record.shape.pattern) and not line.strip()  # blank lines in between
        body = line[m.end() :]
        record.lines += 1
        if record.lines > MAX_RECORD_LINES:
            record.error = None
            return False
        stripped = body.strip()
        if not stripped or body[:1] in (" ", "\t") or stripped.startswith(_CHAINED):
            return True
        if stripped.startswith(_TRACEBACK):
            return True
        if _EXCEPTION.match(stripped) is not None:
            record.error = stripped[:2000]
            return True
        return False

    def progressed(self, source: Any) -> None:
        """The source went on working: a traceback it printed was handled."""
        record = self._records.get(source)
        if record is not None and not record.open:
            del self._records[source]

    def finish(self) -> list[tuple[Any, Found]]:
        """The output ended: each source's last traceback was its last word."""
        out = []
        for source, record in self._records.items():
            if record.error is not None and not record.quiet:
                fields = {"error": record.error, "how": "exception"}
                out.append((source, ("component.failed", fields)))
        self._records.clear()
        return out

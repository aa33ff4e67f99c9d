"""The declared-waits catalogue (`waits.toml` beside this module), loaded and matched.

Each entry is a line a framework's own source writes while work waits on something else --
its workers, the cluster's resources, a remote master -- and whose end it does not write:
where it comes from (framework, versions, source path), who waits (`component`), the phase
the waiting process is reported in, a regular expression and a literal piece of it, and how
long one line shows the wait lasting. `emitters/stalls.py` reads a matched line as a rank's
wait with the grammar of waits' ending (the next line that is neither a wait nor one of the
wait's own ends it); waits whose end the framework writes, or that name ranks, are read in
code there. Kept as data beside the fatal-error catalogue (`catalogue.toml`), loaded the same
way: `tomllib` at import, nothing heavier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from runwatch.emitters.exceptions import CatalogueError
from runwatch.emitters.tables import checked_keys, load_table

_REQUIRED = ("id", "framework", "versions", "source", "component", "phase", "literal",
             "pattern", "sample", "sample_from")  # fmt: skip
_OPTIONAL = ("every", "elapsed", "began", "lasted", "also", "dates")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
#: the units a line may state its wait's duration in (`n` and `unit` of a pattern; kubectl's
#: HumanDuration writes `s`, `m`, `h`, `d`, `y`)
_SCALE = {"s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0,
          "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0,
          "hours": 3600.0, "d": 86400.0, "y": 365 * 86400.0}  # fmt: skip
#: a run's elapsed time as Tune prints it: `[N day[s], ]H:MM:SS[.ss]` or `[Nd ][Nhr ][Nmin ]Ns`
_CLOCKED = re.compile(r"(?:(?P<d>\d+) days?, )?(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?)$")
_WORDED = re.compile(r"(?:(?P<d>\d+)d )?(?:(?P<h>\d+)hr )?(?:(?P<m>\d+)min )?(?P<s>\d+)s$")


@dataclass(frozen=True)
class Wait:
    """One line a framework writes while work waits, and what reading it needs."""

    id: str
    framework: str
    versions: str
    source: str
    component: str  # who waits: inference, trainer, worker, process
    phase: str  # the phase the waiting process is reported in
    literals: tuple[str, ...]  # one of them is in every line the pattern matches
    pattern: re.Pattern[str]
    every: float  # the seconds one line shows where the pattern states none
    elapsed: re.Pattern[str] | None  # a line saying how long the run, all of it this wait, ran
    #: a line of the framework's saying the work began after all (a trial RUNNING): the run
    #: time then is where a later wait of this kind starts, not the run's start
    began: re.Pattern[str] | None
    lasted: float  # the seconds the console must show before the wait is one
    also: re.Pattern[str] | None  # the lines the wait writes between its repeats
    #: whether the seconds a line shows date the wait's start (its rank's `since`); False
    #: where they only show that it is one, and the console's end decides it: a count over a
    #: span whose end the next lines may say (kubectl's)
    dates: bool
    sample: str
    sample_from: str

    def seconds(self, m: re.Match[str]) -> float:
        """The seconds a line the pattern matched (`m`) shows the wait lasting: its group `n`
        (or `n2`, `n3`, another wording's) in its `unit` (`unit2`, `unit3`), else `every`."""
        groups = m.groupdict()
        for n, unit in (("n", "unit"), ("n2", "unit2"), ("n3", "unit3")):
            if groups.get(n) is not None:
                return float(groups[n]) * _SCALE.get((groups.get(unit) or "s").lower(), 1.0)
        return self.every

    def ran(self, line: str) -> float | None:
        """How long the run has gone on, where the line says it (`elapsed`), else None."""
        if self.elapsed is None or (m := self.elapsed.search(line)) is None:
            return None
        said = next(t for t in (m.groupdict().values()) if t is not None)
        if (c := _CLOCKED.match(said)) is None and (c := _WORDED.match(said)) is None:
            return None
        d, h, mi, s = (float(c.group(k) or 0) for k in ("d", "h", "m", "s"))
        return d * 86400.0 + h * 3600.0 + mi * 60.0 + s


def _number(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw.get(key, 0)
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise CatalogueError(f"wait {where}: {key} must be a number of seconds, not {value!r}")
    return float(value)


def _pattern(raw: dict[str, Any], key: str, where: str) -> re.Pattern[str] | None:
    if not raw.get(key):
        return None
    try:
        return re.compile(raw[key])
    except re.error as err:
        raise CatalogueError(f"wait {where}: bad {key}: {err}") from err


def _wait(raw: dict[str, Any]) -> Wait:
    where = checked_keys(raw, "wait", _REQUIRED, _OPTIONAL)
    for key in ("component", "phase"):
        if not _NAME.match(raw[key]):
            raise CatalogueError(f"wait {where}: {key} {raw[key]!r}")
    literal = raw["literal"]
    literals = (literal,) if isinstance(literal, str) else tuple(literal)
    if not literals or not all(isinstance(x, str) and x for x in literals):
        raise CatalogueError(f"wait {where}: literal must be a string or strings")
    pattern = _pattern(raw, "pattern", where)
    assert pattern is not None  # (required)
    dates = raw.get("dates", True)
    if not isinstance(dates, bool):
        raise CatalogueError(f"wait {where}: dates must be true or false, not {dates!r}")
    elapsed = _pattern(raw, "elapsed", where)
    if elapsed is not None and not any(g.startswith("t") for g in elapsed.groupindex):
        raise CatalogueError(f"wait {where}: elapsed needs a group t")
    return Wait(
        id=raw["id"], framework=raw["framework"], versions=raw["versions"],
        source=raw["source"], component=raw["component"], phase=raw["phase"],
        literals=literals, pattern=pattern, every=_number(raw, "every", where),
        elapsed=elapsed, began=_pattern(raw, "began", where), lasted=_number(raw, "lasted", where),
        also=_pattern(raw, "also", where), dates=dates, sample=raw["sample"],
        sample_from=raw["sample_from"],
    )  # fmt: skip


def load(text: str | None = None) -> tuple[Wait, ...]:
    """The waits of `text` (TOML), by default the shipped catalogue, in order."""
    return load_table(text, "waits.toml", "wait", _wait, "waits catalogue")


class DeclaredWaits:
    """The catalogue's waits, compiled once: a literal prefilter, then each one's pattern."""

    def __init__(self, waits: tuple[Wait, ...]) -> None:
        self.waits = waits
        #: what the scanner must show the reader: every literal, and the lines that say how
        #: long a run went on (Tune's, before its status names the trials pending) and whether
        #: its trials began (`began`)
        self.markers: tuple[str, ...] = tuple(
            sorted(
                {x for w in waits for x in w.literals}
                | {"running for ", "running time: ", "Number of trials: "}
            )
        )

        #: any literal, in one pass: most lines hold none (the cost of a line read is this)
        self._any = re.compile("|".join(re.escape(x) for w in waits for x in w.literals))

    def match(self, line: str) -> tuple[Wait, re.Match[str]] | None:
        """The first wait (in the catalogue's order) the line declares, and its match."""
        if not self.waits or self._any.search(line) is None:
            return None
        for w in self.waits:
            if any(x in line for x in w.literals) and (m := w.pattern.search(line)):
                return w, m
        return None

    def began(self, line: str) -> bool:
        """Whether the line says the work of a wait that lasts its whole run began (`began`)."""
        return any(w.began is not None and w.began.search(line) for w in self.waits)


DECLARED = DeclaredWaits(load())

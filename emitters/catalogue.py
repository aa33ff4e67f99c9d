"""The fatal-error catalogue (`catalogue.toml` beside this module), loaded and matched.

Each signature is a line a framework's own source writes when a component of a job is dead,
or a collective or a weight update failed: where it comes from (framework, versions, source
path), what it implicates, a regular expression for it, and a literal piece of it. The
literals are what `runwatch watch`'s scanner finds in the bytes (one Aho-Corasick pass for
all of them); `Catalogue.match` looks only at the signatures whose literal a line holds, so
the number of signatures costs the scanner nothing and a line none of them fits costs one
automaton pass. The data is read with `tomllib` at import: nothing heavier is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick

from runwatch.emitters.exceptions import CatalogueError
from runwatch.emitters.prefixes import GLOG_YEAR
from runwatch.emitters.tables import checked_keys, load_table

MEANINGS = ("fatal", "collective", "weight_update", "remote_call", "abort", "signalled")
#: the levels a logger prefix may name, lowest first (`WARN` is Python's alias)
LEVELS = ("debug", "info", "warning", "error")
_LEVEL_WORD = re.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")
#: glog's level letter before its month and day (`W0410 22:34:13.729731`, torch's `[W602
#: 11:18:52`; absl logging writes the same; glog 0.6 on puts the year first, `GLOG_YEAR`)
_GLOG_LEVEL = re.compile(rf"(?:^|[\s\[\]:])([IWEF]){GLOG_YEAR}\d{{3,4}} \d\d:\d\d:\d\d")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}
_REQUIRED = ("id", "framework", "versions", "source", "component", "meaning", "literal",
             "pattern", "sample", "sample_from")  # fmt: skip
_OPTIONAL = ("level", "unless", "survivable", "at_exit")
_COMPONENT = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class Signature:
    """One line a framework writes when a component dies or a collective or update fails."""

    id: str
    framework: str
    versions: str
    source: str
    component: str  # what it implicates; "process" for whichever process printed it
    meaning: str  # one of MEANINGS
    literals: tuple[str, ...]  # one of them is in every line the pattern matches
    pattern: re.Pattern[str]
    level: str  # the lowest level the source writes it at
    unless: re.Pattern[str] | None
    sample: str
    sample_from: str  # a fixture's path, or "rendered" (the format string, sample values)
    #: the death of a child its parent may survive (a DataLoader worker at an epoch's end): a
    #: failure only when the process makes no more progress after it, as a traceback
    survivable: bool = False
    #: a monitor's report of its child's end that it also writes when the program owning the
    #: child exits (multiprocessing's atexit terminates daemonic children before the owner's
    #: finaliser runs): no failure once the work the console counted was done (`LineParser`)
    at_exit: bool = False


def _signature(raw: dict[str, Any]) -> Signature:
    where = checked_keys(raw, "signature", _REQUIRED, _OPTIONAL)
    if raw["meaning"] not in MEANINGS:
        raise CatalogueError(f"signature {where}: meaning {raw['meaning']!r} not in {MEANINGS}")
    if not _COMPONENT.match(raw["component"]):
        raise CatalogueError(f"signature {where}: component {raw['component']!r}")
    level = raw.get("level", "error")
    if level not in LEVELS:
        raise CatalogueError(f"signature {where}: level {level!r} not in {LEVELS}")
    literal = raw["literal"]
    literals = (literal,) if isinstance(literal, str) else tuple(literal)
    if not literals or not all(isinstance(x, str) and x for x in literals):
        raise CatalogueError(f"signature {where}: literal must be a string or strings")
    try:
        pattern = re.compile(raw["pattern"])
        unless = re.compile(raw["unless"]) if raw.get("unless") else None
    except re.error as err:
        raise CatalogueError(f"signature {where}: bad pattern: {err}") from err
    return Signature(
        id=raw["id"], framework=raw["framework"], versions=raw["versions"],
        source=raw["source"], component=raw["component"], meaning=raw["meaning"],
        literals=literals, pattern=pattern, level=level, unless=unless,
        sample=raw["sample"], sample_from=raw["sample_from"],
        survivable=bool(raw.get("survivable", False)),
        at_exit=bool(raw.get("at_exit", False)),
    )  # fmt: skip


def load(text: str | None = None) -> tuple[Signature, ...]:
    """The signatures of `text` (TOML), by default the shipped catalogue, in order."""
    return load_table(text, "catalogue.toml", "signature", _signature, "catalogue")


@dataclass(frozen=True)
class Read:
    """A framework whose source was read for the catalogue and gives it nothing (more): its
    components die by an uncaught traceback, or through the engines, Ray and torch it runs
    on. docs/catalogue.md lists them, so a reader knows it was looked at."""

    id: str
    framework: str
    versions: str
    source: str
    found: str  # what the source writes instead of a line of its own, in a sentence or two


_READ_FIELDS = ("id", "framework", "versions", "source", "found")


def _read(raw: dict[str, Any]) -> Read:
    checked_keys(raw, "read", _READ_FIELDS, kinds=str)
    return Read(**{k: raw[k] for k in _READ_FIELDS})


def load_read(text: str | None = None) -> tuple[Read, ...]:
    """The `[[read]]` entries of `text` (TOML), by default the shipped catalogue's: the
    frameworks read with nothing to add. Not loaded at import: only the docs need them."""
    return load_table(text, "catalogue.toml", "read", _read, "catalogue")


def quieter(prefix: str, level: str) -> bool:
    """Whether the logger prefix before a match names a level below `level` (a warning or a
    retry that mentions the failure, not the failure): a level's word, or glog's letter."""
    m = _LEVEL_WORD.search(prefix)
    if m is not None:
        word = m.group(1)
    elif (g := _GLOG_LEVEL.search(prefix)) is not None:
        word = _GLOG_LEVELS[g.group(1)]
    else:
        return False
    said = {"WARN": "warning", "CRITICAL": "error", "FATAL": "error"}.get(word)
    return LEVELS.index(said or word.lower()) < LEVELS.index(level)


class Catalogue:
    """The signatures, compiled once: a literal prefilter, then each candidate's pattern."""

    def __init__(self, signatures: tuple[Signature, ...]) -> None:
        self.signatures = signatures
        by_literal: dict[str, list[int]] = {}
        for i, s in enumerate(signatures):
            for literal in s.literals:
                by_literal.setdefault(literal, []).append(i)
        #: every literal once, for the scanner's markers
        self.literals: tuple[str, ...] = tuple(sorted(by_literal))
        self._ids = [tuple(by_literal[x]) for x in self.literals]
        self._finder = AhoCorasick(list(self.literals))

    def match(self, line: str) -> Signature | None:
        """The first signature (in the catalogue's order) the line is a failure of."""
        hits = self._finder.find_matches_as_indexes(line, overlapping=True)
        if not hits:
            return None
        candidates = sorted({i for literal, _, _ in hits for i in self._ids[literal]})
        for i in candidates:
            s = self.signatures[i]
            m = s.pattern.search(line)
            if m is None or (s.unless is not None and s.unless.search(line)):
                continue
            if s.level != "debug" and quieter(line[: m.start()], s.level):
                continue
            return s
        return None


CATALOGUE = Catalogue(load())

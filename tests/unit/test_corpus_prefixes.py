"""A launcher's prefix changes nothing a console says (issue 41: read any console by its
grammar). Each development excerpt of every corpus, read by `runwatch diagnose` as its user
posted it and again with a launcher's prefix before each of its lines, must raise the same
rules: `docker compose`'s `NAME  | ` (docker/compose cmd/formatter/logs.go) and torchrun's
`--tee` `[default0]:` (torch/distributed/elastic/multiprocessing/api.py) -- before each line
the process wrote, not before the rest of one a terminal wrapped. A log collector's time of
arrival (`kubectl logs --timestamps`' RFC3339Nano, a second a line here) is a clock of its own,
which the rules that time decides then read: the others must not change. A reader that looks
at a line's start (a traceback's head, a timestamp, a wrapped watchdog line's rest, Ray's
prefix) without the prefixes taken off fails here. The held-out parts are not read."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from runwatch.diagnose import diagnose
from runwatch.emitters.wraps import unwrapped
from scripts.corpus_report import CONSOLES, CORPORA, DAY, excerpt_lines

#: what each launcher writes before every line of the process's output
PREFIXES = {"compose": b"trainer-1  | ", "tee": b"[default0]:", "kubectl": b"%s "}
#: the rules a line's time does not decide
TIMELESS = frozenset({"component_failed", "collective_timeout", "non_finite_metric"})


def _prefix(prefix: bytes, number: int) -> bytes:
    if b"%s" not in prefix:
        return prefix
    hms = b"%02d:%02d:%02d" % (10 + number // 3600, number // 60 % 60, number % 60)
    return prefix % (b"2024-05-01T" + hms + b".123456789Z")


@cache  # (each excerpt's plain reading, once for every launcher)
def _fired(path: Path, prefix: bytes) -> tuple[str, ...]:
    # a terminal that hard-wrapped the launcher's output cut its lines after the prefix: the
    # pieces after a line's first have none (`wraps.unwrapped` says which those are)
    plain = [(n, line.decode("utf-8", "replace").rstrip("\r\n")) for n, line in excerpt_lines(path)]
    firsts = {number for number, _ in unwrapped(plain)}

    def lines(p: Path) -> Iterator[tuple[int, bytes]]:
        for number, line in excerpt_lines(p):
            yield number, (_prefix(prefix, number) if number in firsts else b"") + line

    found = diagnose([path], day=DAY, lines=lines)
    return tuple(sorted({a.rule for a in found.alerts if a.state == "firing"}))


def _excerpts(corpus: str) -> list[Path]:
    labels = tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text(encoding="utf-8"))
    return [CONSOLES / corpus / "dev" / f"{ident}.log" for ident in labels]


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("launcher", sorted(PREFIXES))
def test_a_launcher_s_prefix_changes_no_alert(corpus: str, launcher: str) -> None:
    prefix = PREFIXES[launcher]
    kept = TIMELESS if b"%s" in prefix else None  # (a clock of its own: the timeless rules)

    def rules(fired: tuple[str, ...]) -> set[str]:
        return {rule for rule in fired if kept is None or rule in kept}

    changed = {
        path.stem: (plain, prefixed)
        for path in _excerpts(corpus)
        if (plain := rules(_fired(path, b""))) != (prefixed := rules(_fired(path, prefix)))
    }
    assert changed == {}

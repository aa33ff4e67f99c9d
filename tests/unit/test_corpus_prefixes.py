"""A launcher's prefix changes nothing a console says (issue 41: read any console by its
grammar). Each development excerpt of every corpus, read by `runwatch diagnose` as its user
posted it and again with a launcher's prefix before each of its lines, must raise the same
rules: `docker compose`'s `NAME  | ` (docker/compose cmd/formatter/logs.go), torchrun's
`--tee` `[default0]:` (torch/distributed/elastic/multiprocessing/api.py), `srun --label`'s
task id (slurm src/common/write_labelled_message.c) and `kubectl logs --prefix`'s pod
(kubectl pkg/cmd/logs/logs.go) -- before each line the process wrote, not before the rest of
one a terminal wrapped. A log collector's time of arrival (`kubectl logs --timestamps`'
RFC3339Nano, the journal's `Dec 02 05:19:57 HOST IDENT[PID]: `) is the time the line says
where it says one (as `runwatch diagnose` dates it, else the clock the waits read in it),
else the time of the line before, and never earlier than that (a collector's clock does not
go back): then every rule holds, those its clock decides too (`stalls`' clock reads the
collector's time first, as diagnose does). An excerpt that says no time at all gets a second a
line: a clock of its own, which the rules that time decides then read -- the others must not
change. A reader that looks at a line's start (a traceback's head, a timestamp, a wrapped
watchdog line's rest, Ray's prefix) without the prefixes taken off fails here. The held-out
parts are not read."""

from __future__ import annotations

import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

from runwatch.diagnose import diagnose, stamp, time_of_day
from runwatch.emitters.console import LineParser
from runwatch.emitters.logparse import tqdm_bar
from runwatch.emitters.prefixes import launcher_prefix, time_places
from runwatch.emitters.stalls import _CLOCK
from runwatch.emitters.wraps import unwrapped
from scripts.corpus_report import CONSOLES, CORPORA, DAY, excerpt_lines

#: what each launcher writes before every line of the process's output
PREFIXES = {
    "compose": b"trainer-1  | ",
    "tee": b"[default0]:",
    "kubectl": b"%s ",
    # (`srun --label`'s task id; `kubectl logs --prefix`'s pod; the journal's local time,
    # host and identifier -- a clock of its own, as the collector's)
    "srun": b"0: ",
    "kubectl-prefix": b"[pod/trainer-0/main] ",
    "journal": b"%j node-3 python3[1234]: ",
}
#: the rules a line's time does not decide
TIMELESS = frozenset({"component_failed", "collective_timeout", "non_finite_metric"})


def _plain(path: Path) -> list[tuple[int, str]]:
    return [(n, line.decode("utf-8", "replace").rstrip("\r\n")) for n, line in excerpt_lines(path)]


@cache
def _arrivals(path: Path) -> dict[int, float] | None:
    """When a collector got each line (`number` -> seconds): the time the line says (module
    docstring), else the line before's, never before a line before's; None for an excerpt
    that says no time."""
    parser, now, midnight = LineParser(), None, datetime(*DAY.timetuple()[:3], tzinfo=UTC)
    out: dict[int, float | None] = {}
    for number, line in _plain(path):
        body, _ = parser.read(line)
        for text in time_places(body):
            if (ts := stamp(text, DAY.year, 0.0)) is not None:
                now, midnight = ts, datetime.fromtimestamp(ts - ts % 86400, UTC)
                break
            if (seconds := time_of_day(text)) is not None:
                now = midnight.timestamp() + seconds
                break
        else:  # (a clock only the waits read: glog's `I1127 19:18:22.167176`; no bar's)
            rest = launcher_prefix(body)[0]
            clock = _CLOCK.search(rest, 0, 40) if tqdm_bar(rest) is None else None
            if clock is not None and clock.group(1) is not None and int(clock.group(1)) < 24:
                h, m, sec = (int(g) for g in clock.groups()[:3])
                now = midnight.timestamp() + h * 3600 + m * 60 + sec
        out[number] = now
    first = next((ts for ts in out.values() if ts is not None), None)
    if first is None:
        return None
    # (a collector's clock does not go back where the lines' do: Ray's actors out of order, or
    # a year the line leaves out read as another than the full dates around it say)
    arrived, latest = {}, first
    for number, ts in out.items():
        latest = latest if ts is None else max(latest, ts)
        arrived[number] = latest
    return arrived


def _clocked(prefix: bytes) -> bool:
    return b"%s" in prefix or b"%j" in prefix


def _prefix(prefix: bytes, number: int, path: Path) -> bytes:
    if not _clocked(prefix):
        return prefix
    arrived = _arrivals(path)
    at = arrived[number] if arrived is not None else 1714557600 + number  # (a second a line)
    if b"%j" in prefix:  # (the journal's: no year, no fraction)
        return prefix.replace(b"%j", time.strftime("%b %d %H:%M:%S", time.gmtime(at)).encode())
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)).encode()
    return prefix % (when + b".123456789Z")


@cache  # (each excerpt's plain reading, once for every launcher)
def _fired(path: Path, prefix: bytes) -> tuple[str, ...]:
    # a terminal that hard-wrapped the launcher's output cut its lines after the prefix: the
    # pieces after a line's first have none (`wraps.unwrapped` says which those are)
    firsts = {number for number, _ in unwrapped(_plain(path))}

    def lines(p: Path) -> Iterator[tuple[int, bytes]]:
        for number, line in excerpt_lines(p):
            yield number, (_prefix(prefix, number, p) if number in firsts else b"") + line

    found = diagnose([path], day=DAY, lines=lines)
    return tuple(sorted({a.rule for a in found.alerts if a.state == "firing"}))


def _excerpts(corpus: str) -> list[Path]:
    labels = tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text(encoding="utf-8"))
    return [CONSOLES / corpus / "dev" / f"{ident}.log" for ident in labels]


@pytest.mark.slow  # (every development excerpt, four times: `make test`, not the unit loop)
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("launcher", sorted(PREFIXES))
def test_a_launcher_s_prefix_changes_no_alert(corpus: str, launcher: str) -> None:
    prefix = PREFIXES[launcher]

    def rules(path: Path, fired: tuple[str, ...]) -> set[str]:
        # (an excerpt that says no time, under a collector's: a clock of its own)
        own = _clocked(prefix) and _arrivals(path) is None
        return {rule for rule in fired if not own or rule in TIMELESS}

    changed = {
        path.stem: (plain, prefixed)
        for path in _excerpts(corpus)
        if (plain := rules(path, _fired(path, b"")))
        != (prefixed := rules(path, _fired(path, prefix)))
    }
    assert changed == {}

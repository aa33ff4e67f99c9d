"""`runwatch diagnose FILE...`: a run's timeline and alerts from the logs it left
(runwatch/diagnose.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import date
from pathlib import Path
from typing import Any

from runwatch import configfile
from runwatch.commands.lines import must_exist, read_lines
from runwatch.console import alert_line, printable
from runwatch.diagnose import Diagnosis, clock, diagnose, table
from runwatch.exceptions import CommandError
from runwatch.logs import say

#: what diagnose reads, said when it finds none of it
READS = """\
runwatch reads: tqdm progress bars; any metric line with a step (key: value pairs in any
syntax -- verl's, PRIME-RL's, Megatron's iteration lines, mmengine's, ...), printed dicts
({'loss': ...}), tables and bar postfixes; vLLM and SGLang stats lines; torch's NCCL
watchdog, gloo and c10d-store timeouts; uncaught Python tracebacks (with or without their
head) and the fatal lines of the catalogue (docs/catalogue.md) -- under Ray's (Name pid=N)
prefix, torchrun's [rankN]:, Open MPI's [1,N]<stdout>:, srun's label, pdsh's host, kubectl's
[pod/...], the journal's or a launcher's [timestamp] too, and pasted indented or wrapped."""

HELP = f"""\
Read the logs a run left -- a driver's stderr with tqdm bars, a vLLM or SGLang server's
stdout, a verl console, a Ray driver's output, an AReaL console, PRIME-RL's JSON logs, a
TRL run's output, a crash someone pasted -- place what they show in time (the timestamps the
lines carry; tqdm's elapsed field where nothing else says; `--date` for logs that carry only
the time of day; lines with no time at all in file order, just before the first time the
file says, or ending at the time it was last written), and print, per step: when it started
and ended, when its rollout's trajectories were done, how long the last one ran alone, and
how long inference sat idle while trajectories waited; then the alert transitions the rules
raise on the same events, as `runwatch serve` would have said them.

{READS}

  runwatch diagnose driver.err vllm.out
"""


def _notes(found: Diagnosis) -> str:
    """The lines that looked like metrics or failures and gave no event, and why: what a
    user can report when runwatch cannot place a console."""
    if not found.notes:
        return ""
    head = "lines that looked like metrics, failures or waits, and why they gave no event:"
    lines = ["", "", head]
    for where, why, text in found.notes:
        lines.append(f"  {where}: {why}")
        if text:
            lines.append(f"    {printable(text)}")
    return "\n".join(lines)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diagnose",
        help="per-step timeline and alerts from existing log files (after the fact)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="log files of one run")
    p.add_argument("--run", default="diagnose", help="run id in the alerts (default diagnose)")
    p.add_argument("--config", metavar="PATH", help="rules config (TOML), as for replay")
    p.add_argument("--year", type=int, help="year of timestamps without one (vLLM's `03-14 "
                   "14:01:00`; default: the first full timestamp's, else this year)")  # fmt: skip
    p.add_argument("--date", type=_day, metavar="YYYY-MM-DD",
                   help="day of the first timestamp that is a time of day alone (PRIME-RL's "
                        "`14:01:00`; default: the first full timestamp's, else the day the "
                        "file was last written)")  # fmt: skip
    p.add_argument("--utc-offset", type=float, default=0.0, metavar="HOURS",
                   help="the logs' clock is UTC + HOURS (default 0)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    must_exist(args.files)
    paths = [Path(f) for f in args.files]
    config = configfile.rules(args.config)

    def refused(where: str, reason: str) -> None:
        print(f"{where}: {reason}", file=sys.stderr)

    with ExitStack() as stack:  # a progress bar per file, at a terminal

        def lines(path: Path) -> Iterator[tuple[int, bytes]]:
            return ((n, raw) for _, n, raw in read_lines([str(path)], stack, progress=True))

        found = diagnose(paths, run=args.run, config=config, year=args.year, day=args.date,
                         offset=args.utc_offset * 3600, on_refused=refused,
                         lines=lines)  # fmt: skip
    if not found.events or found.first is None or found.last is None:
        raise CommandError(f"nothing runwatch reads in these files.\n{READS}{_notes(found)}",
                           status=1)  # fmt: skip
    files = f"{len(paths)} file" + ("s" if len(paths) != 1 else "")
    print(f"{len(found.events):,} events from {files}, "
          f"{clock(found.first)} to {clock(found.last)} UTC")  # fmt: skip
    for path, count, last in found.after_last:
        print(f"{path.name}: {count:,} events from lines after its last time ({clock(last)} "
              f"UTC), placed in file order just after it")  # fmt: skip
    for path, count, placed_at in found.untimed:
        where = (f"ending at the time the file was last written ({clock(placed_at)} UTC)"
                 if placed_at is not None else "just before the first time it says")  # fmt: skip
        print(f"{path.name}: {count:,} events from lines without a time, placed in file order, "
              f"{where}")  # fmt: skip
    if found.steps:
        print()
        for line in table(found.steps, found.last):
            print(line)
    print()
    if not found.alerts:
        print("no alerts" + _notes(found))
    for alert in found.alerts:
        print(printable(alert_line(alert)))
    if found.unread:
        say(f"{found.unread} events could not be applied (above)")
    return 0

"""`runwatch replay FILE... [--config PATH] [--until TS]` (contract §5)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

import orjson

from runwatch import configfile
from runwatch.commands.lines import must_exist, read_lines, report_invalid
from runwatch.logs import say
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.engine import Engine
from runwatch.stream.refused import Refused
from runwatch.stream.replay import DEFAULT_WINDOW, replay
from runwatch.timeparse import time_arg

HELP = """\
Read events (JSON Lines; `-` is standard input) in the order given, run the rules on event
time, and write every alert transition as JSON Lines to standard output, in the order they
happened. Invalid lines are reported on standard error (file:line: reason) and skipped; the
exit status is 0 whenever the input could be read.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="run the rules over recorded events and print alert transitions",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines event file, or -")
    p.add_argument(
        "--config", metavar="PATH", help="rules config (TOML); built-in defaults if absent"
    )
    p.add_argument(
        "--until",
        metavar="TS",
        type=time_arg,
        help="after the last event, advance time to TS (epoch seconds or ISO 8601) so that "
        "conditions still holding then fire",
    )
    p.add_argument(
        "--reorder-window",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_WINDOW,
        help="events up to this many seconds out of order are applied in order "
        f"(default {DEFAULT_WINDOW:g})",
    )
    # its work is done when `run` returns: the program ends without freeing it (`cli`); it
    # loads no library that logs, so `logging` waits for its first message (`logs.setup`)
    p.set_defaults(func=run, exit_at_once=True, lazy_logging=True)


def run(args: argparse.Namespace) -> int:
    config = configfile.rules(args.config)
    must_exist(args.files)
    invalid = 0

    def report(bad: Refused) -> None:
        nonlocal invalid
        invalid += 1
        report_invalid(bad)

    engine = Engine(config)
    out = sys.stdout.buffer
    transitions = 0
    with ExitStack() as stack:
        stack.enter_context(tuned_for_consuming())  # a replay makes no cycles worth a walk
        lines = read_lines(args.files, stack, progress=True)
        for alert in replay(
            lines, engine, until=args.until, window=args.reorder_window, on_invalid=report
        ):
            out.write(orjson.dumps(alert.to_dict()) + b"\n")
            out.flush()  # out the moment it is made: a reader of a live pipe waits on it
            transitions += 1
    out.flush()
    if invalid or sys.stderr.isatty():
        say(f"{transitions} alert transitions; {invalid} invalid lines skipped")
    return 0

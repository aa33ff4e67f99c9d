"""`runwatch check FILE...`: is this what runwatch will accept? Every line of a JSON Lines file
checked against the contract -- the models, the bounds (64-bit integers, valid Unicode,
identifiers without control characters, nesting, size), a plausible `ts`, a usable
`run.started.config` -- and every problem printed with its line. What a person writing an
emitter in another language reaches for first.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

from runwatch.commands.lines import must_exist, read_lines
from runwatch.logs import say

HELP = (
    __doc__
    + """
Prints `FILE:LINE: reason` for each line runwatch would refuse, then how many lines were
valid. Exit status: 0 when every line is valid, 1 when some are not, 2 when a file cannot be
read or the config is bad.
"""
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="check that a file of events is what runwatch accepts, line by line",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines event file, or -")
    p.add_argument(
        "--config",
        metavar="PATH",
        help="rules config to check run.started.config against (default: the built-in rules)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runwatch import configfile
    from runwatch.stream.check import check_lines

    config = configfile.rules(args.config)
    must_exist(args.files)
    with ExitStack() as stack:
        result = check_lines(read_lines(args.files, stack, progress=True), config)
        for bad in result.invalid:
            print(f"{bad.where}: {bad.reason}", flush=False)
    sys.stdout.flush()
    say(f"{result.lines} lines: {result.valid} valid, {len(result.invalid)} invalid")
    return 1 if result.invalid else 0

"""The `runwatch` console script: one subcommand per module, registered here.

Command modules pull heavy libraries (DuckDB, Faust, aiokafka, prometheus-client), so only
the module of the command being run is imported; `runwatch --help` (or an unknown command)
imports them all to list every command. `runwatch watch -- python train.py` starts in
about 0.3 s instead of 0.9 s.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from runwatch import logs
from runwatch.emitters.exceptions import RunwatchError

#: command -> the module (under runwatch.commands) whose `register(sub)` defines it
COMMANDS: dict[str, str] = {
    "replay": "replay",
    "demo": "demo",
    "incidents": "demo",
    "kafka": "kafka",
    "worker": "worker",
    "alerts": "worker",
    "sink": "store",
    "ingest": "store",
    "export": "store",
    "sql": "query",
    "runs": "query",
    "show": "query",
    "backtest": "backtest",
    "notify": "notify",
    "silence": "silence",
    "serve": "serve",
    "simulate": "simulate",
    "watch": "watch",
    "scrape": "scrape",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with `command`'s module registered, or every module when None."""
    parser = argparse.ArgumentParser(
        prog="runwatch",
        description="Run state and alerting for LLM RL training clusters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in wanted:
        importlib.import_module(f"runwatch.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    command = args_in[0] if args_in and not args_in[0].startswith("-") else None
    args = build_parser(command).parse_args(args_in)
    name = " ".join(filter(None, (command, getattr(args, "kafka_command", None))))
    logs.setup(name)
    try:
        return int(args.func(args) or 0)
    except RunwatchError as err:  # ours, worded for the terminal: one line, no traceback
        logging.getLogger(logs.LOGGER).error("%s", err)
        return int(getattr(err, "status", 2))


if __name__ == "__main__":
    sys.exit(main())

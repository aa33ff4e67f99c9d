"""The `runwatch` console script: one subcommand per module, registered here.

Command modules pull heavy libraries (DuckDB, Faust, aiokafka, prometheus-client), so only
the module of the command being run is imported; `runwatch --help` (or an unknown command)
imports them all to list every command. `runwatch watch -- python train.py` starts
without loading any of them.

A trainer's install is light (`pip install runwatch`: pydantic and kafka-python): a command
whose libraries come with an extra says which extra, in one line (`missing_extra`), and
`--help` lists every command even when some cannot run here.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from runwatch import logs
from runwatch.emitters.exceptions import RunwatchError
from runwatch.exceptions import MissingExtra
from runwatch.stream.suggest import did_you_mean

#: command -> the module (under runwatch.commands) whose `register(sub)` defines it
COMMANDS: dict[str, str] = {
    "replay": "replay",
    "check": "check",
    "demo": "demo",
    "scenarios": "demo",
    "incidents": "demo",  # scenarios' former name, an alias
    "kafka": "kafka",
    "worker": "worker",
    "fleet": "worker",
    "alerts": "alerts",
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
    "spool": "spool",
    "resume": "resume",
    "diagnose": "diagnose",
}


#: the third-party modules of the extras (pyproject.toml), by the extra that installs them
EXTRAS: dict[str, str] = {
    "msgspec": "stream", "orjson": "stream", "rich": "stream", "waitress": "stream",
    "duckdb": "store", "pyarrow": "store",
    "faust": "kafka", "aiokafka": "kafka", "mode": "kafka",
    "slack_sdk": "slack", "prometheus_client": "metrics", "torch": "torch",
}  # fmt: skip


#: command modules that need an extra which brings others along (pyproject.toml: `store`
#: and `kafka` include `stream`): a missing library of any of them names that extra, so
#: one install makes the command work, whichever import failed first
NEEDS: dict[str, tuple[str, frozenset[str]]] = {
    "store": ("store", frozenset({"stream", "store"})),
    "query": ("store", frozenset({"stream", "store"})),
    "backtest": ("store", frozenset({"stream", "store"})),
    "worker": ("kafka", frozenset({"stream", "kafka"})),
}


def missing_extra(err: ModuleNotFoundError, command_module: str = "") -> MissingExtra | None:
    """The one line (after the command's name) for a library an extra installs; None for
    any other missing module."""
    module = (err.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    whole, covers = NEEDS.get(command_module, (extra, frozenset()))
    if extra in covers:
        extra = whole
    return MissingExtra(
        f"needs the '{extra}' extra ({module} is not installed): "
        f"pip install 'runwatch[{extra}]' (or 'runwatch[all]' for every command)"
    )


#: commands that cannot run in this install (their extra is missing), with the reason
STUBS: dict[str, MissingExtra] = {}


class Parser(argparse.ArgumentParser):
    """argparse's parser, saying what a mistyped name was most likely meant to be: a command
    or a choice (through argparse's own check of a value), and a flag -- named by the
    (sub)command's parser, with its usage, not the top-level one's."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            hint = did_you_mean(str(value), choices)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose "
                                         f"from {', '.join(map(repr, choices))})")  # fmt: skip

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            which = self._chosen(parsed, list(args or ()))
            flags = [f for f in which._option_string_actions if f.startswith("--")]
            first = next((w for w in extras if w.startswith("-")), extras[0]).split("=")[0]
            which.error(f"unrecognized arguments: {' '.join(extras)}"
                        + did_you_mean(first, flags))  # fmt: skip
        return parsed

    def _chosen(self, parsed: argparse.Namespace, words: list[str]) -> argparse.ArgumentParser:
        """The parser of the (sub)command the words chose, deepest first."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(parsed, action.dest, None)
                if not isinstance(name, str) or name not in action.choices:
                    # its dest was taken by the subcommand's own (`watch`'s CMD): the word
                    name = next((w for w in words if w in action.choices), "")
                sub = action.choices.get(name)
                if isinstance(sub, Parser):
                    return sub._chosen(parsed, words[words.index(name) + 1 :])
        return self


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with `command`'s module registered, or every module when None. A module
    whose extra is not installed is registered as a stub that says so (`STUBS`)."""
    parser = Parser(
        prog="runwatch",
        description="Run state and alerting for LLM RL training clusters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in wanted:
        try:
            module = importlib.import_module(f"runwatch.commands.{name}")
        except ModuleNotFoundError as err:
            for cmd in [c for c, m in COMMANDS.items() if m == name]:
                problem = missing_extra(err, name)
                if problem is None:
                    raise
                _stub(sub, cmd, problem)
            continue
        module.register(sub)
    return parser


def _stub(sub: Any, command: str, problem: MissingExtra) -> None:
    """A command that cannot run in this install: listed, and says why when run."""
    STUBS[command] = problem
    extra = str(problem).split("'")[1]
    sub.add_parser(command, help=f"(needs the '{extra}' extra)",
                   description=f"runwatch {command} {problem}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    command = args_in[0] if args_in and not args_in[0].startswith("-") else None
    # Importing a command's modules allocates tens of thousands of objects (pydantic models,
    # dataclasses), none of them garbage worth a walk: the collector's walks would cost a
    # command's start several per cent (bench/RESULTS.md, "replay"), so it waits for them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = build_parser(command)
    finally:
        if collecting:
            gc.enable()
    if not args_in:  # `runwatch` alone: what it can do, not "COMMAND is required"
        parser.print_help(sys.stderr)
        return 2
    if command in STUBS and not {"-h", "--help"} & set(args_in[1:]):
        logs.setup(command)  # its flags are unknown here: say what it needs, whatever they are
        logs.error(str(STUBS[command]))
        return STUBS[command].status
    args = _undashed(parser.parse_args(_dashed(parser, command, args_in)))
    name = " ".join(filter(None, (command, getattr(args, "kafka_command", None))))
    # (a command that loads no library that logs sets up at its first message: `logs`)
    logs.setup(name, lazily=getattr(args, "lazy_logging", False))
    try:
        try:
            status = int(args.func(args) or 0)
            if argv is None and getattr(args, "exit_at_once", False):
                _exit_at_once(status)
            return status
        except ModuleNotFoundError as err:  # a library of an extra, imported when needed
            problem = missing_extra(err, COMMANDS.get(command or "", ""))
            if problem is None:
                raise
            raise problem from None
    except RunwatchError as err:  # ours, worded for the terminal: one line, no traceback
        logs.error(str(err))
        return err.status
    except BrokenPipeError:  # `runwatch ... | head`: the reader has what it wanted
        # Python would complain again flushing stdout at exit; point it at /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command a closed pipe stopped


def _exit_at_once(status: int) -> None:
    """End the process now, its output written: for a command run as the program (`main`
    called with no argv) that marks itself `exit_at_once` -- one whose work is done when it
    returns, with no thread, child or file left to close. An interpreter's ordinary exit frees
    every object one by one (a replay's run states, the ids it has seen, every module), work
    whose only effect is memory the system takes back anyway (bench/RESULTS.md, "replay")."""
    sys.stdout.flush()  # (a closed pipe raises here, as at an ordinary exit: main says so)
    sys.stderr.flush()
    os._exit(status)


#: marks a value that begins with "-" (a run id such as "-3ab"), so argparse does not take it
#: for an option; removed again once parsed
_MARK = "\x00"


def _dashed(parser: argparse.ArgumentParser, command: str | None, argv: list[str]) -> list[str]:
    """Run ids may begin with "-" (contract §1): a word that does so (one dash) and is no
    option of the command is a value. Words after "--" are left to argparse, which passes
    them as they are, and so are negative numbers, which argparse takes as values itself
    (marked, `--fetch-wait -1` would be refused as the float "\\x00-1")."""
    sub = _subparser(parser, command)
    if sub is None:
        return argv
    options = set(sub._option_string_actions)
    number = sub._negative_number_matcher
    out: list[str] = []
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        name = word.split("=", 1)[0]
        # "--word" stays an option (a mistyped one is better said so)
        is_value = word.startswith("-") and word[1:2] not in ("", "-") and name not in options
        is_value = is_value and not number.match(word)
        out.append(_MARK + word if is_value and i > 0 else word)
    return out


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> Any:
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        choices = getattr(action, "choices", None) or {}
        if command in choices:
            return choices[command]
    return None


def _undashed(args: argparse.Namespace) -> argparse.Namespace:
    for name, value in vars(args).items():
        if isinstance(value, str) and value.startswith(_MARK):
            setattr(args, name, value[1:])
        elif isinstance(value, list):
            setattr(args, name, [v[1:] if isinstance(v, str) and v.startswith(_MARK) else v
                                 for v in value])  # fmt: skip
    return args


if __name__ == "__main__":
    sys.exit(main())

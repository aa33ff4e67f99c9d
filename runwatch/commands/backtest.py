"""`runwatch backtest --db PATH --config rules.toml [--run RUN] [--since TS]`.

Re-runs the rules (the engine the live worker runs) over stored events and prints the alert
transitions the config would have produced next to what was recorded: moved, added, removed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from runwatch import configfile
from runwatch.commands import given_time
from runwatch.commands.query import add_db_args
from runwatch.exceptions import CommandError
from runwatch.store.backtest import Backtest, Change, run_backtest
from runwatch.store.store import Store
from runwatch.stream.rules.base import fmt_duration
from runwatch.timeparse import iso


def register(sub: Any) -> None:
    p = sub.add_parser(
        "backtest",
        help="what a rules config would have raised on stored history, vs what was raised",
        description="Replay stored events through the rules of --config (the same engine as "
        "live) and compare the alert transitions with those recorded: moved (with how far, "
        "in time and in steps), added, removed. Each run is replayed from its start; with "
        "--since, only transitions at or after it are compared.",
    )
    add_db_args(p)
    p.add_argument("--config", metavar="PATH", help="rules config (TOML); defaults if absent")
    p.add_argument("--run", metavar="RUN", help="only this run")
    p.add_argument("--since", metavar="TS", help="compare transitions from TS on")
    p.add_argument("--until", metavar="TS", help="advance time to TS after the last event")
    p.add_argument("--all", action="store_true", help="also list unchanged transitions")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _at(ts: float, step: int | None) -> str:
    return iso(ts) + (f" (step {step})" if step is not None else "")


def describe(c: Change) -> str:
    head = f"{c.kind:<8} {c.rule} {c.state} [{c.run}]"
    if c.subject_text:
        head += f" {c.subject_text}"
    if c.kind in ("moved", "same"):
        assert c.recorded is not None
        assert c.replayed is not None
        delta = c.delta_s or 0.0
        sign = "+" if delta >= 0 else "-"
        moved = f"{sign}{fmt_duration(abs(delta))}"
        if c.delta_steps:
            moved += f", {c.delta_steps:+d} steps"
        return (
            f"{head}: {_at(c.recorded.ts, c.recorded_step)} -> "
            f"{_at(c.replayed.ts, c.replayed_step)} ({moved})"
        )
    t = c.replayed if c.kind == "added" else c.recorded
    step = c.replayed_step if c.kind == "added" else c.recorded_step
    assert t is not None
    return f"{head}: {_at(t.ts, step)}: {t.summary}"


def render(result: Backtest, config_name: str, show_all: bool) -> str:
    out = [
        f"backtest of {config_name} over {result.events} events of {len(result.runs)} run(s) "
        f"in {result.seconds:.2f} s"
    ]
    if result.fleet:
        out.append(f"fleet incidents (replayed): {len(result.fleet)}")
        out += [f"  {iso(t.ts)}  {t.subject}: {t.summary}" for t in result.fleet]
    for c in result.changes:
        if c.kind != "same" or show_all:
            out.append("  " + describe(c))
    out.append(
        f"{result.count('moved')} moved, {result.count('added')} added, "
        f"{result.count('removed')} removed, {result.count('same')} unchanged"
    )
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    since = given_time(args.since)
    until = given_time(args.until)
    config = configfile.rules(args.config)
    with Store.reader(args.db, wait=args.wait) as store:
        result = run_backtest(store, config, run=args.run, since=since, until=until)
    if args.run is not None and not result.runs:
        raise CommandError(f"no events of run {args.run!r}" + (" since then" if since else ""))
    for bad in result.invalid:
        print(f"{bad.where}: refused by the rules: {bad.reason}", file=sys.stderr)
    if args.format == "json":
        for c in result.changes:
            if c.kind != "same" or args.all:
                sys.stdout.write(orjson.dumps(c.to_dict()).decode() + "\n")
    else:
        print(render(result, args.config or "the default rules", args.all))
    return 0

"""`runwatch silence`: keep an alert (or a whole run) out of Slack for a while.

    runwatch silence RUN [RULE] --for 2h [--comment "known: sandbox outage"]
    runwatch silence --list
    runwatch silence --remove ID

Silences live in the notifier's state file (`--state`, `$RUNWATCH_NOTIFY_DB`, default
./runwatch-notify.sqlite), which the running notifier reads at every transition: no restart.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from runwatch.commands import CommandError
from runwatch.notify.store import NotifyStore, default_path
from runwatch.timeparse import iso

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1h30m`, `1d`, or plain seconds."""
    t = text.strip().lower()
    try:
        value = float(t)
    except ValueError:
        parts = _PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration: use e.g. 90s, 30m, 2h, 1h30m, 1d"
            ) from None
        value = sum(float(n) * _UNIT[u] for n, u in parts)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a silence must last more than 0 s")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "silence",
        help="silence Slack notifications for a run (or one rule of it); list; remove",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", nargs="?", help="run id")
    p.add_argument("rule", nargs="?", help="rule id (default: every rule of the run)")
    p.add_argument(
        "--for",
        dest="duration",
        type=parse_duration,
        metavar="DURATION",
        help="how long, e.g. 2h, 30m, 1d",
    )
    p.add_argument("--comment", default="", help="why (shown by --list)")
    p.add_argument("--list", action="store_true", help="list the silences in force")
    p.add_argument("--remove", type=int, metavar="ID", help="remove a silence by its id")
    p.add_argument(
        "--state",
        default=None,
        help="notifier state file (default: $RUNWATCH_NOTIFY_DB or ./runwatch-notify.sqlite)",
    )
    p.set_defaults(func=run_silence)


def run_silence(args: argparse.Namespace) -> int:
    store = NotifyStore(args.state or default_path())
    try:
        if args.list:
            rows = store.silences()
            if not rows:
                print("no silences in force")
            for s in rows:
                what = f"{s.run} {s.rule or '(all rules)'}"
                note = f"  # {s.comment}" if s.comment else ""
                print(f"{s.id:>4}  {what}  until {iso(s.until)}{note}")
            return 0
        if args.remove is not None:
            if store.remove_silence(args.remove):
                print(f"removed silence {args.remove}")
                return 0
            raise CommandError(f"no silence with id {args.remove}", 1)
        if not args.run or args.duration is None:
            raise CommandError("give RUN [RULE] --for DURATION, or --list, or --remove ID")
        until = time.time() + args.duration
        ident = store.add_silence(args.run, args.rule, until, args.comment)
        what = f"{args.rule} of {args.run}" if args.rule else f"every rule of {args.run}"
        print(f"silence {ident}: {what} until {iso(until)}")
        return 0
    finally:
        store.close()

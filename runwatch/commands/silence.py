"""`runwatch silence`: keep an alert (or a whole run) out of Slack for a while.

    runwatch silence RUN [RULE] --for 2h [--comment "known: sandbox outage"]
    runwatch silence --list
    runwatch silence --remove ID

Silences live in the notifier's state file (`--state`, `$RUNWATCH_NOTIFY_DB`, default
./runwatch-notify.sqlite), which the running notifier reads at every transition: no restart.
A `runwatch serve` that notifies Slack keeps them in its own; `--url` (else $RUNWATCH_URL
when no state file is named) sets, lists and removes them there.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from runwatch.commands import known_rule
from runwatch.commands.remote import Remote, add_url_args, history_source
from runwatch.emitters import env
from runwatch.exceptions import CommandError
from runwatch.notify.store import NotifyStore, Silence, default_path
from runwatch.timeparse import iso


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1h30m`, `1d`, or plain seconds (`env.parse_duration`)."""
    try:
        return env.parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


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
    p.add_argument("--config", metavar="PATH", help="the rules file, for RULE of a custom rule "
                   "(a built-in rule's id is known without it)")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the silences in force")
    p.add_argument("--remove", type=int, metavar="ID", help="remove a silence by its id")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--state",
        default=None,
        help="notifier state file (default: $RUNWATCH_NOTIFY_DB or ./runwatch-notify.sqlite)",
    )
    add_url_args(p, "(its Slack notifier's silences) instead of a state file", where)
    p.set_defaults(func=run_silence)


def _show(rows: list[Silence]) -> None:
    if not rows:
        print("no silences in force")
    for s in rows:
        what = f"{s.run} {s.rule or '(all rules)'}"
        note = f"  # {s.comment}" if s.comment else ""
        print(f"{s.id:>4}  {what}  until {iso(s.until)}{note}")


def _made(ident: int, run: str, rule: str | None, until: float) -> None:
    what = f"{rule} of {run}" if rule else f"every rule of {run}"
    print(f"silence {ident}: {what} until {iso(until)}")


def run_silence(args: argparse.Namespace) -> int:
    if not args.list and args.remove is None and (not args.run or args.duration is None):
        raise CommandError("give RUN [RULE] --for DURATION, or --list, or --remove ID")
    url = history_source(args.url, args.state, env.NOTIFY_DB)
    if args.rule and not (url and args.config is None):  # serve knows its rules itself
        known_rule(args.rule, args.config)
    if url:
        return _at_serve(Remote(url, args.token_file), args)
    store = NotifyStore(args.state or default_path())
    try:
        if args.list:
            _show(store.silences())
            return 0
        if args.remove is not None:
            if store.remove_silence(args.remove):
                print(f"removed silence {args.remove}")
                return 0
            raise CommandError(f"no silence with id {args.remove}", 1)
        until = time.time() + args.duration
        _made(store.add_silence(args.run, args.rule, until, args.comment), args.run,
              args.rule, until)  # fmt: skip
        return 0
    finally:
        store.close()


def _at_serve(serve: Remote, args: argparse.Namespace) -> int:
    """The same, through serve's API (`/v1/silences`)."""
    if args.list:
        _show([Silence(**s) for s in serve.get("/v1/silences")["silences"]])
    elif args.remove is not None:
        serve.delete(f"/v1/silences/{args.remove}")
        print(f"removed silence {args.remove}")
    else:
        made = serve.post(
            "/v1/silences",
            {"run": args.run, "rule": args.rule, "for_s": args.duration, "comment": args.comment},
        )
        s = made["silence"]
        _made(s["id"], s["run"], s["rule"], s["until"])  # fmt: skip
    return 0

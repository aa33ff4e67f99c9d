"""`runwatch spool status|flush|drop`: the events emitters could not send yet, by destination.

Emitters keep what their broker or service did not take in a directory per destination
under the spool base (`~/.cache/runwatch/spool`, or `--dir`), each with the destination it
was going to (`destination.json`). A process that exited before it could send leaves its
segments there; the next emitter with the same destination sends them, and so does `flush`,
now. Only to their own destination -- or, for events kept without one (`unsent/`, a job
started with no destination variable), to the one `--url` / `--kafka` names. `status` warns
of a backlog older than `--warn-after` (10m); `drop DEST` gives up on one (a destination
directory, or its name as status shows it), counted and recorded in `dropped.log`.
Nothing is dropped unasked ($RUNWATCH_SPOOL_MAX_AGE, unset by default, lets emitters drop
what is older than it instead of sending it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from runwatch.commands import read_token
from runwatch.commands.kafka_args import add_kafka_security_args, security_from_args
from runwatch.emitters import env
from runwatch.emitters.backlog import WARN_AFTER_S, backlog, drop, segments, where
from runwatch.emitters.spool import SEGMENT_SUFFIX, Spool, default_base, read_destination
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError
from runwatch.logs import say
from runwatch.stream.suggest import did_you_mean


def _duration(text: str) -> float:
    try:
        return env.parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spool",
        help="what emitters could not send yet, by destination; send it (flush)",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("action", choices=("status", "flush", "drop"),
                   help="status: what waits, for where, how old; flush: send it now; drop "
                   "DEST: give it up")  # fmt: skip
    p.add_argument("dest", nargs="?", metavar="DEST", help="for drop: the destination's "
                   "directory (or its name under the base), as status shows it")  # fmt: skip
    p.add_argument("--warn-after", type=_duration, default=WARN_AFTER_S, metavar="DURATION",
                   help="status warns of a backlog older than this (default 10m)")  # fmt: skip
    p.add_argument("--dir", help="the spool base, or one destination's directory "
                   "(default ~/.cache/runwatch/spool)")  # fmt: skip
    p.add_argument("--url", help="flush events kept without a destination to this "
                   "runwatch serve (token: --token-file or $RUNWATCH_TOKEN)")  # fmt: skip
    p.add_argument("--token-file", metavar="PATH", help="bearer token for --url")
    p.add_argument("--kafka", help="flush events kept without a destination to this Kafka")
    p.add_argument("--topic", default=Topics().events, help="with --kafka (default %(default)s)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds flush may take per destination (default 60)")  # fmt: skip
    add_kafka_security_args(p)
    p.set_defaults(func=run)


def _directories(base: Path) -> list[Path]:
    """`base` itself when it holds segments, else its destination directories."""
    if not base.is_dir():
        raise CommandError(f"{base}: no such spool directory")
    if any(p.name.endswith(SEGMENT_SUFFIX) for p in base.iterdir()):
        return [base]
    return sorted(p for p in base.iterdir() if p.is_dir())


def status(directories: list[Path], warn_after: float = WARN_AFTER_S) -> None:
    now = time.time()
    found = [b for b in map(backlog, directories) if b is not None]
    if not found:
        print("nothing waits")
        return
    for b in found:
        print(b.line(now))
    for b in found:
        if warning := b.warning(now, warn_after):
            say(f"warning: {warning}")


def _destination(directory: Path, args: argparse.Namespace, spool: Spool) -> Any:
    """The destination of a directory's segments: its own, or the flags' for `unsent`."""
    from runwatch.emitters.http import HttpDestination
    from runwatch.emitters.transport import KafkaDestination

    found = read_destination(directory) or {}
    kind = found.get("kind")
    if kind is None:  # kept without a destination: where the user says
        if args.url:
            return HttpDestination(args.url, spool, token=read_token(args.token_file))
        if args.kafka:
            return KafkaDestination(args.kafka, args.topic, "runwatch-spool", spool,
                                    security=security_from_args(args))  # fmt: skip
        return None
    if kind == "http":
        return HttpDestination(found["url"], spool, token=read_token(args.token_file))
    if kind == "kafka":
        return KafkaDestination(found["bootstrap"], found["topic"], "runwatch-spool", spool,
                                security=security_from_args(args))  # fmt: skip
    return None


def flush(directories: list[Path], args: argparse.Namespace) -> int:
    """Send what exited processes left; the number of destinations that kept some."""
    unsent = 0
    for directory in directories:
        if not segments(directory):
            continue
        spool = Spool(directory, max_age=env.spool_max_age())
        destination = _destination(directory, args, spool)
        if destination is None:
            say(f"{directory}: {where(directory)}: left as it is")
            unsent += 1
            continue
        with spool.lock:
            adopted = spool.adopt_orphans()  # only what no living process still sends
        if not adopted:
            say(f"{directory}: its processes are still running: they send it themselves")
            continue
        say(f"{directory}: sending {adopted} segments to {destination.name} ...")
        destination.tick()
        destination.close(time.monotonic() + args.timeout)
        left = segments(directory)
        say(f"{directory}: {destination.sent:,} events sent"
            + (f"; {len(left)} segments left (unreachable?)" if left else ""))  # fmt: skip
        unsent += bool(left)
    return unsent


def drop_backlog(base: Path, dest: str | None) -> int:
    """`drop DEST`: give up one destination's backlog; 1 when some of it is kept."""
    if not dest:
        raise CommandError("give the destination to drop: runwatch spool drop DEST (its "
                           "directory, as runwatch spool status shows it)")  # fmt: skip
    named = Path(dest).expanduser()
    directory = named if named.is_dir() and named.parent != Path(".") else base / dest
    if not directory.is_dir() or not segments(directory):
        known = [d.name for d in _directories(base)] if base.is_dir() else []
        raise CommandError(f"no backlog {dest!r} under {base}{did_you_mean(dest, known)}")
    what = where(directory)
    done = drop(directory, base.parent if directory == base else base)
    say(f"{directory}: dropped {done.events:,} events ({done.segments} segments, "
        f"{done.bytes:,} bytes) for {what}"
        + (f"; {done.kept} segments of running processes kept: they send them themselves"
           if done.kept else ""))  # fmt: skip
    return 1 if done.kept else 0


def run(args: argparse.Namespace) -> int:
    base = Path(args.dir).expanduser() if args.dir else default_base()
    if args.action == "drop":
        return drop_backlog(base, args.dest)
    if args.dest:
        raise CommandError(f"spool {args.action} takes no DEST ({args.dest!r}); use --dir")
    if args.action == "status":
        if not base.exists():
            print("nothing waits")
            return 0
        status(_directories(base), args.warn_after)
        return 0
    if not base.exists():
        say("nothing waits")
        return 0
    return 1 if flush(_directories(base), args) else 0

"""`runwatch spool status|flush`: the events emitters could not send yet, by destination.

Emitters keep what their broker or service did not take in a directory per destination
under the spool base (`~/.cache/runwatch/spool`, or `--dir`), each with the destination it
was going to (`destination.json`). A process that exited before it could send leaves its
segments there; the next emitter with the same destination sends them, and so does `flush`,
now. Only to their own destination -- or, for events kept without one (`unsent/`, a job
started with no destination variable), to the one `--url` / `--kafka` names.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from runwatch.commands import CommandError, read_token
from runwatch.commands.kafka_args import add_kafka_security_args, security_from_args
from runwatch.emitters.spool import (
    SEGMENT_SUFFIX,
    Spool,
    default_base,
    read_destination,
)
from runwatch.emitters.topics import Topics
from runwatch.logs import say


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spool",
        help="what emitters could not send yet, by destination; send it (flush)",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("action", choices=("status", "flush"),
                   help="status: what waits, for where, how old; flush: send it now")  # fmt: skip
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


def _where(directory: Path) -> str:
    found = read_destination(directory)
    if found is None:
        return "no destination (send with --url or --kafka)"
    if found.get("kind") == "http":
        return f"runwatch serve at {found.get('url')}"
    if found.get("kind") == "kafka":
        return f"Kafka at {found.get('bootstrap')}, topic {found.get('topic')}"
    return "a spool directory (it is the destination)"


def _segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(SEGMENT_SUFFIX))


def status(directories: list[Path]) -> None:
    now = time.time()
    if not any(_segments(d) for d in directories):
        print("nothing waits")
        return
    for directory in directories:
        segments = _segments(directory)
        if not segments:
            continue
        events = sum(len(Spool.read(s)) for s in segments)
        size = sum(s.stat().st_size for s in segments)
        oldest = min(s.stat().st_mtime for s in segments)
        print(f"{directory}: {events:,} events in {len(segments)} segments ({size:,} bytes), "
              f"the oldest written {_age(now - oldest)} ago, for {_where(directory)}")  # fmt: skip


def _age(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


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
        if not _segments(directory):
            continue
        spool = Spool(directory)
        destination = _destination(directory, args, spool)
        if destination is None:
            say(f"{directory}: {_where(directory)}: left as it is")
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
        left = _segments(directory)
        say(f"{directory}: {destination.sent:,} events sent"
            + (f"; {len(left)} segments left (unreachable?)" if left else ""))  # fmt: skip
        unsent += bool(left)
    return unsent


def run(args: argparse.Namespace) -> int:
    base = Path(args.dir).expanduser() if args.dir else default_base()
    if args.action == "status":
        if not base.exists():
            print("nothing waits")
            return 0
        status(_directories(base))
        return 0
    if not base.exists():
        say("nothing waits")
        return 0
    return 1 if flush(_directories(base), args) else 0

"""`runwatch resume RUN`: lift the circuit breaker that paused a run's training loop.

    runwatch resume RUN [--rule RULE] [--reason "checked: sandbox restarted"]

It sends a `run.resumed` event to where the run's events go (`--url` of `runwatch serve`, or
`--kafka`; else $RUNWATCH_URL / $RUNWATCH_KAFKA), then waits until the service has applied it
and prints what still pauses the run. The alerts firing now (of RULE, or all) stop pausing
it; one that resolves and fires again pauses it again. The trainer's guard sees the change
at its next look (every 5 s by default).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from runwatch.commands import CommandError, read_token
from runwatch.commands.kafka_args import add_kafka_security_args, security_from_args
from runwatch.emitters import env
from runwatch.emitters.guard import HttpSource, KafkaSource, ViewSource, decide
from runwatch.emitters.spool import SEGMENT_SUFFIX
from runwatch.emitters.topics import Topics
from runwatch.logs import say


def register(sub: Any) -> None:
    p = sub.add_parser(
        "resume",
        help="lift the circuit breaker that paused a run (its firing alerts stop pausing it)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="run id")
    p.add_argument("--rule", help="lift only this rule's alerts (default: every alert firing)")
    p.add_argument("--reason", help="why, kept with the event in the history")
    p.add_argument("--url", help="runwatch serve (default $RUNWATCH_URL); token: --token-file "
                   "or $RUNWATCH_TOKEN")  # fmt: skip
    p.add_argument("--token-file", metavar="PATH", help="bearer token for --url")
    p.add_argument("--kafka", help="Kafka bootstrap servers (default $RUNWATCH_KAFKA)")
    p.add_argument("--topic-prefix", default="", help="prefix of the topic names, e.g. 'staging.'")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for the service to take it (default 30)")  # fmt: skip
    add_kafka_security_args(p)
    p.set_defaults(func=run)


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "someone"
    return f"{user}@{socket.gethostname()}"[:200]


def run(args: argparse.Namespace) -> int:
    from runwatch.emitters.emitter import Emitter

    kafka, url, _ = env.destination(args.kafka, args.url)
    if not url and not kafka:
        raise CommandError("where is runwatch? give --url (runwatch serve) or --kafka, or set "
                           "RUNWATCH_URL / RUNWATCH_KAFKA")  # fmt: skip
    topics = Topics(args.topic_prefix)
    fields = {"by": _who()}
    if args.rule:
        fields["rule"] = args.rule
    if args.reason:
        fields["reason"] = args.reason
    token = read_token(args.token_file) if url else None
    security = security_from_args(args) if kafka else None
    with tempfile.TemporaryDirectory(prefix="runwatch-resume-") as spool:
        try:
            em = Emitter(
                args.run, "operator", url=url, kafka=kafka, token=token, topic=topics.events,
                kafka_security=security, spool=spool, heartbeat=False, strict=True,
            )  # fmt: skip
            em.emit("run.resumed", **fields)
        except (ValueError, TypeError) as err:
            raise CommandError(str(err)) from None
        sent_at = time.time()
        em.close(timeout=args.timeout)
        if any(p.name.endswith(SEGMENT_SUFFIX) for p in Path(spool).rglob("*")):
            where = url or f"Kafka at {kafka}"
            raise CommandError(f"{where} did not take the resume within {args.timeout:g}s: "
                               "nothing was changed; try again", status=1)  # fmt: skip
    source: ViewSource = (
        HttpSource(url, args.run, token)
        if url
        else KafkaSource(
            str(kafka),
            args.run,
            topics.breaker,
            security=security.kafka_python() if security else None,
        )
    )
    try:
        # ours: by this person, and no older than the skew bound allows
        view = _applied(source, fields["by"], sent_at - 300.0, time.monotonic() + args.timeout)
    finally:
        source.close()
    if view is None:
        say(f"sent; runwatch has not applied it within {args.timeout:g}s (does it track run "
            f"{args.run}?): the trainer's guard will see it once it does")  # fmt: skip
        return 0
    lifted = view.get("lifted", 0)
    left = decide(view, {}).alerts
    still = "; ".join(str(a.get("rule")) for a in left)
    say(f"run {args.run}: resumed ({lifted} firing alert{'s' if lifted != 1 else ''} lifted)"
        + (f"; still pausing it by the config's policy: {still}" if still else ""))  # fmt: skip
    return 0


def _applied(source: ViewSource, by: str, since: float, deadline: float) -> Any:
    """The run's breaker view once it shows a resume by `by` from `since` on; None at
    `deadline`."""
    while True:
        try:
            view = source.fetch()
        except (OSError, ValueError):
            view = None
        resumed = (view or {}).get("resumed") or {}
        ts = resumed.get("ts")
        if resumed.get("by") == by and isinstance(ts, int | float) and ts >= since:
            return view
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)

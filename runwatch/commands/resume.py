"""`runwatch resume RUN`: lift the circuit breaker that paused a run's training loop.

    runwatch resume RUN [--rule RULE] [--reason "checked: sandbox restarted"]

It asks the `runwatch serve` at `--url` to resume the run (`POST /v1/resume`: applied before
it answers), or sends a `run.resumed` event to Kafka (`--kafka`) and waits until the workers
have applied it (else $RUNWATCH_KAFKA / $RUNWATCH_URL); then prints what still pauses the
run. The alerts firing now (of RULE, or all) stop pausing it; one that resolves and fires
again pauses it again. The trainer's guard sees the change
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

from runwatch.commands import known_rule
from runwatch.commands.kafka_args import add_kafka_security_args, security_from_args
from runwatch.commands.remote import Remote
from runwatch.emitters import env
from runwatch.emitters.follower import KafkaSource, ViewSource
from runwatch.emitters.guard import decide
from runwatch.emitters.runview import RunView
from runwatch.emitters.spool import SEGMENT_SUFFIX
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError
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
    p.add_argument("--config", metavar="PATH", help="with --kafka: the rules file, for --rule "
                   "of a custom rule (a built-in rule's id is known without it)")  # fmt: skip
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
    kafka, url, _ = env.destination(args.kafka, args.url)
    if not url and not kafka:
        raise CommandError("where is runwatch? give --url (runwatch serve) or --kafka, or set "
                           "RUNWATCH_URL / RUNWATCH_KAFKA")  # fmt: skip
    fields = {"by": _who()}
    if args.rule:
        fields["rule"] = args.rule
    if args.reason:
        fields["reason"] = args.reason
    view: RunView | None
    if url:  # serve knows its rules, and says which one is meant
        serve = Remote(url, args.token_file, timeout=args.timeout)
        try:
            view = RunView.parse(serve.post("/v1/resume", {"run": args.run, **fields})["breaker"])
        except ValueError as err:
            raise CommandError(f"{url} answered the resume oddly: {err}") from None
    else:
        known_rule(args.rule, args.config)
        view = _through_kafka(args, str(kafka), fields)
        if view is None:
            say(f"sent; runwatch has not applied it within {args.timeout:g}s (does it track "
                f"run {args.run}?): the trainer's guard will see it once it does")  # fmt: skip
            return 0
    lifted = view.lifted
    left = decide(view, {}).alerts
    still = "; ".join(a.rule for a in left)
    say(f"run {args.run}: resumed ({lifted} firing alert{'s' if lifted != 1 else ''} lifted)"
        + (f"; still pausing it by the config's policy: {still}" if still else ""))  # fmt: skip
    return 0


def _through_kafka(args: argparse.Namespace, kafka: str, fields: dict[str, str]) -> RunView | None:
    """Send the `run.resumed` event; the run view once the workers applied it (None at the
    timeout)."""
    from runwatch.emitters.emitter import Emitter

    topics = Topics(args.topic_prefix)
    security = security_from_args(args)
    with tempfile.TemporaryDirectory(prefix="runwatch-resume-") as spool:
        try:
            em = Emitter(
                args.run, "operator", kafka=kafka, topic=topics.events, kafka_security=security,
                spool=spool, heartbeat=False, strict=True,
            )  # fmt: skip
            em.emit("run.resumed", **fields)
        except (ValueError, TypeError) as err:
            raise CommandError(str(err)) from None
        sent_at = time.time()
        em.close(timeout=args.timeout)
        if any(p.name.endswith(SEGMENT_SUFFIX) for p in Path(spool).rglob("*")):
            raise CommandError(f"Kafka at {kafka} did not take the resume within "
                               f"{args.timeout:g}s: nothing was changed; try again", 1)  # fmt: skip
    source = KafkaSource(kafka, args.run, topics.breaker, security=security.kafka_python())
    try:
        # ours: by this person, and no older than the skew bound allows
        return _applied(source, fields["by"], sent_at - 300.0, time.monotonic() + args.timeout)
    finally:
        source.close()


def _applied(source: ViewSource, by: str, since: float, deadline: float) -> RunView | None:
    """The run view once it shows a resume by `by` from `since` on; None at `deadline`."""
    while True:
        try:
            raw = source.fetch()
            view = RunView.parse(raw) if raw is not None else None
        except (OSError, ValueError):
            view = None
        resumed = view.resumed if view is not None else None
        if resumed is not None and resumed.by == by and resumed.ts >= since:
            return view
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)

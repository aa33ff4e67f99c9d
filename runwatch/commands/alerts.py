"""`runwatch alerts`: print alert transitions, oldest first, and follow new ones (`--follow`)
-- from Kafka (`runwatch.alerts`) or from a `runwatch serve` by its URL, whichever the flags
name, else where the emitters' variables point ($RUNWATCH_KAFKA, else $RUNWATCH_URL).

From serve, `--follow` reads its stream of transitions (`GET /v1/alerts/stream`), which
holds no request thread of the service; when serve goes away it waits for it and carries on
from the last transition it printed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
from collections import deque
from typing import Any

from runwatch.commands.kafka_args import add_kafka_security_args, connect_check
from runwatch.commands.remote import Remote, add_url_args
from runwatch.console import alert_line
from runwatch.emitters import env
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError
from runwatch.logs import say
from runwatch.stopping import stop_on_signals
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert

#: How many transitions of serve's backlog (its latest 2,000) `alerts --url` prints.
BACKLOG = 2000


def register(sub: Any) -> None:
    a = sub.add_parser(
        "alerts",
        help="print alert transitions (Kafka or runwatch serve); --follow for new ones",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = a.add_mutually_exclusive_group()
    where.add_argument("--kafka", metavar="HOST:PORT", help="bootstrap servers "
                       "(default $RUNWATCH_KAFKA)")  # fmt: skip
    add_url_args(a, "(default $RUNWATCH_URL when $RUNWATCH_KAFKA is not set)", where)
    a.add_argument("--follow", "-f", action="store_true", help="keep printing new ones")
    a.add_argument("--json", action="store_true", help="one JSON object per line")
    a.add_argument("--topic-prefix", default="", help="with --kafka: prefix of the topic names")
    a.add_argument("--run", help="only this run's alerts")
    add_kafka_security_args(a)
    a.set_defaults(func=run_alerts)


def run_alerts(args: argparse.Namespace) -> int:
    kafka, url, _ = env.destination(args.kafka, args.url)
    if url:
        return _from_serve(args, Remote(url, args.token_file))
    if not kafka:
        raise CommandError("where is runwatch? give --url (runwatch serve) or --kafka, or set "
                           "RUNWATCH_URL / RUNWATCH_KAFKA")  # fmt: skip
    args.kafka = kafka
    return _from_kafka(args)


def _from_kafka(args: argparse.Namespace) -> int:
    security = connect_check(args, 3.0)
    from runwatch.stream.kafka.clients import Connection
    from runwatch.stream.kafka.read import read_topic

    topic = Topics(args.topic_prefix).alerts
    stop = stop_on_signals(signal.SIGTERM)  # Ctrl-C: KeyboardInterrupt, below

    def show(records: list[Any]) -> None:
        for r in records:
            try:
                alert = Alert.from_json(r.value or b"")
            except InvalidAlert:
                continue
            _show(alert, args)

    reading = read_topic(Connection(args.kafka, security), topic, show,
                         until="stopped" if args.follow else "end", stop=stop.is_set)  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(reading)
    return 0


def _show(alert: Alert, args: argparse.Namespace) -> None:
    if args.run and alert.run != args.run:
        return
    print(alert.to_json().decode() if args.json else alert_line(alert), flush=True)


def _from_serve(args: argparse.Namespace, remote: Remote) -> int:
    if not args.follow:
        held = remote.get("/v1/alerts", limit=BACKLOG)
        for raw in held.get("alerts") or []:
            _show_raw(raw, args)
        return 0

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # a blocking read ends as Ctrl-C ends it
    with contextlib.suppress(KeyboardInterrupt):
        _follow(remote, args)
    return 0


def _follow(remote: Remote, args: argparse.Namespace) -> None:
    """Print the stream; across serve's restarts, go on from the last cursor (a restarted
    serve does not know it and sends what it holds: ids already printed are skipped)."""
    cursor: str | None = None
    seen: deque[str] = deque(maxlen=4 * BACKLOG)
    lost = 0
    while True:
        try:
            for at, raw in remote.follow(cursor, args.run):
                cursor, lost = at, 0
                ident = raw.get("id") if isinstance(raw, dict) else None
                if ident in seen:
                    continue
                if ident:
                    seen.append(ident)
                _show_raw(raw, args)
        except CommandError as err:
            if err.status == 2 or (lost == 0 and cursor is None):
                raise  # refused, or never reached: say so instead of waiting
            if lost == 0:
                say(f"{err}; trying again")
        else:
            if lost == 0:
                say(f"runwatch serve at {remote.url} closed the stream; following again")
        lost += 1
        time.sleep(min(5.0, 0.5 * lost))


def _show_raw(raw: Any, args: argparse.Namespace) -> None:
    try:
        alert = Alert.from_dict(raw)
    except InvalidAlert:
        return
    _show(alert, args)

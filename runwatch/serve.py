"""`runwatch serve`: the embedded single-process service (no Kafka).

Takes events over HTTP (`POST /v1/events`, JSON Lines) and/or from a spool directory that
emitters write, runs the rules on the wall clock, keeps the history in DuckDB, serves
`/metrics`, `/healthz`, `/readyz` and a read-only JSON API, and prints every alert
transition on the console (more notifiers: `Service.notifiers`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from runwatch.stopping import stop_on_signals
from runwatch.stream.alerts import Alert
from runwatch.timeparse import iso

DEFAULT_PORT = 8787


def console_line(alert: Alert) -> str:
    state = "FIRING  " if alert.state == "firing" else "resolved"
    subject = f" [{alert.subject}]" if alert.subject else ""
    return f"{iso(alert.ts)}  {state} {alert.severity:<8} {alert.rule}{subject} {alert.run}: " + (
        alert.summary
    )


def print_alert(alert: Alert) -> None:
    print(console_line(alert), flush=True)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="the embedded service: HTTP/spool in, rules, DuckDB history, /metrics, alerts",
        description="Run runwatch in one process without Kafka: events from HTTP "
        "(POST /v1/events, JSON Lines) and/or a spool directory; alerts on the console.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    p.add_argument("--port-file", help="write the port here once listening")
    p.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' "
                   "(default $RUNWATCH_TOKEN; none: no token needed)")  # fmt: skip
    p.add_argument("--spool", default=None, help="spool directory to tail ($RUNWATCH_SPOOL)")
    p.add_argument("--db", default=None, help="DuckDB history ($RUNWATCH_DB, ./runwatch.duckdb)")
    p.add_argument("--wal", default=None, help="event/alert logs (default: DB.serve/)")
    p.add_argument("--config", help="rules config (TOML)")
    p.add_argument("--max-body", type=int, default=4 << 20, help="largest request, bytes")
    p.add_argument("--slack-config", metavar="PATH", help="also notify Slack: a TOML file "
                   "with a [slack] table, as for `runwatch notify`")  # fmt: skip
    p.add_argument(
        "--wal-max-bytes",
        type=int,
        default=1 << 30,
        help="past this, drop runs finished over an hour ago from the event log (in DuckDB)",
    )
    p.add_argument("--tick", type=float, default=0.25, help="seconds between timer checks")
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from runwatch.service.core import Service
    from runwatch.service.http import ServiceServer
    from runwatch.service.spool_tail import SpoolTail
    from runwatch.stream.config import RulesConfig
    from runwatch.stream.exceptions import ConfigError

    try:
        config = RulesConfig.load(args.config) if args.config else None
    except ConfigError as err:
        print(f"runwatch serve: {err}", file=sys.stderr)
        return 2
    db = Path(args.db or os.environ.get("RUNWATCH_DB") or "runwatch.duckdb")
    wal = Path(args.wal) if args.wal else db.with_name(db.name + ".serve")
    token = args.token if args.token is not None else os.environ.get("RUNWATCH_TOKEN") or None
    spool_dir = args.spool or os.environ.get("RUNWATCH_SPOOL")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    service = Service(db, wal, config=config, notifiers=[print_alert])
    try:
        slack = _slack(args.slack_config, service) if args.slack_config else None
    except Exception as err:  # a bad Slack config or a missing token: say so, start nothing
        print(f"runwatch serve: {err}", file=sys.stderr)
        service.close()
        return 2
    replayed = service.recover()
    if slack is not None:  # the notifier's ledger drops what it sent before a restart
        for alert in service.alert_log.read():
            slack.submit(alert, _labels(service, str(alert.get("run"))))
    try:
        server = ServiceServer((args.host, args.port), service, token, args.max_body)
    except OSError as err:
        print(f"runwatch serve: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        service.close()
        return 2
    port = server.server_address[1]
    print(f"runwatch serve: listening on http://{args.host}:{port} (history {db}; "
          f"{replayed} logged events replayed)", flush=True)  # fmt: skip
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(port))
        os.replace(tmp, args.port_file)
    tail = SpoolTail(Path(spool_dir), wal / "spool.positions") if spool_dir else None
    stop = stop_on_signals()
    thread = server.start()
    compact_at = 0.0
    try:
        while not stop.wait(args.tick):
            service.tick()
            if tail is not None:
                tail.poll(service)
            service.flush_due()
            if service.events.size > args.wal_max_bytes and time.monotonic() > compact_at:
                service.compact()
                compact_at = time.monotonic() + 600  # at most every 10 minutes
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        service.close()
        if slack is not None:
            slack.close()
    return 0


def _labels(service: Any, run: str) -> dict[str, str]:
    tracked = service.driver.engine.runs.get(run)
    return dict(tracked.state.labels) if tracked is not None else {}


def _slack(path: str, service: Any) -> Any:
    """The Slack notifier off the event path (`runwatch.notify_worker`), as a notifier."""
    from runwatch.notifier import Notifier
    from runwatch.notify_config import NotifyConfig
    from runwatch.notify_worker import BackgroundNotifier

    background = BackgroundNotifier(Notifier.from_config(NotifyConfig.load(path)))
    service.notifiers.append(lambda alert: background.submit(alert, _labels(service, alert.run)))
    return background

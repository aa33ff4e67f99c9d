"""The embedded service's main loop (`runwatch serve`): build the `Service`, recover it from
its logs, listen on HTTP, tail the spool, and turn the wall-clock timer until SIGTERM/Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from runwatch.console import alert_line
from runwatch.emitters import env
from runwatch.logs import say
from runwatch.stopping import stop_on_signals
from runwatch.stream.alerts import Alert


def print_alert(alert: Alert) -> None:
    print(alert_line(alert), flush=True)


def run(args: argparse.Namespace) -> int:
    """Serve until stopped; the exit status."""
    from runwatch.service.core import Service
    from runwatch.service.http import ServiceServer
    from runwatch.service.spool_tail import SpoolTail
    from runwatch.stream.config import RulesConfig

    config = RulesConfig.load_or_default(args.config)
    db = Path(env.db(args.db))
    wal = Path(args.wal) if args.wal else db.with_name(db.name + ".serve")
    token = _token(args)
    spool_dir = args.spool or env.get(env.SPOOL)
    service = Service(db, wal, config=config, notifiers=[print_alert], max_runs=args.max_runs)
    try:
        slack = _slack(args.slack_config, service) if args.slack_config else None
    except Exception as err:  # a bad Slack config or a missing token: say so, start nothing
        say(f"{err}")
        service.close()
        return 2
    replayed = service.recover()
    if slack is not None:  # the notifier's ledger drops what it sent before a restart
        for alert in service.alert_log.read():
            slack.submit(alert)
    try:
        server = ServiceServer((args.host, args.port), service, token, args.max_body,
                               idle_timeout=args.idle_timeout)  # fmt: skip
    except OSError as err:
        say(f"cannot listen on {args.host}:{args.port}: {err}")
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
    server.start()
    compact_at = 0.0
    checkpoint_at = time.monotonic() + args.checkpoint_every
    try:
        while not stop.wait(args.tick):
            service.tick()
            if args.checkpoint_every > 0 and time.monotonic() >= checkpoint_at:
                service.checkpoint()
                checkpoint_at = time.monotonic() + args.checkpoint_every
            if tail is not None:
                tail.poll(service)
            big = service.events.size > args.wal_max_bytes
            if big and time.monotonic() > compact_at and service.compact() is not None:
                compact_at = time.monotonic() + 600  # at most every 10 minutes
    finally:
        server.stop()
        service.close()
        if slack is not None:
            slack.close()
    return 0


def _token(args: argparse.Namespace) -> str | None:
    """--token-file, else $RUNWATCH_TOKEN, else --token (visible to every local user)."""
    from runwatch.commands import read_token

    return read_token(args.token_file) or args.token or None


def _slack(path: str, service: Any) -> Any:
    """The Slack notifier off the event path (`runwatch.notify.background`), as a notifier."""
    from runwatch.notify.background import BackgroundNotifier
    from runwatch.notify.config import NotifyConfig
    from runwatch.notify.notifier import Notifier

    background = BackgroundNotifier(Notifier.from_config(NotifyConfig.load(path)))
    service.notifiers.append(background.submit)
    return background

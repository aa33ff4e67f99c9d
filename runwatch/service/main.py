"""The embedded service's main loop (`runwatch serve`): build the `Service`, recover it from
its logs, listen on HTTP, tail the spool, and turn the wall-clock timer until SIGTERM/Ctrl-C.
Its settings (`ServeSettings`) are built from the command line in `runwatch.commands.serve`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runwatch.console import alert_line
from runwatch.logs import say
from runwatch.stopping import stop_on_signals
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig

if TYPE_CHECKING:
    from runwatch.notify.background import BackgroundNotifier
    from runwatch.service.core import Service


@dataclass(frozen=True)
class ServeSettings:
    """What `runwatch serve` runs with, every default and environment variable resolved."""

    db: Path
    wal: Path  # the event and alert logs, and the checkpoint
    config: RulesConfig
    host: str = "127.0.0.1"
    port: int = 8787
    port_file: Path | None = None
    token: str | None = None  # every endpoint but /healthz and /readyz asks for it
    spool: Path | None = None  # a spool directory to tail
    max_body: int = 4 << 20
    slack_config: Path | None = None
    wal_max_bytes: int = 1 << 30
    max_runs: int = 10_000
    idle_timeout: int = 30
    checkpoint_every: float = 60.0
    tick: float = 0.25


def print_alert(alert: Alert) -> None:
    print(alert_line(alert), flush=True)


def run(settings: ServeSettings) -> int:
    """Serve until stopped; the exit status."""
    from runwatch.service.core import Service
    from runwatch.service.http import ServiceServer
    from runwatch.service.spool_tail import SpoolTail

    db, wal = settings.db, settings.wal
    service = Service(db, wal, config=settings.config, notifiers=[print_alert],
                      max_runs=settings.max_runs,
                      checkpoint_every=settings.checkpoint_every)  # fmt: skip
    try:
        slack = _slack(settings.slack_config, service) if settings.slack_config else None
    except Exception as err:  # a bad Slack config or a missing token: say so, start nothing
        say(f"{err}")
        service.close()
        return 2
    replayed = service.recover()
    if slack is not None:  # the notifier's ledger drops what it sent before a restart
        for alert in service.alert_log.read():
            slack.submit(alert)
    # silences live in the notifier's ledger: the API reads and writes them there
    ledger = Path(slack.notifier.store.path) if slack is not None else None
    try:
        server = ServiceServer((settings.host, settings.port), service, settings.token,
                               settings.max_body, idle_timeout=settings.idle_timeout,
                               silences=ledger)  # fmt: skip
    except OSError as err:
        say(f"cannot listen on {settings.host}:{settings.port}: {err}")
        service.close()
        return 2
    port = server.server_address[1]
    print(f"runwatch serve: listening on http://{settings.host}:{port} (history {db}; "
          f"{replayed} logged events replayed); its page: http://{settings.host}:{port}/",
          flush=True)  # fmt: skip
    if settings.port_file:
        tmp = settings.port_file.with_name(settings.port_file.name + ".tmp")
        tmp.write_text(str(port))
        os.replace(tmp, settings.port_file)
    tail = SpoolTail(settings.spool, wal / "spool.positions") if settings.spool else None
    stop = stop_on_signals()
    server.start()
    compact_at = 0.0
    try:
        while not stop.wait(settings.tick):
            service.tick()
            service.checkpoint(at_once=False)  # when due (`Service.checkpointer`)
            if tail is not None:
                tail.poll(service)
            big = service.events.size > settings.wal_max_bytes
            if big and time.monotonic() > compact_at and service.compact() is not None:
                compact_at = time.monotonic() + 600  # at most every 10 minutes
    finally:
        server.stop()
        service.close()
        if slack is not None:
            slack.close()
    return 0


def _slack(path: Path, service: Service) -> BackgroundNotifier:
    """The Slack notifier off the event path (`runwatch.notify.background`), as a notifier."""
    from runwatch.notify.background import BackgroundNotifier
    from runwatch.notify.config import NotifyConfig
    from runwatch.notify.notifier import Notifier

    background = BackgroundNotifier(Notifier.from_config(NotifyConfig.load(path)))
    service.notifiers.append(background.submit)
    return background

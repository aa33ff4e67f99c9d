"""`runwatch serve`: the embedded single-process service (no Kafka); runwatch/service/ does it.

Takes events over HTTP (`POST /v1/events`, JSON Lines) and/or from a spool directory that
emitters write, runs the rules on the wall clock, keeps the history in DuckDB, serves
`/metrics`, `/healthz`, `/readyz` and a read-only JSON API, and prints every alert
transition on the console (more notifiers: `Service.notifiers`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runwatch.service.main import ServeSettings

DEFAULT_PORT = 8787


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
    p.add_argument("--token-file", metavar="PATH", help="require 'Authorization: Bearer "
                   "TOKEN' on every endpoint but /healthz and /readyz, the token read from "
                   "PATH (else $RUNWATCH_TOKEN; neither: no token needed)")  # fmt: skip
    p.add_argument("--token", default=None, help="the token itself -- visible to every local "
                   "user in the process list: prefer --token-file or $RUNWATCH_TOKEN")  # fmt: skip
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
    p.add_argument("--max-runs", type=int, default=10_000, help="live runs tracked at most; "
                   "finished and long-silent runs leave first, then events of new runs "
                   "are refused (kept as dead letters) until there is room")  # fmt: skip
    p.add_argument("--idle-timeout", type=int, default=30,
                   help="seconds a connection may stay idle before it is closed")  # fmt: skip
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="store the rules' state beside the logs this often, so a restart "
                   "replays only the events logged since (0: only at a clean stop)")  # fmt: skip
    p.add_argument("--tick", type=float, default=0.25, help="seconds between timer checks")
    p.set_defaults(func=run_serve)


def settings(args: argparse.Namespace) -> ServeSettings:
    """The command line, with every default and environment variable resolved."""
    from runwatch import configfile
    from runwatch.commands import read_token
    from runwatch.emitters import env
    from runwatch.service.main import ServeSettings

    db = Path(env.db(args.db))
    spool = args.spool or env.get(env.SPOOL)
    return ServeSettings(
        db=db,
        wal=Path(args.wal) if args.wal else db.with_name(db.name + ".serve"),
        config=configfile.rules(args.config),
        host=args.host,
        port=args.port,
        port_file=Path(args.port_file) if args.port_file else None,
        # --token-file, else $RUNWATCH_TOKEN, else --token (visible to every local user)
        token=read_token(args.token_file) or args.token or None,
        spool=Path(spool) if spool else None,
        max_body=args.max_body,
        slack_config=Path(args.slack_config) if args.slack_config else None,
        wal_max_bytes=args.wal_max_bytes,
        max_runs=args.max_runs,
        idle_timeout=args.idle_timeout,
        checkpoint_every=args.checkpoint_every,
        tick=args.tick,
    )


def run_serve(args: argparse.Namespace) -> int:
    from runwatch.service.main import run

    return run(settings(args))

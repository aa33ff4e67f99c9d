"""`runwatch sink`, `runwatch ingest`, `runwatch export`: filling the history, and exporting it."""

from __future__ import annotations

import argparse
import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from runwatch import configfile
from runwatch.commands import given_time
from runwatch.commands.kafka_args import add_health_args, add_kafka_security_args, connect_check
from runwatch.commands.lines import must_exist, read_lines, report_invalid
from runwatch.commands.query import add_db_args
from runwatch.emitters import env
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError
from runwatch.logs import say
from runwatch.stopping import stop_on_signals
from runwatch.store.exceptions import StoreError
from runwatch.store.store import Store
from runwatch.store.writer import BATCH_SIZE, BeforeCommit
from runwatch.stream.exceptions import PortUnavailable

log = logging.getLogger("runwatch.sink")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sink",
        help="consume runwatch.events and runwatch.alerts into the history (DuckDB)",
        description="Consume runwatch.events and runwatch.alerts into the history, in "
        "batches, with the Kafka positions committed in the same DuckDB transaction as the "
        "rows: a crash neither loses nor duplicates a row. The file is held only while a "
        "batch is written, so `runwatch sql` can read between batches.",
    )
    p.add_argument("--kafka", metavar="HOST:PORT", default=env.get(env.KAFKA))
    p.add_argument("--db", metavar="PATH", required=True, help="the history file")
    p.add_argument("--group", default="runwatch-sink", help="consumer group id")
    p.add_argument("--topic-prefix", default="", help="prefix of the topic names, e.g. 'staging.'")
    p.add_argument("--events-topic", help="events topic (default PREFIXrunwatch.events)")
    p.add_argument("--alerts-topic", help="alerts topic (default PREFIXrunwatch.alerts)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=BATCH_SIZE,
        help=f"records per batch at most (default {BATCH_SIZE:,}: two DuckDB row groups)",
    )
    p.add_argument(
        "--flush-interval", type=float, default=1.0, help="seconds a record waits at most"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no line per batch on stderr")
    add_health_args(p, "9465")
    add_kafka_security_args(p)
    p.set_defaults(func=run_sink)

    p = sub.add_parser(
        "ingest",
        help="store JSON Lines event files in the history, with the alerts the rules raise",
        description="Read events (JSON Lines; `-` is standard input), store every valid one, "
        "run the rules over them (as `runwatch replay` does) and store the alert "
        "transitions. Ids already stored are skipped. Invalid lines are reported on "
        "standard error and kept in the invalid_events table.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    add_db_args(p)
    p.add_argument("--config", metavar="PATH", help="rules config (TOML)")
    p.add_argument("--no-rules", action="store_true", help="store events only")
    p.add_argument("--until", metavar="TS", help="as for runwatch replay")
    p.set_defaults(func=run_ingest)

    p = sub.add_parser("export", help="write the events as Parquet, partitioned by day and run")
    add_db_args(p)
    p.add_argument("--parquet", metavar="DIR", required=True)
    p.add_argument("--since", metavar="TS", help="only events at or after TS")
    p.add_argument("--until", metavar="TS", help="only events before TS")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty DIR")
    p.set_defaults(func=run_export)


# -- sink ------------------------------------------------------------------------------------


def run_sink(args: argparse.Namespace, *, before_commit: BeforeCommit | None = None) -> int:
    """`runwatch sink`; `before_commit` runs inside each flush before its commit (a fault
    a test injects)."""
    from runwatch.store.sink import Sink, SinkSettings
    from runwatch.store.writer import Flushed

    if not args.kafka:
        raise CommandError("no Kafka given: pass --kafka HOST:PORT or set RUNWATCH_KAFKA")
    security = connect_check(args)
    db = Path(args.db)
    try:  # fail early on a bad path, and make the schema before the first batch
        Store.writer(db, wait=5.0).close()
    except StoreError as err:
        raise CommandError(str(err)) from None
    stop = stop_on_signals()

    def report(done: Flushed) -> None:
        if not args.quiet:
            say(
                f"{done.events} events ({done.new_events} new), {done.alerts} "
                f"alerts, {done.invalid} invalid in {done.seconds * 1000:.0f} ms"
            )

    config = SinkSettings(
        bootstrap=args.kafka,
        db=db,
        group=args.group,
        events_topic=args.events_topic or Topics(args.topic_prefix).events,
        alerts_topic=args.alerts_topic or Topics(args.topic_prefix).alerts,
        batch_size=args.batch_size,
        flush_interval=args.flush_interval,
        security=security,
        health_port=args.health_port,
        health_host=args.health_host,
    )
    try:
        totals = Sink(config, stop=stop, on_flush=report, before_commit=before_commit).run()
    except StoreError as err:
        raise CommandError(str(err)) from None
    except PortUnavailable as err:
        raise CommandError(f"--health-port: {err}") from None
    except Exception as err:  # aiokafka's errors: no broker, bad address, refused login
        if type(err).__module__.startswith(("aiokafka", "kafka")):
            why = security.scrub(f"{type(err).__name__}: {err}")
            raise CommandError(f"Kafka at {args.kafka}: {why}") from None
        raise
    say(
        f"stopped; {totals['events']} events ({totals['new_events']} new), "
        f"{totals['alerts']} alerts, {totals['invalid']} invalid in {totals['flushes']} batches"
    )
    return 0


# -- ingest ----------------------------------------------------------------------------------


def run_ingest(args: argparse.Namespace) -> int:
    from runwatch.store.ingest import ingest

    until = given_time(args.until)
    config = configfile.rules(args.config)
    must_exist(args.files)

    with ExitStack() as stack:
        done = ingest(
            read_lines(args.files, stack, progress=True),
            args.db,
            config=config,
            rules=not args.no_rules,
            until=until,
            on_invalid=report_invalid,
        )
    say(
        f"{done.events} events ({done.new_events} new), {done.alerts} alert "
        f"transitions ({done.new_alerts} new), {done.invalid} invalid lines -> {args.db}"
    )
    return 0


# -- export ----------------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    from runwatch.store.export import export_parquet

    since = given_time(args.since)
    until = given_time(args.until)
    with Store.reader(args.db, wait=args.wait) as store:
        done = export_parquet(
            store, args.parquet, overwrite=args.overwrite, since=since, until=until
        )
    say(
        f"{done.rows} events in {done.files} files "
        f"({done.partitions} day/run partitions) under {args.parquet}"
    )
    return 0

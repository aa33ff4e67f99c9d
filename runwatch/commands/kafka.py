"""`runwatch kafka start|stop|status`: a local Kafka broker for development and tests
(`runwatch.dev.broker`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from runwatch.dev.broker import (
    DATA_HELP,
    KafkaBroker,
    _previous_port,
    default_data_dir,
    is_running,
    stop_broker,
)
from runwatch.dev.jars import DEFAULT_VERSION, _say
from runwatch.exceptions import CommandError, KafkaBrokerError


def _cmd_start(args: argparse.Namespace) -> int:
    data = Path(args.data).resolve()
    if (running := is_running(data)) is not None:
        _say(f"already running from {data} (pid {running.pid})")
        print(running.bootstrap)
        return 0
    broker = KafkaBroker(
        data,
        args.port or _previous_port(data),
        args.kafka_version,
        detach=True,
        startup_timeout=args.timeout,
        secure=args.secure,
    )
    try:
        bootstrap = broker.start()
    except KafkaBrokerError as err:
        raise CommandError(f"{err}", 1) from None
    broker._child = None  # the JVM is meant to outlive us: don't wait on it
    if broker.secured is not None:
        _say(f"secured listeners: {broker.secured.describe()}")
    print(bootstrap)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    try:
        stopped = stop_broker(Path(args.data).resolve(), timeout=args.timeout)
    except KafkaBrokerError as err:
        raise CommandError(f"{err}", 1) from None
    print(f"stopped {stopped.bootstrap} (pid {stopped.pid})" if stopped else "not running")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = is_running(Path(args.data).resolve())
    if state is None:
        print("not running")
        return 1
    print(f"running {state.bootstrap} (pid {state.pid}, Kafka {state.version})")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `runwatch kafka start|stop|status` to the console script."""
    kafka = subparsers.add_parser("kafka", help="a local Kafka broker for development and tests")
    sub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION")
    sub.required = True

    start = sub.add_parser("start", help="start a broker in the background; print its address")
    start.add_argument("--port", type=int, help="client port (default: a free one)")
    start.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    start.add_argument("--version", dest="kafka_version", default=DEFAULT_VERSION,
                       help=f"Apache Kafka version (default {DEFAULT_VERSION})")  # fmt: skip
    start.add_argument("--timeout", type=float, default=120.0, help="startup timeout, seconds")
    start.add_argument("--secure", action="store_true",
                       help="also SASL_SSL, SASL_PLAINTEXT and mutual-TLS listeners, with a "
                       "throwaway CA and a SCRAM/PLAIN user (files under DATA/tls)")  # fmt: skip
    start.set_defaults(func=_cmd_start)

    stop = sub.add_parser("stop", help="stop the broker of --data by its recorded pid")
    stop.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL")
    stop.set_defaults(func=_cmd_stop)

    status = sub.add_parser("status", help="say whether the broker of --data runs, and where")
    status.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    status.set_defaults(func=_cmd_status)

"""`runwatch notify`: read alert transitions from Kafka and tell Slack.

Consumes runwatch.alerts in its own consumer group and routes each transition by the run
labels it carries. Offsets are committed after each batch; what was sent is recorded by
transition id in the state file, so a restart resends nothing and, with the commit after the
send, loses nothing. While Slack is unreachable a transition is retried with backoff (up to a
minute apart) and nothing after it is committed.

With --health-port it serves /healthz (the loop turns), /readyz (the alert partitions are
assigned and caught up) and /metrics (transitions by outcome, Slack calls, lag).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from runwatch.commands import CommandError
from runwatch.commands.kafka_args import (
    add_health_args,
    add_kafka_security_args,
    kafka_security,
)
from runwatch.emitters.topics import Topics
from runwatch.notify.config import ConfigProblem, NotifyConfig
from runwatch.notify.kafka import NotifySettings, run
from runwatch.notify.notifier import Notifier
from runwatch.notify.slack import TokenMissing
from runwatch.stopping import stop_on_signals
from runwatch.stream.exceptions import PortUnavailable
from runwatch.stream.kafka.connect import kafka_problem

log = logging.getLogger("runwatch.notify")

HELP = __doc__


def register(sub: Any) -> None:
    p = sub.add_parser(
        "notify",
        help="send alert transitions from Kafka to Slack",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kafka", required=True, metavar="HOST:PORT", help="bootstrap servers")
    p.add_argument("--config", metavar="PATH", help="TOML file with a [slack] table")
    p.add_argument("--channel", help="default channel (overrides slack.channel)")
    p.add_argument("--grafana-url", help="Grafana base URL for drill-down links")
    p.add_argument(
        "--state", help="state file (default $RUNWATCH_NOTIFY_DB or ./runwatch-notify.sqlite)"
    )
    p.add_argument("--slack-url", dest="base_url", help="Slack API base URL (for testing)")
    p.add_argument("--repeat-interval", type=float, help="seconds between reminders (0: off)")
    p.add_argument("--topic-prefix", default="")
    p.add_argument("--group", default="runwatch-notify", help="consumer group")
    add_health_args(p, "9466")
    add_kafka_security_args(p)
    p.set_defaults(func=run_notify)


def run_notify(args: argparse.Namespace) -> int:
    security = kafka_security(args)  # the settings first, the broker last
    try:
        config = NotifyConfig.load(
            args.config,
            channel=args.channel,
            state=args.state,
            grafana_url=args.grafana_url,
            base_url=args.base_url,
            repeat_interval=args.repeat_interval,
        )
        notifier = Notifier.from_config(config)
    except (ConfigProblem, TokenMissing) as err:
        raise CommandError(f"{err}") from None
    if problem := kafka_problem(args.kafka, security, 5.0):
        notifier.close()
        raise CommandError(f"{problem}", 1)
    settings = NotifySettings(
        bootstrap=args.kafka,
        group=args.group,
        topics=Topics(args.topic_prefix),
        security=security,
        health_port=args.health_port,
        health_host=args.health_host,
    )
    try:
        return run(settings, notifier, stop_on_signals())
    except PortUnavailable as err:
        raise CommandError(f"--health-port: {err}") from None
    finally:
        notifier.close()

"""`runwatch notify`: read alert transitions from Kafka and tell Slack.

Consumes runwatch.alerts in its own consumer group and routes each transition by the run
labels it carries. Offsets are committed after each batch; what was sent is recorded by
transition id in the state file, so a restart resends nothing and, with the commit after the
send, loses nothing. While Slack is unreachable a transition is retried with backoff (up to a
minute apart) and nothing after it is committed.

With --health-port it serves /healthz (the loop turns), /readyz (the alert partitions are
assigned and caught up) and /metrics (transitions by outcome, Slack calls, lag).

`runwatch notify --test --config slack.toml` posts a test message in every channel the
config routes to and checks the scopes the notifier needs -- for `runwatch serve
--slack-config` too (the same file); it needs no Kafka.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from runwatch.commands.kafka_args import (
    add_health_args,
    add_kafka_security_args,
    kafka_security,
)
from runwatch.emitters import env
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError, ConfigProblem, TokenMissing
from runwatch.logs import say
from runwatch.notify.config import NotifyConfig
from runwatch.notify.kafka import NotifySettings, run
from runwatch.notify.notifier import Notifier
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
    p.add_argument("--kafka", metavar="HOST:PORT", default=env.get(env.KAFKA),
                   help="bootstrap servers (default $RUNWATCH_KAFKA)")  # fmt: skip
    p.add_argument("--config", metavar="PATH", help="TOML file with a [slack] table")
    p.add_argument("--test", action="store_true", help="post a test message in each channel "
                   "the config routes to, check the bot's scopes, and exit")  # fmt: skip
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


def run_test(config: NotifyConfig) -> int:
    """`--test`: 0 when every channel took the message, 1 when one did not, 2 when Slack
    refused the token."""
    from runwatch.notify.slack import SlackPoster, load_token
    from runwatch.notify.trial import run_trial

    try:
        poster = SlackPoster(load_token(config.token_file), base_url=config.base_url,
                             max_attempts=3)  # fmt: skip
    except TokenMissing as err:
        raise CommandError(f"{err}") from None
    found = run_trial(config, poster)
    for line in found.posted:
        print(line)
    for line in found.warnings:
        say(f"warning: {line}")
    for line in found.errors:
        log.error("%s", line)
    if found.token_refused:
        return 2
    return 1 if found.errors else 0


def run_notify(args: argparse.Namespace) -> int:
    if args.test:
        try:
            config = NotifyConfig.load(args.config, channel=args.channel, base_url=args.base_url)
        except ConfigProblem as err:
            raise CommandError(f"{err}") from None
        return run_test(config)
    if not args.kafka:
        raise CommandError("no Kafka given: pass --kafka HOST:PORT or set RUNWATCH_KAFKA (or "
                           "--test to post a test message)")  # fmt: skip
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

"""`runwatch notify`: read alert transitions from Kafka and tell Slack.

Consumes runwatch.alerts in its own consumer group (and run.started events from
runwatch.events, for routing by run label). Offsets are committed after each batch; what
was sent is recorded by transition id in the state file, so a restart resends nothing and,
with the commit after the send, loses nothing.

With --health-port it serves /healthz (the loop turns), /readyz (the alert partitions are
assigned and caught up) and /metrics (transitions by outcome, Slack calls, lag).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import orjson

from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.kafka_cli import (
    add_health_args,
    add_kafka_security_args,
    kafka_problem,
    kafka_security,
    quiet_transient_kafka_errors,
)
from runwatch.notifier import Notifier
from runwatch.notify_config import ConfigProblem, NotifyConfig
from runwatch.notify_health import NotifyHealth
from runwatch.slack_client import AUTH_ERRORS, SlackError, TokenMissing
from runwatch.stopping import stop_on_signals
from runwatch.stream.exceptions import PortUnavailable

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
    logging.basicConfig(level=logging.INFO, format="runwatch notify: %(message)s")
    quiet_transient_kafka_errors()
    security = kafka_security(args, "notify")
    if security is None:
        return 2
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
        print(f"runwatch notify: {err}", file=sys.stderr)
        return 2
    try:
        return _consume(args, notifier, security)
    finally:
        notifier.close()


def _consume(args: argparse.Namespace, notifier: Notifier, security: KafkaSecurity) -> int:
    if problem := kafka_problem(args.kafka, security, 5.0):
        print(f"runwatch notify: {problem}", file=sys.stderr)
        return 1
    alerts_topic = f"{args.topic_prefix}runwatch.alerts"
    events_topic = f"{args.topic_prefix}runwatch.events"
    try:
        health = NotifyHealth(notifier, alerts_topic, args.health_port, args.health_host)
    except PortUnavailable as err:
        print(f"runwatch notify: --health-port: {err}", file=sys.stderr)
        return 2
    try:
        return _loop(args, notifier, security, health, alerts_topic, events_topic)
    finally:
        health.close()


def _loop(
    args: argparse.Namespace,
    notifier: Notifier,
    security: KafkaSecurity,
    health: NotifyHealth,
    alerts_topic: str,
    events_topic: str,
) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=args.kafka,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **security.kafka_python(),
    )
    stop = stop_on_signals()
    try:
        notifier.recover()
    except SlackError as err:
        log.warning("recovery check skipped: %s", err.error)
    consumer.subscribe([alerts_topic, events_topic])
    log.info("sending %s to Slack (default channel %s)", alerts_topic, notifier.config.channel)
    backoff = 1.0
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=500, max_records=500)
            health.observe(consumer)
            # labels first, so an alert in the same batch routes by them
            for tp, records in batch.items():
                if tp.topic == events_topic:
                    for r in records:
                        _learn(notifier, r.value)
            failed = False
            for tp, records in batch.items():
                if tp.topic != alerts_topic:
                    continue
                for r in records:
                    try:
                        alert = orjson.loads(r.value or b"")
                        if isinstance(alert, dict) and "id" in alert and "key" in alert:
                            health.handled(notifier.notify(alert))
                    except orjson.JSONDecodeError:
                        continue
                    except SlackError as err:
                        if err.error in AUTH_ERRORS:
                            print(
                                f"runwatch notify: Slack refused the bot token ({err.error})",
                                file=sys.stderr,
                            )
                            return 2
                        consumer.seek(TopicPartition(tp.topic, tp.partition), r.offset)
                        failed = True
                        break
            if batch:
                consumer.commit()
            try:
                health.reminders.inc(notifier.remind())
            except SlackError as err:
                log.warning("reminders deferred: %s", err.error)
            if failed:
                health.retries.inc()
                log.warning("Slack unreachable: retrying in %.0fs", backoff)
                time.sleep(backoff)
                backoff = min(60.0, backoff * 2)
            else:
                backoff = 1.0
    finally:
        consumer.close()
    return 0


def _learn(notifier: Notifier, value: bytes | None) -> None:
    if not value or b'"run.started"' not in value:
        return
    try:
        event = orjson.loads(value)
    except orjson.JSONDecodeError:
        return
    labels = event.get("labels") if isinstance(event, dict) else None
    if event.get("kind") == "run.started" and isinstance(labels, dict):
        notifier.learn_labels(str(event.get("run")), {str(k): str(v) for k, v in labels.items()})

"""`runwatch notify`'s consuming side: alert transitions from Kafka into the Slack notifier,
offsets committed after each batch; routing labels come with each alert."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from runwatch.commands.kafka_args import kafka_problem
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.notify.health import NotifyHealth
from runwatch.notify.notifier import Notifier
from runwatch.notify.slack import AUTH_ERRORS, SlackError
from runwatch.stopping import stop_on_signals
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert, PortUnavailable

log = logging.getLogger("runwatch.notify")


def consume(args: argparse.Namespace, notifier: Notifier, security: KafkaSecurity) -> int:
    if problem := kafka_problem(args.kafka, security, 5.0):
        print(f"runwatch notify: {problem}", file=sys.stderr)
        return 1
    alerts_topic = Topics(args.topic_prefix).alerts
    try:
        health = NotifyHealth(notifier, alerts_topic, args.health_port, args.health_host)
    except PortUnavailable as err:
        print(f"runwatch notify: --health-port: {err}", file=sys.stderr)
        return 2
    try:
        return _loop(args, notifier, security, health, alerts_topic)
    finally:
        health.close()


def _loop(
    args: argparse.Namespace,
    notifier: Notifier,
    security: KafkaSecurity,
    health: NotifyHealth,
    alerts_topic: str,
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
    consumer.subscribe([alerts_topic])
    log.info("sending %s to Slack (default channel %s)", alerts_topic, notifier.config.channel)
    backoff = 1.0
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=500, max_records=500)
            health.observe(consumer)
            failed = False
            for tp, records in batch.items():
                if tp.topic != alerts_topic:
                    continue
                for r in records:
                    try:
                        health.handled(notifier.notify(Alert.from_json(r.value or b"")))
                    except InvalidAlert as err:
                        log.warning("skipped %s/%d@%d: %s", tp.topic, tp.partition, r.offset, err)
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

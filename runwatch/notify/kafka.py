"""`runwatch notify`'s consuming side: alert transitions from `runwatch.alerts` into Slack.

The one consuming loop (`runwatch.stream.kafka.consume`) in the notifier's own consumer group,
committing after each batch; each batch goes through `Delivery` (the notifier's one retry
policy) at once, so a burst of replies folds into fewer messages, a batch is committed only
once Slack has taken every transition in it, and the
notifier's ledger keeps a transition read twice from being sent twice. Routing labels come
with each alert. A refused token stops the notifier (exit 2) without committing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.topics import Topics
from runwatch.exceptions import DeliveryStopped, SlackError
from runwatch.notify.delivery import Delivery
from runwatch.notify.notifier import Notifier
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert, StopConsuming
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.consume import ConsumingLoop, Group, Handler, Record
from runwatch.stream.metrics.roles import NotifyEndpoints

log = logging.getLogger("runwatch.notify")


@dataclass(frozen=True)
class NotifySettings:
    bootstrap: str
    group: str = "runwatch-notify"
    topics: Topics = field(default_factory=Topics)
    security: KafkaSecurity = PLAINTEXT
    health_port: int | None = None
    health_host: str = "0.0.0.0"


class SlackRefused(StopConsuming):
    """Slack refused the bot token: nothing can be sent until it is fixed."""


class AlertsToSlack(Handler):
    """The loop's handler: each transition to Slack, in order, retried until Slack takes it."""

    def __init__(self, delivery: Delivery, health: NotifyEndpoints) -> None:
        self.delivery = delivery
        self.health = health
        self.loop: ConsumingLoop | None = None

    async def handle(self, records: list[Record]) -> None:
        alerts = []
        for r in records:
            try:
                alerts.append(Alert.from_json(r.value or b""))
            except InvalidAlert as err:
                log.warning("skipped %s/%d@%d: %s", r.topic, r.partition, r.offset, err)
                self.health.handled("invalid")
        if not alerts:
            return
        try:  # the batch at once: a burst folds into fewer messages
            outcomes = await asyncio.to_thread(self.delivery.deliver_many, alerts)
        except DeliveryStopped as err:
            raise StopConsuming(str(err)) from None
        except SlackError as err:  # not retryable: the token was refused
            raise SlackRefused(f"Slack refused the bot token ({err.error})") from None
        for outcome in outcomes:
            self.health.handled(outcome)

    async def turn(self) -> None:
        if self.loop is not None:
            self.health.lag = self.loop.lag()
        self.health.reminders.inc(await asyncio.to_thread(self.delivery.remind))
        await asyncio.to_thread(self.delivery.tidy)  # roots catch up as the budget allows


def run(settings: NotifySettings, notifier: Notifier, stop: threading.Event) -> int:
    """Send until `stop` is set; the exit status (2: Slack refused the token). Raises
    PortUnavailable for a health port that is taken."""
    health = NotifyEndpoints(
        lambda: notifier.poster.calls, settings.health_port, settings.health_host
    )
    try:

        def waiting(seconds: float) -> None:  # Slack's outage is not a hang of the loop
            health.retries.inc()
            health.health.beat(grace=seconds + health.health.stall)

        handler = AlertsToSlack(Delivery(notifier, stop=stop, on_wait=waiting), health)
        handler.delivery.recover()

        async def consume() -> None:  # aiokafka's consumer is made on the loop it runs on
            consumer = clients.consumer(settings.bootstrap, settings.security,
                                        group=settings.group)  # fmt: skip
            handler.loop = ConsumingLoop(consumer, Group((settings.topics.alerts,)), handler,
                                         stop=stop.is_set, commit=True, max_records=500,
                                         poll_ms=500, health=health.health,
                                         name="notify")  # fmt: skip
            await handler.loop.run()

        log.info("sending %s to Slack (default channel %s)", settings.topics.alerts,
                 notifier.config.channel)  # fmt: skip
        try:
            asyncio.run(consume())
        except SlackRefused as err:
            log.error("%s", err)
            return 2
        except StopConsuming:
            pass
        return 0
    finally:
        health.close()

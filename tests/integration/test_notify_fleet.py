"""`runwatch notify` against a real broker and the strict Slack with Slack's rate limits on (in
wall time): a fleet incident's storm of forty member runs on a topic of four partitions (each
run's alerts in order, the fleet alert on a key of its own) becomes one thread, every
transition in it once, no 429 -- also when the members' alerts are read before the fleet
alert's."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from test_live_surfaces import TOKEN, Proc, send, wait_for

from harness.fleet_alerts import CAUSE, storm
from harness.slack_server import FakeSlack
from runwatch.stream.alerts import Alert

pytestmark = pytest.mark.integration


def _shown(slack: FakeSlack) -> list[str]:
    out: list[str] = []
    for m in list(slack.messages):
        payload = (m.metadata or {}).get("event_payload") or {}
        out += [i for i in payload.get("alert_ids") or () if not str(i).startswith("fleet:")]
    return out


def test_a_storm_from_kafka_is_one_thread_under_slack_s_limits(
    kafka_broker: str, producer: KafkaProducer, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    topic = f"{prefix}runwatch.alerts"
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
    finally:
        admin.close()
    slack = FakeSlack(token=TOKEN, channels=("C-ALL",))
    slack.add_channel("#all", "C-ALL")
    s = storm(40, initial=0, t0=time.time() - 3600)
    runs = [k for k in s if k != "@fleet"]
    # the members' firings first: their partitions are read before the fleet alert's
    fired = [a for run in runs for a in s[run] if a.firing]
    healed = [a for run in runs for a in s[run] if not a.firing]
    every = [*fired, *s["@fleet"], *healed]

    def publish(alerts: list[Alert]) -> None:
        for a in alerts:
            send(producer, topic, a.run, a.to_dict())
        producer.flush()

    publish(fired)
    notify = Proc(["notify", "--kafka", kafka_broker, "--topic-prefix", prefix, "--channel",
                   "#all", "--state", str(tmp_path / "state.sqlite"), "--slack-url", slack.url,
                   "--group", f"g-{uuid.uuid4().hex}"], {"SLACK_BOT_TOKEN": TOKEN})  # fmt: skip
    try:
        wait_for(lambda: sorted(_shown(slack)) == sorted(a.id for a in fired),
                 "the members' firings shown", notify)  # fmt: skip
        (root,) = slack.roots()
        assert CAUSE not in root.text  # a stand-in root: the fleet alert has not come
        publish(s["@fleet"][:1])
        wait_for(lambda: CAUSE in root.text, "the fleet alert names the cause", notify)
        publish([*healed, *s["@fleet"][1:]])
        wait_for(lambda: sorted(_shown(slack)) == sorted(a.id for a in every),
                 "every transition shown", notify)  # fmt: skip
        wait_for(lambda: "40 runs, all healed" in root.text, "the root, healed", notify)
    finally:
        notify.stop()
        slack.close()
    assert notify.proc.returncode == 0, notify.lines[-20:]
    assert slack.roots() == [root]  # one thread
    assert slack.limited == []  # paced: Slack never refused a call
    assert len(slack.messages) < len(every) / 4  # the bursts folded
    assert TOKEN not in "\n".join(notify.lines)

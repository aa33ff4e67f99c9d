"""`runwatch notify --health-port` against a real broker and a fake Slack: /readyz 503 until
the alert partitions are assigned and caught up, then 200; /healthz 200; /metrics counts the
transitions by outcome; a taken port fails in one line."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from helpers import http_get
from kafka import KafkaProducer
from test_live_surfaces import (
    RUNWATCH,
    TOKEN,
    Proc,
    alert,
    event,
    free_port,
    send,
    wait_for,
)
from test_sink_health import samples

from harness.slack_server import FakeSlack

pytestmark = pytest.mark.integration


def _args(kafka: str, prefix: str, tmp_path: Path, slack_url: str, port: int) -> list[str]:
    return ["notify", "--kafka", kafka, "--topic-prefix", prefix, "--channel", "#all",
            "--state", str(tmp_path / "state.sqlite"), "--slack-url", slack_url,
            "--group", f"g-{uuid.uuid4().hex}", "--health-port", str(port),
            "--health-host", "127.0.0.1"]  # fmt: skip


def test_notify_serves_health_readiness_and_metrics(
    kafka_broker: str, producer: KafkaProducer, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    slack = FakeSlack(token=TOKEN, channels=("C-ALL",))
    slack.add_channel("#all", "C-ALL")
    trainer = {"component": "trainer", "host": "n0", "pid": 1}
    send(producer, f"{prefix}runwatch.events", "a", event("run.started", "a", trainer))
    for a in (alert(1, "a"), alert(1, "b"), alert(2, "a", "resolved"), alert(1, "a")):
        send(producer, f"{prefix}runwatch.alerts", a["run"], a)
    producer.flush()
    port = free_port()
    notify = Proc(
        _args(kafka_broker, prefix, tmp_path, slack.url, port), {"SLACK_BOT_TOKEN": TOKEN}
    )
    try:
        answers: list[tuple[int, str]] = []

        def ready() -> bool:
            if (answer := http_get(port, "/readyz")) is not None:
                answers.append(answer)
            return bool(answers) and answers[-1][0] == 200

        # the first answer as soon as the port listens, before the group join can finish
        deadline = time.monotonic() + 60
        while (first := http_get(port, "/readyz")) is None and time.monotonic() < deadline:
            assert notify.proc.poll() is None, notify.lines[-20:]
            time.sleep(0.002)
        assert first is not None
        answers.append(first)
        wait_for(ready, "/readyz 200", notify)
        assert answers[0][0] == 503, answers  # up before it is in its group
        for status, reason in answers[:-1]:
            assert status == 503
            assert reason.startswith(("no partitions assigned yet", "waiting for Kafka to answer",
                                      "catching up: ")), reason  # fmt: skip
        assert re.fullmatch(r"caught up on 1 partitions \(0 records behind\)\n", answers[-1][1])
        assert http_get(port, "/healthz") == (200, "consuming\n")
        # the quick resolve of run a is folded into its root (one message, edited), as in
        # serve: Kafka's notifier is the same Notifier
        resolved = alert(2, "a", "resolved")["id"]

        def folded() -> bool:
            root_a = [m for m in slack.roots() if "— a" in m.text]
            meta = root_a[0].metadata if root_a else None
            return bool(meta) and meta["event_payload"]["alert_id"] == resolved  # type: ignore[index]

        wait_for(folded, "run a's resolve folded into its root", notify)
        assert len(slack.messages) == 2  # two roots, no reply

        def outcomes() -> dict[str, float]:
            return {dict(labels)["outcome"]: value
                    for (name, labels), value in samples(port).items()
                    if name == "runwatch_notify_transitions_total"}  # fmt: skip

        wait_for(lambda: outcomes() == {"sent": 3, "duplicate": 1}, "counted", notify)
        got = samples(port)
        assert got[("runwatch_notify_slack_calls_total", ())] >= 3  # two posts and the fold
        lag = (("partition", "0"), ("topic", f"{prefix}runwatch.alerts"))
        assert got[("runwatch_notify_lag_records", lag)] == 0
        assert got[("runwatch_notify_retries_total", ())] == 0
    finally:
        notify.stop()
        slack.close()
    assert notify.proc.returncode == 0, notify.lines[-20:]


def test_a_taken_health_port_fails_in_one_line(kafka_broker: str, tmp_path: Path) -> None:
    slack = FakeSlack(token=TOKEN)
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            started = time.monotonic()
            done = subprocess.run(
                [RUNWATCH, *_args(kafka_broker, "x.", tmp_path, slack.url, port)],
                capture_output=True, text=True, timeout=60, check=False,
                env={"SLACK_BOT_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
            )  # fmt: skip
    finally:
        slack.close()
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"runwatch notify: --health-port: cannot listen on 127.0.0.1:{port}: Address already in use"
    ], done.stderr
    assert time.monotonic() - started < 30

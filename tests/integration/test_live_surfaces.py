"""The live surfaces over the real broker: `runwatch worker --metrics-port` serves the run
states it holds, and `runwatch notify` turns runwatch.alerts into Slack threads (a local
fake of the Slack Web API) without repeating any after a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import group_committed, terminate
from kafka import KafkaProducer

from harness.slack_server import FakeSlack
from runwatch.dev import envelope
from runwatch.dev.broker import free_port

pytestmark = pytest.mark.integration

RUNWATCH = str(Path(sys.executable).with_name("runwatch"))
TOKEN = "xoxb-integration-SECRET-1234"


class Proc:
    """A runwatch subprocess whose stderr is collected."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [RUNWATCH, *args],
            stderr=subprocess.STDOUT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name="proc-output")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def stop(self) -> None:
        terminate(self.proc)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def wait_for(check: Callable[[], Any], what: str, proc: Proc, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc.proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s\n" + "\n".join(proc.lines[-30:]))


def send(producer: KafkaProducer, topic: str, key: str, value: dict[str, Any]) -> None:
    producer.send(topic, key=key.encode(), value=json.dumps(value).encode())


def event(kind: str, run: str, src: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return envelope.event(kind, time.time(), run, src, **fields)


def test_worker_serves_metrics(kafka_broker: str, producer: KafkaProducer) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    port = free_port()
    worker = Proc(
        [
            "worker",
            "--kafka",
            kafka_broker,
            "--topic-prefix",
            prefix,
            "--app-id",
            f"rw-{uuid.uuid4().hex[:8]}",
            "--partitions",
            "2",
            "--metrics-port",
            str(port),
        ]
    )
    try:
        wait_for(lambda: any("live on partitions" in x for x in worker.lines), "live", worker)
        rollout = {"component": "rollout", "host": "n1", "pid": 2}
        vllm = {"component": "inference", "host": "n2", "pid": 3, "instance": "vllm-0"}
        send(
            producer,
            f"{prefix}runwatch.events",
            "m-run",
            event("run.started", "m-run", rollout, labels={"team": "math"}),
        )
        for i in range(3):
            send(
                producer,
                f"{prefix}runwatch.events",
                "m-run",
                event("trajectory.started", "m-run", rollout, traj=f"t{i}"),
            )
        send(
            producer,
            f"{prefix}runwatch.events",
            "m-run",
            event("inference.stats", "m-run", vllm, server="vllm-0", running=0, waiting=0),
        )
        producer.send(f"{prefix}runwatch.events", key=b"m-run", value=b"not json")
        producer.flush()

        def scrape() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read().decode()
            except OSError:
                return None
            return body if "runwatch_events_invalid_total 1.0" in body else None

        body = wait_for(scrape, "metrics of the run", worker)
        assert 'runwatch_trajectories_pending{run="m-run",phase="generate"} 3.0' in body
        assert 'runwatch_inference_server_idle{run="m-run",server="vllm-0"} 1.0' in body
        assert 'runwatch_events_total{kind="trajectory.started"} 3.0' in body
        assert 'runwatch_run_label{run="m-run",name="team",value="math"} 1.0' in body
        assert "runwatch_processing_lag_seconds" in body
    finally:
        worker.stop()


def alert(n: int, run: str, state: str = "firing", **labels: str) -> dict[str, Any]:
    """A transition as a worker publishes it: with the run's labels (contract §3)."""
    key = f"zero_reward|{run}"
    return {
        "v": 1,
        "id": f"{key}#{n}",
        "ts": time.time(),
        "rule": "zero_reward",
        "run": run,
        "state": state,
        "severity": "critical",
        "key": key,
        "since": time.time() - 60,
        "summary": f"reward 0 ({state})",
        "details": {"count": 5},
        **({"labels": labels} if labels else {}),
    }


def test_notify_from_kafka_threads_routes_and_no_repeat_after_restart(
    kafka_broker: str, producer: KafkaProducer, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    slack = FakeSlack(token=TOKEN, channels=("C-ALL", "C-MATH"))
    slack.add_channel("#all", "C-ALL")
    slack.add_channel("#math-rl", "C-MATH")
    config = tmp_path / "notify.toml"
    config.write_text(
        # every transition its own message here (a quick resolve folds: test_notify_health)
        '[slack]\nchannel = "#all"\nfold_within = 0\n\n[[slack.routes]]\n'
        'match = { team = "math" }\nchannel = "#math-rl"\n'
    )
    args = [
        "notify",
        "--kafka",
        kafka_broker,
        "--topic-prefix",
        prefix,
        "--config",
        str(config),
        "--state",
        str(tmp_path / "state.sqlite"),
        "--slack-url",
        slack.url,
    ]
    env = {"SLACK_BOT_TOKEN": TOKEN}
    alerts = f"{prefix}runwatch.alerts"
    outputs: list[str] = []
    try:
        send(producer, alerts, "math-run", alert(1, "math-run", team="math"))
        send(producer, alerts, "other-run", alert(1, "other-run"))
        producer.flush()
        first = Proc([*args, "--group", "g1"], env)
        try:
            wait_for(lambda: len(slack.roots()) == 2, "two threads", first)
        finally:
            first.stop()
            outputs += first.lines
        assert {m.channel for m in slack.roots()} == {"C-MATH", "C-ALL"}
        # a new consumer group re-reads everything: the ledger keeps it from repeating
        send(producer, alerts, "math-run", alert(2, "math-run", "resolved", team="math"))
        producer.flush()
        second = Proc([*args, "--group", "g2"], env)
        try:
            wait_for(lambda: len(slack.messages) == 3, "the resolve", second)
            # it commits a batch once Slack answered: all read is all it will post
            group_committed(kafka_broker, "g2", alerts, None)
        finally:
            second.stop()
            outputs += second.lines
        assert len(slack.messages) == 3
        (root,) = [m for m in slack.roots() if m.channel == "C-MATH"]
        assert [r.text for r in slack.replies(root)] == [
            ":white_check_mark: Resolved: reward 0 (resolved)"
        ]
        assert root.updates
    finally:
        slack.close()
    assert TOKEN not in "\n".join(outputs)

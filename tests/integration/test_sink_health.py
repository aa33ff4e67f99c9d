"""`runwatch sink --health-port` against a real broker: /readyz says "catching up" while the
sink is behind and 200 once it has caught up, /healthz stays 200 through a slow flush, and
/metrics counts what was written; a taken port fails in one line."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import http_get
from prometheus_client.parser import text_string_to_metric_families
from test_sink import RUNWATCH, SinkProcess, produce, stored, stored_rows, wait_until

from runwatch.dev import scenarios
from runwatch.dev.broker import free_port

pytestmark = pytest.mark.integration


def samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = http_get(port, "/metrics")
    assert answer is not None
    assert answer[0] == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer[1])
        for s in family.samples
    }


def _args(broker: str, topic: str, group: str, db: Path, port: int) -> list[str]:
    return ["--kafka", broker, "--db", str(db), "--group", group, "--events-topic", topic,
            "--alerts-topic", topic + ".alerts", "--flush-interval", "0.2", "-q",
            "--health-port", str(port), "--health-host", "127.0.0.1"]  # fmt: skip


def test_behind_is_not_ready_and_a_held_flush_is_still_alive(
    kafka_broker: str, kafka_topic: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    events = scenarios.sandbox_hang()[:6000]
    produce(kafka_broker, kafka_topic, [(e["run"], json.dumps(e).encode()) for e in events])
    port, marker = free_port(), tmp_path / "in-flush"
    sink = SinkProcess(
        [*_args(kafka_broker, kafka_topic, kafka_group, tmp_path / "h.duckdb", port),
         "--batch-size", "500"],
        held=(marker, 2),
    )  # fmt: skip
    sinks.append(sink)
    # the second batch never commits: the sink stops reading ~1,500 records in
    wait_until(marker.exists)
    wait_until(lambda: (http_get(port, "/readyz") or (0, ""))[1].startswith("catching up"))
    status, reason = http_get(port, "/readyz") or (0, "")
    assert status == 503
    behind = int(re.fullmatch(r"catching up: (\d+) records behind\n", reason)[1])  # type: ignore[index]
    assert 6000 - 2000 <= behind <= 6000 - 1000
    # waiting on a flush (which has its own deadline) is not a hang
    assert http_get(port, "/healthz") == (200, "consuming\n")
    got = samples(port)
    assert got[("runwatch_sink_batches_total", ())] == 1
    assert got[("runwatch_sink_events_total", ())] == 500
    lag = got[("runwatch_sink_lag_records", (("partition", "0"), ("topic", kafka_topic)))]
    assert lag == behind
    sink.kill9()


def test_ready_once_caught_up_and_metrics_count_every_record_written(
    kafka_broker: str, kafka_topic: str, kafka_group: str, tmp_path: Path, sinks: list[SinkProcess]
) -> None:
    events = scenarios.zero_reward(last_step=300)[:3000]
    values = [(e["run"], json.dumps(e).encode()) for e in events]
    values += values[:100]  # sent twice: written once
    values.append(("bad-run", b"{not json"))
    alert = {"v": 1, "id": "a1", "ts": 1.0, "rule": "zero_reward", "run": "r",
             "state": "firing", "severity": "critical", "key": "zero_reward|r", "since": 1.0,
             "summary": "s"}  # fmt: skip
    produce(kafka_broker, kafka_topic, values)
    produce(kafka_broker, kafka_topic + ".alerts", [("r", json.dumps(alert).encode())])
    port, db = free_port(), tmp_path / "h.duckdb"
    sink = SinkProcess([*_args(kafka_broker, kafka_topic, kafka_group, db, port),
                        "--batch-size", "1000"])  # fmt: skip
    sinks.append(sink)
    answers: list[tuple[int, str]] = []
    deadline = time.monotonic() + 120
    while not answers or answers[-1][0] != 200:
        assert time.monotonic() < deadline, answers[-5:]
        assert sink.proc.poll() is None, "the sink exited"
        if (answer := http_get(port, "/readyz")) is not None:
            answers.append(answer)
        time.sleep(0.02)
    # the endpoint is up before the sink is in its group: not ready first
    assert answers[0][0] == 503
    for status, reason in answers[:-1]:
        assert status == 503
        assert reason.startswith(("no partitions assigned yet", "waiting for Kafka to answer",
                                  "catching up: ")), reason  # fmt: skip
    assert re.fullmatch(r"caught up on 2 partitions \(\d+ records behind\)\n", answers[-1][1])
    assert http_get(port, "/healthz") == (200, "consuming\n")

    def written() -> float:
        return samples(port)[("runwatch_sink_events_total", ())]

    wait_until(lambda: written() == len(values) - 1, timeout=60)  # ready: read, soon written
    got = samples(port)
    assert got[("runwatch_sink_new_events_total", ())] == len(events)
    assert got[("runwatch_sink_alerts_total", ())] == 1
    assert got[("runwatch_sink_invalid_total", ())] == 1
    assert got[("runwatch_sink_batches_total", ())] >= 2  # a batch holds < 2 getmany results
    assert 0 <= got[("runwatch_sink_last_batch_age_seconds", ())] < 60
    assert got[("runwatch_sink_last_batch_seconds", ())] > 0
    assert got[("runwatch_sink_lag_records", (("partition", "0"), ("topic", kafka_topic)))] == 0
    sink.stop()
    assert stored(db)[1] == len(events)


def test_a_taken_health_port_fails_in_one_line(
    kafka_broker: str, kafka_topic: str, kafka_group: str, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [RUNWATCH, "sink", *_args(kafka_broker, kafka_topic, kafka_group,
                                      tmp_path / "h.duckdb", port)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"runwatch sink: --health-port: cannot listen on 127.0.0.1:{port}: Address already in use"
    ], done.stderr


def test_a_history_that_cannot_be_written_is_not_ready_and_loses_nothing(
    kafka_broker: str,
    kafka_topic: str,
    kafka_group: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The disk is full for a while: /readyz says so, the failures are counted and said once,
    the sink goes on running, and once the disk has room every event is stored once."""
    import threading

    from runwatch.store.sink import Sink, SinkSettings
    from runwatch.store.writer import BatchWriter

    events = scenarios.orchestrator_dies()
    produce(kafka_broker, kafka_topic, [(e["run"], json.dumps(e).encode()) for e in events])
    full = threading.Event()
    full.set()
    write = BatchWriter._write

    def full_disk(self: BatchWriter, *args: object) -> object:
        if full.is_set():
            raise OSError(28, "No space left on device")
        return write(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(BatchWriter, "_write", full_disk)
    port, db, stop = free_port(), tmp_path / "h.duckdb", threading.Event()
    config = SinkSettings(kafka_broker, db, group=kafka_group, events_topic=kafka_topic,
                        alerts_topic=kafka_topic + ".alerts", flush_interval=0.2,
                        health_port=port, health_host="127.0.0.1")  # fmt: skip
    sink = Sink(config, stop=stop)
    runner = threading.Thread(target=sink.run, name="test-sink")
    with caplog.at_level("INFO", logger="runwatch"):
        runner.start()
        try:
            wait_until(lambda: "No space left" in (http_get(port, "/readyz") or (0, ""))[1])
            assert (http_get(port, "/readyz") or (0, ""))[0] == 503
            wait_until(lambda: samples(port)[("runwatch_sink_history_write_failures", ())] >= 2)
            assert runner.is_alive()
            full.clear()  # room again
            # ready first: the sink creates the history at its first write, and a reader that
            # opens the file while DuckDB writes its header can make that write fail once more
            wait_until(lambda: (http_get(port, "/readyz") or (0, ""))[0] == 200)
            wait_until(lambda: stored_rows(db) == len(events))
        finally:
            stop.set()
            runner.join(60)
    _, total, distinct = stored(db)
    assert total == distinct == len(events)
    said = [r.getMessage() for r in caplog.records if "cannot write the history" in r.getMessage()]
    assert len(said) == 1, said  # once per change of state, not per try
    assert any("written again" in r.getMessage() for r in caplog.records)

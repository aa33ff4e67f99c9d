"""`runwatch serve` on a busy, imperfect day, as a user and an attacker would try it: a
person holds the history file open while an incident runs, a second serve is started on
the same history, a thousand connections open and say nothing, a flood of run ids."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import wait_for
from test_serve import post

from harness.reader import HeldHistory
from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow


def metric(serve: ServeProcess, name: str) -> float:
    for line in serve.get("/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def events(run: str, *, timeout: float = 1.0) -> bytes:
    now = time.time()
    src = {"component": "inference", "host": "n0", "pid": 7, "instance": "vllm-0"}
    out = [
        {"v": 1, "id": f"{run}-0", "ts": now, "run": run, "kind": "run.started", "src": src,
         "config": {"heartbeat_lost": {"timeout": timeout}}},
        {"v": 1, "id": f"{run}-1", "ts": now, "run": run, "kind": "heartbeat", "src": src},
    ]  # fmt: skip
    return b"".join(json.dumps(e).encode() + b"\n" for e in out)


def test_a_reader_holding_the_history_delays_no_alert_and_no_acknowledgment(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.duckdb"
    with ServeProcess(db) as serve:
        assert post(serve.port, events("warmup", timeout=3600))[0] == 200
        wait_for(lambda: metric(serve, "runwatch_serve_history_lag_bytes") == 0, "the history")
        reader = HeldHistory(db)
        try:
            # the incident runs while the file is held: acknowledged, and alerted on time
            assert post(serve.port, events("held"))[0] == 200
            firing = wait_for(
                lambda: [a for a in serve.get("/v1/alerts?state=firing")["alerts"]
                         if a["run"] == "held"],
                "heartbeat_lost while the history is held",
            )  # fmt: skip
            assert reader.holding()  # the alert did not wait for the reader
            assert firing[0]["rule"] == "heartbeat_lost"
            assert post(serve.port, events("held-2", timeout=3600))[0] == 200
            assert metric(serve, "runwatch_serve_history_lag_bytes") > 0  # it is waiting
            assert serve.get("/readyz") == {"ready": True}  # a reader is not a failure
        finally:
            reader.release()
        # once the reader lets go, the history catches up with everything
        wait_for(lambda: metric(serve, "runwatch_serve_history_lag_bytes") == 0, "catching up")
        assert metric(serve, "runwatch_serve_history_lag_seconds") == 0
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        runs = dict(con.execute("SELECT run, count(*) FROM events GROUP BY run").fetchall())
        alerts = con.execute("SELECT rule, run FROM alert_log").fetchall()
    assert runs == {"warmup": 2, "held": 2, "held-2": 2}
    assert ("heartbeat_lost", "held") in alerts


def test_a_second_serve_on_the_same_history_refuses_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    with ServeProcess(db) as first:
        done = subprocess.run(
            [sys.executable, "-m", "runwatch.cli", "serve", "--db", str(db), "--port", "0"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"in use by another runwatch serve (pid {first.pid})" in lines[0]
        assert first.get("/readyz") == {"ready": True}


def test_a_thousand_silent_connections_and_a_flood_of_run_ids_leave_it_answering(
    tmp_path: Path,
) -> None:
    with ServeProcess(tmp_path / "h.duckdb", args=["--max-runs", "200"]) as serve:
        silent = []
        try:
            for _ in range(1000):  # no token, no request: each only holds a socket
                silent.append(socket.create_connection(("127.0.0.1", serve.port), timeout=30))
            assert post(serve.port, events("real", timeout=3600))[0] == 200
            assert serve.get("/readyz") == {"ready": True}
            # a flood of run ids: past the cap, refused (kept as dead letters), not tracked
            now = time.time()
            src = {"component": "trainer"}
            for batch in range(10):
                body = b"".join(
                    json.dumps({"v": 1, "id": f"f{batch}-{i}", "ts": now, "kind": "heartbeat",
                                "run": f"flood-{batch}-{i}", "src": src}).encode() + b"\n"
                    for i in range(500)
                )  # fmt: skip
                status, _ = post(serve.port, body)
                assert status in (200, 400)
            runs = serve.get("/v1/runs")["runs"]
            assert len(runs) == 200
            assert "real" in {r["run"] for r in runs}  # the watched run was not pushed out
            assert post(serve.port, events("real-2", timeout=3600))[0] == 400  # no room
            assert 'runwatch_serve_dead_letters_total{reason="over_capacity"}' in serve.get(
                "/metrics"
            )
            assert serve.get("/readyz") == {"ready": True}
        finally:
            for conn in silent:
                conn.close()

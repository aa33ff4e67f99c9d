"""serve's JSON API past ingest: the history (runs, a run's timeline, SQL), silences and
resume -- what `runwatch runs|show|sql|silence|resume --url` ask. Bad input gets a 4xx that
names it; nothing is changed by a refused request."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runwatch.notify.store import NotifyStore
from runwatch.service.core import Service
from runwatch.service.http import ServiceServer

from .test_follow import event, post


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServiceServer, Path]]:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve", flush_interval=0.05)
    service.recover()
    ledger = tmp_path / "notify.sqlite"
    front = ServiceServer(("127.0.0.1", 0), service, None, threads=2, silences=ledger)
    front.start()
    try:
        yield front, ledger
    finally:
        front.stop(timeout=30)
        service.close()


def call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def in_history(port: int, run: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        status, body = call(port, "GET", "/v1/history/runs")
        if status == 200 and any(r["run"] == run for r in body["runs"]):
            return list(body["runs"])
        assert time.monotonic() < deadline, (status, body)
        time.sleep(0.05)


def test_the_history_by_url(served: tuple[ServiceServer, Path]) -> None:
    port = served[0].server_address[1]
    assert call(port, "GET", "/v1/history/runs") == (200, {"runs": []})
    post(port, event("run.started", run="grpo/7b"), event("step.done", run="grpo/7b", step=1),
         event("component.failed", run="grpo/7b", error="boom", how="exception"))  # fmt: skip
    runs = in_history(port, "grpo/7b")
    assert runs[0]["last_step"] == 1
    status, timeline = call(port, "GET", "/v1/history/runs/grpo/7b?slowest=2")
    assert status == 200, timeline
    assert timeline["run"]["run"] == "grpo/7b"
    assert [s["step"] for s in timeline["steps"]] == [1]
    status, body = call(port, "GET", "/v1/history/runs/grpo-7")
    assert status == 404
    assert "closest: grpo/7b" in body["error"]
    status, body = call(port, "GET", "/v1/history/runs/grpo/7b?slowest=x")
    assert status == 400
    assert "slowest" in body["error"]


def test_sql_by_url_reads_and_refuses_to_write(served: tuple[ServiceServer, Path]) -> None:
    port = served[0].server_address[1]
    post(port, event("run.started", run="r1"))
    in_history(port, "r1")
    status, body = call(port, "POST", "/v1/sql", {"query": "SELECT run, kind FROM events"})
    assert status == 200, body
    assert body["results"] == [{"columns": ["run", "kind"], "rows": [["r1", "run.started"]],
                                "truncated": False}]  # fmt: skip
    status, body = call(port, "POST", "/v1/sql", {"query": "DROP TABLE events"})
    assert status == 400
    assert body["error"].startswith("refused: DROP")
    status, body = call(port, "POST", "/v1/sql", {"query": "SELECT 1", "max_row": 3})
    assert status == 400
    assert "max_row" in body["error"]
    status, body = call(port, "POST", "/v1/sql", b"{not json")
    assert status == 400
    assert "not JSON" in body["error"]
    status, body = call(port, "POST", "/v1/sql", {"query": "SELECT * FROM range(5)",
                                                  "max_rows": 2})  # fmt: skip
    assert len(body["results"][0]["rows"]) == 2
    assert body["results"][0]["truncated"]


def test_silences_by_url(served: tuple[ServiceServer, Path]) -> None:
    port, ledger = served[0].server_address[1], served[1]
    status, made = call(
        port,
        "POST",
        "/v1/silences",
        {"run": "r1", "rule": "zero_reward", "for_s": 3600, "comment": "known"},
    )
    assert status == 201, made
    silence = made["silence"]
    assert (silence["run"], silence["rule"], silence["comment"]) == ("r1", "zero_reward", "known")
    store = NotifyStore(ledger)  # where the Slack notifier reads them
    try:
        assert [s.id for s in store.silences()] == [silence["id"]]
    finally:
        store.close()
    assert call(port, "GET", "/v1/silences")[1]["silences"] == [silence]
    status, body = call(port, "POST", "/v1/silences", {"run": "r1", "for_s": -1})
    assert status == 400
    assert "for_s" in body["error"]
    status, body = call(port, "POST", "/v1/silences", {"run": "r1", "rule": "zero_rewrd",
                                                       "for_s": 60})  # fmt: skip
    assert status == 400
    assert "rule: no rule 'zero_rewrd' (did you mean zero_reward?)" in body["error"]
    status, body = call(port, "POST", "/v1/silences", {"run": "r1", "for": 60})
    assert status == 400
    assert "for_s" in body["error"]
    assert call(port, "DELETE", f"/v1/silences/{silence['id']}") == (200, {"removed": 1})
    status, body = call(port, "DELETE", f"/v1/silences/{silence['id']}")
    assert status == 404
    assert "no silence with id 1" in body["error"]
    assert call(port, "GET", "/v1/silences")[1]["silences"] == []


def test_silences_need_a_slack_notifier(tmp_path: Path) -> None:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    service.recover()
    front = ServiceServer(("127.0.0.1", 0), service, None, threads=1)
    front.start()
    try:
        status, body = call(front.server_address[1], "GET", "/v1/silences")
        assert status == 404
        assert "--slack-config" in body["error"]
    finally:
        front.stop(timeout=30)
        service.close()


def test_resume_by_url_lifts_the_breaker_before_it_answers(
    served: tuple[ServiceServer, Path],
) -> None:
    port = served[0].server_address[1]
    status, body = call(port, "POST", "/v1/resume", {"run": "nobody"})
    assert status == 404
    assert "no run 'nobody'" in body["error"]
    config = {"component_failed": {"action": "pause"}}
    post(port, event("run.started", config=config),
         event("component.failed", error="boom", how="exception"))  # fmt: skip
    assert call(port, "GET", "/v1/breaker/r1")[1]["alerts"]
    status, body = call(port, "POST", "/v1/resume", {"run": "r1", "by": "ana", "reason": "ok"})
    assert status == 200, body
    assert body["breaker"]["resumed"]["by"] == "ana"
    assert body["breaker"]["lifted"] == 1
    status, body = call(port, "POST", "/v1/resume", {"run": "r1", "rule": ""})
    assert status == 400
    assert "rule" in body["error"]

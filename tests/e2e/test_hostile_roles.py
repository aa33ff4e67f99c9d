"""The hostile corpus through the console script's roles: `replay`, `check`, `ingest` (then
`runs`, `show`, `export` still answer) and `serve` (including kill -9 mid-stream and a restart
that comes back ready). Each time: the valid stream's alerts as without the corpus, each
refused line reported or kept with its reason, and the role goes on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import orjson
import pytest
from hostile import CORPUS
from test_replay_cli import alerts_of, runwatch
from test_serve import post

from runwatch.dev import scenarios
from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

REFUSED = [i for i, (_, _, refused) in enumerate(CORPUS) if refused]


def woven(tmp: Path) -> tuple[Path, Path, dict[int, str], set[str]]:
    """The orchestrator incident alone, and with the corpus put in every 25 lines (each
    hostile line stamped with its neighbour's time); the hostile lines' numbers by name; the
    incident's run."""
    stream = [orjson.dumps(e) for e in scenarios.orchestrator_dies()]
    plain, mixed = tmp / "plain.jsonl", tmp / "mixed.jsonl"
    plain.write_bytes(b"\n".join(stream) + b"\n")
    out: list[bytes] = []
    numbers: dict[int, str] = {}
    for i, raw in enumerate(stream):
        if i and i % 25 == 0 and len(numbers) < len(CORPUS):
            name, line, _ = CORPUS[len(numbers)]
            out.append(line(json.loads(stream[i - 1])["ts"]))
            numbers[len(out)] = name  # 1-based line number
        out.append(raw)
    assert len(numbers) == len(CORPUS)
    mixed.write_bytes(b"\n".join(out) + b"\n")
    return plain, mixed, numbers, {json.loads(stream[0])["run"]}


def test_replay_and_check(tmp_path: Path) -> None:
    plain, mixed, numbers, runs = woven(tmp_path)
    alone = alerts_of(runwatch("replay", str(plain)))
    proc = runwatch("replay", str(mixed))
    assert proc.returncode == 0
    assert [a for a in alerts_of(proc) if a["run"] in runs] == alone
    err = proc.stderr.decode()
    reported = {int(line.split(":")[1]) for line in err.splitlines() if "invalid event" in line}
    refused = {n for n, name in numbers.items() if name in {CORPUS[i][0] for i in REFUSED}}
    assert reported == refused
    check = runwatch("check", str(mixed))
    assert check.returncode == 1
    listed = {int(line.split(":")[1]) for line in check.stdout.decode().splitlines()}
    assert listed == refused
    assert f"{len(refused)} invalid" in check.stderr.decode()
    assert runwatch("check", str(plain)).returncode == 0


def test_ingest_then_runs_show_export_still_answer(tmp_path: Path) -> None:
    plain, mixed, _, runs = woven(tmp_path)
    db = tmp_path / "h.duckdb"
    proc = runwatch("ingest", str(mixed), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        (events,) = con.execute("SELECT count(*) FROM events").fetchone()  # type: ignore[misc]
        (bad,) = con.execute("SELECT count(*) FROM invalid_events").fetchone()  # type: ignore[misc]
        stored = {r for (r,) in con.execute("SELECT DISTINCT run FROM alert_log").fetchall()}
    assert events == len(plain.read_bytes().splitlines()) + len(CORPUS) - len(REFUSED)
    assert bad == len(REFUSED)
    assert runs <= stored
    for args in (("runs",), ("show", *runs), ("show", "-hostile-dash"),
                 ("export", "--parquet", str(tmp_path / "pq"))):  # fmt: skip
        done = runwatch(*args, "--db", str(db))
        assert done.returncode == 0, (args, done.stderr)


def test_serve_takes_the_corpus_survives_kill_9_and_comes_back(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    now = time.time()
    serve = ServeProcess(db)
    try:
        for name, line, refused in CORPUS:
            status, body = post(serve.port, line(now) + b"\n")
            assert status == (400 if refused else 200), (name, status, body)
            if refused:
                assert body["rejected"][0]["reason"].isprintable(), name
        status, _ = post(serve.port, orjson.dumps(
            {"v": 1, "id": "after", "ts": now, "run": "after", "kind": "heartbeat",
             "src": {"component": "trainer"}}) + b"\n")  # fmt: skip
        assert status == 200
        assert serve.get("/readyz") == {"ready": True}
        deadline = time.monotonic() + 30
        while invalid_rows(db) < len(REFUSED):  # the refused lines reach the history
            assert time.monotonic() < deadline, serve.output()[-2000:]
            time.sleep(0.2)
        serve.kill()
        serve = ServeProcess(db)  # replays its log, hostile lines and all
        deadline = time.monotonic() + 30
        while "after" not in {r["run"] for r in serve.get("/v1/runs")["runs"]}:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert serve.get("/readyz") == {"ready": True}
        assert "Traceback" not in serve.output()
    finally:
        serve.stop()
    assert invalid_rows(db) == len(REFUSED)


def invalid_rows(db: Path) -> int:
    """Rows of invalid_events, read beside a running service (which holds the file only
    while it writes a batch)."""
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            (n,) = con.execute("SELECT count(*) FROM invalid_events").fetchone()  # type: ignore[misc]
            return int(n)
    except duckdb.Error:
        return -1

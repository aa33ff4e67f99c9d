"""The embedded service on a bad day, in process: a damaged event log, a crash with dead
letters not yet in the history, a second service on the same logs, a full disk when an
alert ripens or an event arrives, a spool line over every limit, a flood of run ids."""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from runwatch.dev import envelope
from runwatch.exceptions import LogsInUse
from runwatch.service.core import Service
from runwatch.service.spool_tail import CHUNK, SpoolTail
from runwatch.service.wal import EventLog
from runwatch.stream.alerts import Alert


def ev(ident: str, run: str = "r", kind: str = "heartbeat", **f: Any) -> bytes:
    src = {"component": "trainer", "host": "h", "pid": 1}
    # `f` may replace the envelope's own (a `ts` no event could carry)
    return json.dumps({**envelope.event(kind, time.time(), run, src, ident), **f}).encode()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    s = Service(tmp_path / "h.duckdb", tmp_path / "wal")
    try:
        s.recover()
        yield s
    finally:
        s.close()


def caught_up(service: Service) -> None:
    deadline = time.monotonic() + 60
    while not service.history.cycle():
        assert time.monotonic() < deadline


def history(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_torn_tail_of_nul_bytes_keeps_everything_before_it(tmp_path: Path) -> None:
    path = tmp_path / "events.wal"
    log = EventLog(path)
    log.append(100.0, [ev("a"), ev("b")])
    kept = log.size
    log.close()
    with path.open("ab") as f:
        f.write(b"\0" * (300 << 10))  # what a crash leaves on some filesystems
    log = EventLog(path)
    assert log.size == kept == path.stat().st_size
    assert [json.loads(line)["id"] for line, _, _ in log.read()] == ["a", "b"]
    log.close()


def test_damage_inside_the_log_keeps_every_intact_record_around_it(tmp_path: Path) -> None:
    path = tmp_path / "events.wal"
    log = EventLog(path)
    log.append(100.0, [ev("a")])
    log.close()
    with path.open("ab") as f:
        f.write(b"\0" * 5000)  # a region zeroed by a crash, then the log went on
        f.write(b"#t=101.0\n" + ev("b") + b"\n")
        f.write(b"#t=not-a-time\n" + ev("c") + b"\n")  # a corrupt marker
        f.write(b"\x07garbage that is no record\n#t=nan\n" + ev("d") + b"\n")
    log = EventLog(path)
    got = [(json.loads(line)["id"], t) for line, t, _ in log.read()]
    assert got == [("a", 100.0), ("b", 101.0), ("c", 101.0), ("d", 101.0)]
    assert log.damaged == 3
    log.close()
    # and a service starts on it, with the runs of all four events
    service = Service(tmp_path / "h.duckdb", tmp_path / "wal-dir")
    service.close()
    (tmp_path / "wal-dir" / "events.wal").write_bytes(path.read_bytes())
    service = Service(tmp_path / "h.duckdb", tmp_path / "wal-dir")
    try:
        assert service.recover() == 4
    finally:
        service.close()


def test_dead_letters_are_as_durable_as_events(tmp_path: Path) -> None:
    db, wal = tmp_path / "h.duckdb", tmp_path / "wal"
    service = Service(db, wal)
    service.recover()
    service.history.stop()  # the history never gets to write them before the "crash"
    result = service.ingest([ev("ok"), b"{not json", ev("bad-ts", ts=1.0)])
    assert result.accepted == 1
    assert len(result.rejected) == 2
    service.events.close()  # kill -9: the lock and the files go with the process
    service.alert_log.close()
    service.lock_file.close()
    again = Service(db, wal)
    try:
        again.recover()
        caught_up(again)
    finally:
        again.close()
    rows = history(db, "SELECT source, reason FROM invalid_events ORDER BY reason")
    assert len(rows) == 2
    assert {source for source, _ in rows} == {"http"}
    assert "not JSON" in rows[0][1]
    assert "ts" in rows[1][1]
    assert history(db, "SELECT count(*) FROM events") == [(1,)]


def test_a_second_service_on_the_same_logs_refuses_in_one_line(
    service: Service, tmp_path: Path
) -> None:
    with pytest.raises(LogsInUse, match=r"in use by another runwatch serve \(pid \d+\)"):
        Service(tmp_path / "other.duckdb", tmp_path / "wal")


def test_a_full_disk_when_an_alert_ripens_waits_and_says_it_once(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[Alert] = []
    service.notifiers.append(said.append)
    now = time.time()
    config = {"heartbeat_lost": {"timeout": 1.0}}
    assert service.ingest([ev("s", kind="run.started", config=config), ev("h")]).accepted == 2
    real = service.alert_log.append

    def full(alerts: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(service.alert_log, "append", full)
    service.tick(now + 120)  # heartbeat_lost ripens on the timer: the log cannot take it
    ok, why = service.readiness()
    assert not ok
    assert "No space left" in why
    assert said == []
    assert service.unlogged
    monkeypatch.setattr(service.alert_log, "append", real)
    service.tick(now + 121)
    assert [a.rule for a in said] == ["heartbeat_lost"]  # once, when the disk had room
    assert service.readiness() == (True, "ready")
    assert [a.id for a in service.alert_log.read()] == [said[0].id]


def test_a_full_disk_refuses_an_event_whole_and_then_takes_it(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = service.events.size

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("runwatch.service.wal.os.fsync", full)
    with pytest.raises(OSError, match="No space left"):
        service.ingest([ev("x")])
    assert service.events.path.stat().st_size == before  # nothing half-written stays
    assert not service.readiness()[0]
    monkeypatch.undo()
    assert service.ingest([ev("x")]).accepted == 1
    assert service.readiness() == (True, "ready")
    assert [json.loads(line)["id"] for line, _, _ in service.events.read()] == ["x"]


def test_a_spool_line_over_every_limit_is_a_dead_letter_and_the_segment_goes_on(
    service: Service, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    segment = spool / "events-1.jsonl"
    segment.write_bytes(ev("before") + b"\n" + b"x" * (CHUNK + 1000) + b"\n" + ev("after") + b"\n")
    tail = SpoolTail(spool, tmp_path / "positions")
    for _ in range(4):
        tail.poll(service)
    assert tail.pos[segment.name] == segment.stat().st_size
    assert service.driver.engine.runs["r"].state.events == 2
    caught_up(service)
    rows = history(service.db, "SELECT source, reason, octet_length(raw) FROM invalid_events")
    assert len(rows) == 1
    source, reason, size = rows[0]
    assert source == f"spool:{segment.name}"
    assert "over the 4 MiB" in reason
    assert size < 2000


def test_a_flood_of_run_ids_is_refused_past_the_cap_and_finished_runs_make_room(
    tmp_path: Path,
) -> None:
    service = Service(tmp_path / "h.duckdb", tmp_path / "wal", max_runs=3, keep_finished_s=0.0)
    try:
        service.recover()
        got = service.ingest([ev(f"e{i}", run=f"run-{i}") for i in range(5)])
        assert got.accepted == 3
        assert [r.position for r in got.rejected] == [4, 5]
        assert "--max-runs" in got.rejected[0].reason
        assert set(service.driver.engine.runs) == {"run-0", "run-1", "run-2"}
        # a tracked run still gets its events
        assert service.ingest([ev("more", run="run-1")]).accepted == 1
        # a run finishes: it leaves (after keep_finished_s; the timer looks), and a new run fits
        assert service.ingest([ev("end", run="run-0", kind="run.finished", status="ok")]).accepted
        service.tick(time.time() + 11)
        assert service.ingest([ev("new", run="run-9")]).accepted == 1
        assert "run-0" not in service.driver.engine.runs
        exposition = service.exposition().decode()
        assert 'runwatch_serve_evicted_runs_total{why="finished"} 1.0' in exposition
        assert 'runwatch_serve_dead_letters_total{reason="over_capacity"} 2.0' in exposition
        # a late event of the finished run is kept, but does not bring the run back
        assert service.ingest([ev("late", run="run-0")]).accepted == 1
        assert "run-0" not in service.driver.engine.runs
    finally:
        service.close()


def test_events_an_emitter_dropped_are_shown_per_run_and_component(service: Service) -> None:
    beats = [ev("b1", final=False, dropped_events=3), ev("b2", run="other")]
    assert service.ingest(beats).accepted == 2
    assert service.run("r")["dropped_events"] == {"trainer": 3}  # type: ignore[index]
    assert service.run("other")["dropped_events"] == {}  # type: ignore[index]
    exposition = service.exposition().decode()
    assert 'runwatch_emitter_dropped_events{run="r",component="trainer"} 3.0' in exposition
    assert 'run="other"' in exposition
    assert 'runwatch_emitter_dropped_events{run="other"' not in exposition

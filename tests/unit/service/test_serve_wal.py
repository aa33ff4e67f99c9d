"""The embedded service's logs: a half-written tail (a crash mid-write) was never
acknowledged and is dropped; positions are byte offsets after each line."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.service.wal import AlertLog, EventLog
from runwatch.stream.alerts import Alert


def test_event_log_positions_and_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "events.wal"
    log = EventLog(path)
    ends = log.append(100.0, [b'{"a":1}', b'{"b":2}'])
    assert ends[-1] == log.size == path.stat().st_size
    log.close()
    with path.open("ab") as f:
        f.write(b'#t=101.0\n{"c":')  # killed in the middle of a write
    log = EventLog(path)
    assert log.size == path.stat().st_size <= ends[-1] + len(b"#t=101.0\n")  # the cut line went
    assert [(line, t) for line, t, _ in log.read()] == [(b'{"a":1}', 100.0), (b'{"b":2}', 100.0)]
    log.append(102.0, [b'{"d":4}'])
    assert [line for line, _, _ in log.read()][-1] == b'{"d":4}'
    log.close()


def _alert(ident: str) -> Alert:
    return Alert(ident, 100.0, "zero_reward", "r", "firing", "critical", "k", 90.0, "s")


def test_alert_log_skips_a_torn_line_and_appends_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(_alert("a1").to_json() + b"\n" + _alert("a2").to_json()[:30])
    log = AlertLog(path)
    log.append([_alert("a3")])
    assert [a.id for a in log.read()] == ["a1", "a3"]
    log.close()


def test_compaction_drops_finished_runs_and_a_restart_repeats_nothing(tmp_path: Path) -> None:
    import json
    import time

    import duckdb

    from runwatch.service.core import Service

    def ev(i: int, run: str, kind: str, ts: float, **f: object) -> bytes:
        src = {"component": "trainer", "host": "h", "pid": 1}
        return json.dumps({"v": 1, "id": f"{run}-{i}", "ts": ts, "run": run, "kind": kind,
                           "src": src, **f}).encode()  # fmt: skip

    old = time.time() - 10
    db, wal = tmp_path / "h.duckdb", tmp_path / "wal"
    service = Service(db, wal)
    service.recover()
    nan = {"loss": float("nan")}
    done = [
        ev(0, "done", "run.started", old),
        ev(1, "done", "step.metrics", old + 1, step=1, metrics=nan),
        ev(2, "done", "run.finished", old + 2, status="ok"),
    ]
    live = [ev(0, "live", "run.started", time.time()), ev(1, "live", "heartbeat", time.time())]
    assert service.ingest(done).accepted == 3
    assert service.ingest(live).accepted == 2
    before = service.events.size
    transitions = len(service.alert_log.read())
    assert transitions == 2  # non_finite_metric fired, and the run's end resolved it
    size = None
    while size is None:  # compaction waits for the history to have it all, between batches
        service.history.cycle()
        size = service.compact(keep_finished_s=0.0)
    assert size < before
    assert set(service.driver.engine.runs) == {"live"}
    service.close()  # a clean stop checkpoints: the next start replays nothing
    again = Service(db, wal)
    assert again.recover() == 0
    assert set(again.driver.engine.runs) == {"live"}
    again.close()
    (wal / "state.ckpt").unlink()  # without the checkpoint, the compacted log is replayed
    again = Service(db, wal)
    assert again.recover() == 2  # only the live run's events are replayed
    assert len(again.alert_log.read()) == transitions  # nothing published twice
    assert again.firing() == []  # the compacted run's alerts are history now
    again.close()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events").fetchone() == (5,)
        assert con.execute("SELECT count(*) FROM alert_log").fetchone() == (transitions,)


def test_a_history_that_cannot_be_written_is_said_once_counted_and_not_ready(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import json
    import time

    from runwatch.service.core import Service

    service = Service(tmp_path / "h.duckdb", tmp_path / "wal")
    try:
        service.recover()
        while not service.history.cycle():
            pass
        assert service.readiness() == (True, "ready")
        writer = service.history.writer
        real = writer.flush

        def full_disk(**kw: object) -> None:
            raise OSError(28, "No space left on device")

        writer.flush = full_disk  # type: ignore[method-assign]
        beat = {"v": 1, "id": "b", "ts": time.time(), "run": "r", "kind": "heartbeat",
                "src": {"component": "trainer"}}  # fmt: skip
        assert service.ingest([json.dumps(beat).encode()]).accepted == 1  # something to write
        with caplog.at_level("WARNING", logger="runwatch.serve"):
            for _ in range(3):
                assert not service.history.cycle()
        ok, why = service.readiness()
        assert not ok
        assert "No space left on device" in why
        assert service.counters.history_failures._value.get() >= 3  # (its thread tries too)
        said = [r.getMessage() for r in caplog.records if "history" in r.getMessage()]
        assert len(said) == 1, said  # once per change of state, not per try
        writer.flush = real  # type: ignore[method-assign]
        with caplog.at_level("WARNING", logger="runwatch.serve"):
            assert service.history.cycle()
        assert service.readiness() == (True, "ready")
        assert any("written again" in r.getMessage() for r in caplog.records)
    finally:
        service.close()

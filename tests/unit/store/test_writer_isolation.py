"""The history writer isolates a row DuckDB refuses: the rest of its batch is written, the row
goes to invalid_events with the reason, and later batches are written as usual."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from runwatch.store.writer import BatchWriter
from runwatch.stream.decode import decode


def event(i: int, note: bytes = b"ok") -> tuple[bytes, object]:
    raw = json.dumps({"v": 1, "id": f"e{i}", "ts": 1_800_000_000.0 + i, "run": "r",
                      "kind": "heartbeat", "src": {"component": "trainer"}}).encode()  # fmt: skip
    model = decode(raw)
    # what only the writer sees: a raw line that slipped past an older boundary
    return raw[:-1] + b', "note": "' + note + b'"}', model


def test_a_row_the_history_refuses_is_isolated_and_the_rest_written(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    writer = BatchWriter(db, consumer="test")
    try:
        for i in range(100):
            writer.add_event(*event(i, b"\xff" if i == 37 else b"ok"))  # not UTF-8
        writer.advance("events", 0, 100)
        done = writer.flush()
        assert done is not None
        assert writer.refused == 1
        for i in range(100, 110):  # and the writer goes on as usual
            writer.add_event(*event(i))
        writer.flush()
    finally:
        writer.close()
    with duckdb.connect(str(db), read_only=True) as con:
        ids = {r for (r,) in con.execute("SELECT id FROM events").fetchall()}
        refused = con.execute("SELECT reason, raw FROM invalid_events").fetchall()
        positions = con.execute("SELECT next_offset FROM positions").fetchall()
    assert ids == {f"e{i}" for i in range(110) if i != 37}
    ((reason, raw),) = refused
    assert reason.startswith("the history refused it")
    assert b'"id": "e37"' in raw
    assert positions == [(100,)]


def test_before_commit_runs_in_each_flush_and_a_fault_there_commits_nothing(
    tmp_path: Path,
) -> None:
    """The hook a test kills a writer in: it runs once per flush, numbered from 1, before the
    commit -- a fault raised there leaves neither rows nor positions behind."""
    db = tmp_path / "h.duckdb"
    seen: list[int] = []

    def before_commit(flush: int) -> None:
        seen.append(flush)
        if flush == 2:
            raise OSError("the disk went away mid-batch")

    writer = BatchWriter(db, consumer="test", before_commit=before_commit)
    try:
        writer.add_event(*event(0))
        writer.advance("events", 0, 1)
        writer.flush()
        writer.add_event(*event(1))
        writer.advance("events", 0, 2)
        try:
            writer.flush()
        except OSError:
            pass
        else:
            raise AssertionError("the fault in before_commit did not reach the caller")
    finally:
        writer.close()
    assert seen == [1, 2]
    with duckdb.connect(str(db), read_only=True) as con:
        ids = {r for (r,) in con.execute("SELECT id FROM events").fetchall()}
        positions = con.execute("SELECT next_offset FROM positions").fetchall()
    assert ids == {"e0"}
    assert positions == [(1,)]

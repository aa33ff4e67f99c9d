"""The storage contract, written once: what any history store must do.

`StoreContract` holds the tests; each implementation gets a subclass with its own `store` /
`store_factory` fixtures (here the DuckDB store on a temp file, from conftest.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from runwatch.dev import envelope
from runwatch.store import NotAStore, Store, StoreError
from runwatch.stream.alerts import Alert
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import InvalidEvent


def ev(kind: str, ts: float, n: int, run: str = "r1", **fields: Any) -> dict[str, Any]:
    src = fields.pop("src", {"component": "trainer", "host": "node-0", "pid": 7})
    return envelope.event(kind, ts, run, src, f"{run}-{n}", **fields)


def alert(n: int, state: str = "firing", key: str = "zero_reward|r1") -> Alert:
    return Alert(
        id=f"a{n}",
        ts=1000.0 + n,
        rule="zero_reward",
        run="r1",
        state=state,  # type: ignore[arg-type]
        severity="critical",
        key=key,
        since=1000.0,
        summary="reward 0",
        details={"first_zero_step": 3, "count": 5},
    )


class StoreContract:
    """Tests every store implementation must pass."""

    def test_every_field_is_kept_typed_and_raw(self, store: Store) -> None:
        events = [
            ev("run.started", 1.0, 1, labels={"team": "math"}, total_steps=10,
               config={"zero_reward": {"steps": 3}}),
            ev("step.done", 2.0, 2, step=1, duration_s=1.5, timing={"gen": 1.0}),
            ev("step.metrics", 2.5, 3, step=1, metrics={"loss": 0.5, "gone": None}),
            ev("trajectory.done", 3.0, 4, traj="t1", status="ok", reward=0.25),
            ev("inference.stats", 4.0, 5, server="vllm-0", running=3, waiting=1,
               kv_cache_usage=0.5, src={"component": "inference", "instance": "vllm-0"}),
            ev("rank.status", 5.0, 6, rank=2, world_size=8, phase="recv", since=4.5,
               src={"component": "trainer", "rank": 2}),
            ev("custom.thing", 6.0, 7, anything={"nested": [1, 2]}, step="not an int"),
            ev("heartbeat", 7.0, 8, final=True, extra_field="kept"),
        ]  # fmt: skip
        assert store.write_events([(json.dumps(e), decode(json.dumps(e))) for e in events]) == 8
        rows = store.con.execute(
            "SELECT id, kind, component, pid, step, duration_s, timing, labels, total_steps, "
            "reward, status, server, running, waiting, kv_cache_usage, rank, world_size, "
            "phase, since, final, instance, process, raw FROM events ORDER BY ts"
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        assert by_id["r1-1"][7] == {"team": "math"}
        assert by_id["r1-1"][8] == 10
        assert by_id["r1-2"][4:7] == (1, 1.5, {"gen": 1.0})
        assert by_id["r1-4"][9:11] == (0.25, "ok")
        assert by_id["r1-5"][11:15] == ("vllm-0", 3, 1, 0.5)
        assert by_id["r1-5"][21] == "inference@?/vllm-0"
        assert by_id["r1-6"][15:19] == (2, 8, "recv", 4.5)
        assert by_id["r1-8"][19] is True
        assert by_id["r1-7"][4] is None  # a wrongly typed field of an unknown kind: raw only
        for e in events:  # nothing dropped: raw is the whole event, extra fields included
            assert json.loads(by_id[e["id"]][22]) == e

    def test_metrics_keep_nan_and_null(self, store: Store) -> None:
        e = ev("step.metrics", 1.0, 1, step=1, metrics={"a": float("nan"), "b": None,
                                                      "c": float("inf")})  # fmt: skip
        raw = json.dumps(e)  # NaN / Infinity tokens, as a Python emitter writes them
        store.write_events([(raw, decode(raw))])
        (metrics,) = store.con.execute("SELECT metrics FROM events").fetchall()[0]
        assert math.isnan(metrics["a"])
        assert metrics["b"] is None
        assert metrics["c"] == math.inf

    def test_ids_are_stored_once(self, store: Store) -> None:
        a, b = ev("heartbeat", 1.0, 1), ev("heartbeat", 2.0, 2)
        assert store.write_events([json.dumps(a), json.dumps(a), json.dumps(b)]) == 2
        assert store.write_events([json.dumps(b), json.dumps(ev("heartbeat", 3.0, 3))]) == 1
        assert store.count_events() == 3

    def test_accepts_bytes_text_and_objects(self, store: Store) -> None:
        items: list[Any] = [
            json.dumps(ev("heartbeat", 1.0, 1)).encode(),
            "\ufeff" + json.dumps(ev("heartbeat", 2.0, 2)),
            ev("heartbeat", 3.0, 3),
            b"\xef\xbb\xbf" + json.dumps(ev("heartbeat", 4.0, 4)).encode(),
        ]
        assert store.write_events(items) == 4

    def test_an_invalid_event_writes_nothing_of_its_batch(self, store: Store) -> None:
        good = json.dumps(ev("heartbeat", 1.0, 1))
        bad = json.dumps({"v": 1, "id": "x", "ts": "soon"})
        with pytest.raises(InvalidEvent):
            store.write_events([good, bad])
        assert store.count_events() == 0

    def test_rows_and_positions_commit_together(self, store: Store) -> None:
        with store.transaction():
            store.write_events([json.dumps(ev("heartbeat", 1.0, 1))])
            store.set_positions("sink", {("runwatch.events", 0): 1})

        def crash_before_commit() -> None:
            with store.transaction():
                store.write_events([json.dumps(ev("heartbeat", 2.0, 2))])
                store.write_alerts([alert(1)])
                store.set_positions("sink", {("runwatch.events", 0): 2})
                raise RuntimeError("crash before the commit")

        with pytest.raises(RuntimeError):
            crash_before_commit()
        assert store.count_events() == 1
        assert store.positions("sink") == {("runwatch.events", 0): 1}
        assert store.con.execute("SELECT count(*) FROM alert_log").fetchall() == [(0,)]
        # and the next batch after the rollback is stored normally
        assert store.write_events([json.dumps(ev("heartbeat", 2.0, 2))]) == 1

    def test_positions_are_per_consumer_and_overwritten(self, store: Store) -> None:
        store.set_positions("a", {("t", 0): 5, ("t", 1): 7})
        store.set_positions("b", {("t", 0): 1})
        store.set_positions("a", {("t", 0): 9})
        assert store.positions("a") == {("t", 0): 9, ("t", 1): 7}
        assert store.positions("b") == {("t", 0): 1}
        assert store.positions("c") == {}

    def test_alert_transitions_once_each_and_open_ones(self, store: Store) -> None:
        fired, resolved = alert(1), alert(2, "resolved")
        other = alert(3, key="zero_reward|r1|x")
        assert store.write_alerts([fired, fired.to_dict()]) == 1
        assert store.write_alerts([resolved, other]) == 2
        rows = store.con.execute(
            "SELECT id, state, open, details FROM alerts ORDER BY id"
        ).fetchall()
        assert [(r[0], r[1], r[2]) for r in rows] == [
            ("a1", "firing", False),
            ("a2", "resolved", False),
            ("a3", "firing", True),
        ]
        assert json.loads(rows[0][3]) == {"first_zero_step": 3, "count": 5}

    def test_history_survives_reopening(self, store_factory: Callable[[], Store]) -> None:
        first = store_factory()
        first.write_events([json.dumps(ev("heartbeat", 1.0, 1))])
        first.set_positions("sink", {("t", 0): 1})
        first.close()
        again = store_factory()
        assert again.count_events() == 1
        # sequence numbers continue: arrival order stays total across writers
        again.write_events([json.dumps(ev("heartbeat", 0.5, 2))])
        seqs = again.con.execute("SELECT id, seq FROM events ORDER BY seq").fetchall()
        assert [s[0] for s in seqs] == ["r1-1", "r1-2"]
        assert again.positions("sink") == {("t", 0): 1}


class TestDuckDBStore(StoreContract):
    """The DuckDB store on a temp file."""


def test_reader_refuses_what_is_not_a_history(tmp_path) -> None:
    with pytest.raises(NotAStore, match="no such file"):
        Store.reader(tmp_path / "missing.duckdb")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    with pytest.raises(NotAStore, match="not a DuckDB database file"):
        Store.reader(text)
    assert text.read_text() == "hello\n" * 100
    import duckdb

    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(NotAStore, match="not a runwatch store"):
        Store.reader(other)


def test_writer_refuses_a_file_that_is_not_duckdb(tmp_path) -> None:
    text = tmp_path / "rules.toml"
    text.write_text("[rules]\n")
    with pytest.raises(NotAStore, match="not a DuckDB database file"):
        Store.writer(text)
    assert text.read_text() == "[rules]\n"


def test_read_only_store_refuses_writes(tmp_path) -> None:
    Store.writer(tmp_path / "h.duckdb").close()
    with Store.reader(tmp_path / "h.duckdb") as reader, pytest.raises(StoreError):
        reader.write_events([json.dumps(ev("heartbeat", 1.0, 1))])


def test_a_file_of_schema_1_gets_its_trajectory_marks_and_keeps_ids_once(tmp_path) -> None:
    """Files written before schema 2 have a primary key on events.id and no marks."""
    import duckdb

    from runwatch.store import schema

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(schema._event_table().replace('"id" VARCHAR NOT NULL', '"id" VARCHAR PRIMARY KEY'))
    con.execute("CREATE TABLE src (seq BIGINT, raw VARCHAR)")
    started = ev("trajectory.started", 1.0, 1, traj="t1", step=1)
    con.execute("INSERT INTO src VALUES (1, ?)", [json.dumps(started)])
    con.execute(schema.insert_events_sql("src", or_ignore=True))
    con.close()
    with Store.writer(path) as store:
        assert store._id_is_key
        assert store.con.execute("SELECT * FROM trajectory_marks").fetchall() == [
            ("r1", "t1", 1.0, None)
        ]
        done = ev("trajectory.done", 2.0, 2, traj="t1", status="ok")
        assert store.write_events([json.dumps(started), json.dumps(done)]) == 1
        assert store.write_events([json.dumps(done)]) == 0
        assert store.count_events() == 2

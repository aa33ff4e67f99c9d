"""`Store`: one DuckDB file holding every valid event, every alert transition and the
consumer positions that say how far the history goes.

Writes are batches: the raw JSON of a batch goes to DuckDB as one Arrow column and DuckDB
types it (`schema.insert_events_sql`); ids already stored are left out before the insert
(`Store._stored_ids`, no index: an index on `id` was half the cost of a write), so a
redelivered event is stored once. `transaction()` puts rows and
positions in one commit: after a crash either both are there or neither is.

DuckDB lets one process write a file, and no other process may open it meanwhile, not even to
read. Writers therefore hold the file only for the length of a batch (`Store.writer` per
flush, see `runwatch.store.writer`) and readers open it read-only between batches; both
sides wait for the lock (`wait=`) instead of failing at the first conflict.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]

from runwatch.emitters import env
from runwatch.emitters.events import Event
from runwatch.store import schema, views
from runwatch.store.batch import EventBatch, RawEvent
from runwatch.store.connection import connect
from runwatch.store.exceptions import NotAStore, StoreError
from runwatch.stream.alerts import Alert
from runwatch.stream.refused import Refused

#: What write_events takes: the event as received, or (as received, the decoded event).
EventItem = tuple[RawEvent, Event | None]

#: A writer's close() checkpoints when the write-ahead log is larger than this.
WAL_CHECKPOINT_BYTES = 8 << 20


class Store:
    """A connection to one history file; `Store.writer(path)` or `Store.reader(path)`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only
        self._in_tx = False
        self._event_seq = 0
        self._alert_seq = 0
        self._id_is_key = False  # files of schema 1 keep their primary key on events.id

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def writer(cls, path: str | Path, *, wait: float = 30.0) -> Store:
        """Open for writing, creating the file and its schema if needed."""
        con = connect(path, read_only=False, wait=wait)
        try:
            con.execute("PRAGMA disable_checkpoint_on_shutdown")  # see close()
            store = cls(con, Path(path), read_only=False)
            store._ensure_schema()
        except BaseException:
            con.close()
            raise
        return store

    @classmethod
    def reader(cls, path: str | Path, *, wait: float = 30.0, external_access: bool = True) -> Store:
        """Open read-only; the file must already hold a runwatch history."""
        con = connect(path, read_only=True, wait=wait, external_access=external_access)
        try:
            found = first_row(
                con.execute(
                    "SELECT count(*) FROM duckdb_tables() "
                    "WHERE table_name IN ('events', 'alert_log')"
                )
            )
            if not found or found[0] != 2:
                raise NotAStore(f"{path}: a DuckDB file, but not a runwatch store (no events)")
        except BaseException:
            con.close()
            raise
        return cls(con, Path(path), read_only=True)

    def _ensure_schema(self) -> None:
        con = self.con
        con.execute("BEGIN")
        try:
            marks = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'trajectory_marks'"
            had_marks = (first_row(con.execute(marks)) or (0,))[0]
            for ddl in schema.TABLES:
                con.execute(ddl)
            if not had_marks:  # a file of schema 1: fold the trajectories it holds, once
                con.execute(schema.insert_marks_sql())
            want = str(schema.SCHEMA_VERSION) + ":" + str(hash_views())
            have = first_row(con.execute("SELECT value FROM meta WHERE key = 'schema'"))
            if have is None or have[0] != want:
                for ddl in views.create_views_sql():
                    con.execute(ddl)
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", [want])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        row = first_row(
            con.execute(
                "SELECT (SELECT coalesce(max(seq), 0) FROM events),"
                " (SELECT coalesce(max(seq), 0) FROM alert_log)"
            )
        )
        assert row is not None
        self._event_seq, self._alert_seq = int(row[0]), int(row[1])
        key = first_row(
            con.execute(
                "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'events' "
                "AND constraint_type = 'PRIMARY KEY'"
            )
        )
        self._id_is_key = bool(key and key[0])

    def close(self) -> None:
        """Close; a writer checkpoints only when its write-ahead log has grown past
        `WAL_CHECKPOINT_BYTES` (readers replay the log when they open the file).

        DuckDB would checkpoint at every close, which rewrote the table's last row group at
        every batch and was a third of the cost of a sink flush (bench/store.py). A batch
        larger than a row group (122,880 rows) goes to the file directly and leaves only a
        few KB of log; smaller batches add to the log until DuckDB's own 16 MB threshold, or
        this one at close, checkpoints them.
        """
        if not self.read_only:
            wal = Path(str(self.path) + ".wal")
            if wal.exists() and wal.stat().st_size > WAL_CHECKPOINT_BYTES:
                self.con.execute("CHECKPOINT")
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """Everything written inside commits together, or not at all."""
        if self._in_tx:
            yield self
            return
        seqs = (self._event_seq, self._alert_seq)
        self.con.execute("BEGIN")
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self._in_tx = False
            self.con.execute("ROLLBACK")
            self._event_seq, self._alert_seq = seqs
            raise
        self._in_tx = False
        self.con.execute("COMMIT")

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")

    def write_events(self, items: Sequence[EventItem | RawEvent] | EventBatch) -> int:
        """Store a batch of valid events; returns how many were new (ids not stored yet).

        An item is the event as received, or (as received, decoded event). Items without a
        decoded event are validated here (raises InvalidEvent: nothing of the batch is
        written). Raw JSON that DuckDB cannot read goes to `invalid_events` with the reason.

        Ids stay unique without an index on them: within the batch the first copy wins
        (`EventBatch`), and ids stored before are looked up among the stored events of the
        batch's time span (`_stored_ids`).
        """
        self._check_writable()
        if isinstance(items, EventBatch):
            batch = items
        else:
            batch = EventBatch()
            for item in items:
                if type(item) is tuple:
                    batch.add(*item)
                else:
                    batch.add(cast(RawEvent, item))
        if not batch.received:
            return 0
        with self.transaction():
            stored = self._stored_ids(batch)
            kept = batch.without(stored) if stored else batch
            new = self._insert_events(kept.arrow(self._event_seq + 1)) if kept.raws else 0
        self._event_seq += batch.received
        return new

    def _stored_ids(self, batch: EventBatch) -> set[str]:
        """Which of the batch's ids are stored already.

        A copy of an event carries the event's own `ts`, so only the stored events between the
        batch's first and last ts are compared: DuckDB skips the rest of the table by its
        per-row-group min/max of `ts`, and the cost follows the batch, not the history. (An id
        reused by a different event at another time -- which the contract rules out -- is
        not caught; the engine itself remembers only its last 500,000 ids.)
        """
        ts = batch.ids.values()
        lo, hi = min(ts), max(ts)
        self.con.register("_rw_ids", batch.id_table())
        try:
            rows = self.con.execute(
                "SELECT DISTINCT id FROM events WHERE ts BETWEEN ? AND ? "
                "AND id IN (SELECT id FROM _rw_ids)",
                [lo, hi],
            ).fetchall()
        finally:
            self.con.unregister("_rw_ids")
        return {str(r[0]) for r in rows}

    def _insert_events(self, rows: pa.Table) -> int:
        """Insert (seq, raw) rows, typed by DuckDB; returns how many were inserted."""
        self.con.register("_rw_batch", rows)
        try:
            row = first_row(
                self.con.execute(
                    schema.insert_events_sql(
                        "(SELECT * FROM _rw_batch WHERE json_valid(raw))",
                        or_ignore=self._id_is_key,
                    )
                )
            )
            new = int(row[0]) if row else 0
            if new:  # this batch's trajectories, for idle_spans
                seq = rows.column("seq")
                marks = schema.insert_marks_sql("seq BETWEEN ? AND ?")
                self.con.execute(marks, [seq[0].as_py(), seq[-1].as_py()])
            if new < rows.num_rows or self._id_is_key:  # some JSON that DuckDB cannot read
                self.con.execute(
                    "INSERT INTO invalid_events SELECT now()::TIMESTAMP, 'store', "
                    "'DuckDB cannot read this JSON', encode(raw) "
                    "FROM _rw_batch WHERE NOT json_valid(raw)"
                )
        finally:
            # in a transaction a failed insert aborted, this fails too: keep the first error
            with contextlib.suppress(duckdb.Error):
                self.con.unregister("_rw_batch")
        return new

    def write_alerts(self, alerts: Sequence[Alert | Mapping[str, Any]]) -> int:
        """Store alert transitions (contract §3); returns how many were new."""
        self._check_writable()
        if not alerts:
            return 0
        dicts = [a.to_dict() if isinstance(a, Alert) else dict(a) for a in alerts]
        seq0 = self._alert_seq + 1
        cols: dict[str, list[Any]] = {
            "seq": list(range(seq0, seq0 + len(dicts))),
            "id": [d["id"] for d in dicts],
            "ts": [float(d["ts"]) for d in dicts],
            "rule": [d["rule"] for d in dicts],
            "run": [d["run"] for d in dicts],
            "state": [d["state"] for d in dicts],
            "severity": [d["severity"] for d in dicts],
            "key": [d["key"] for d in dicts],
            "subject": [d.get("subject") for d in dicts],
            "since": [float(d["since"]) for d in dicts],
            "summary": [d["summary"] for d in dicts],
            "details": [json.dumps(d.get("details") or {}) for d in dicts],
            "raw": [json.dumps(d) for d in dicts],
        }
        batch = pa.table(cols)
        with self.transaction():
            self.con.register("_rw_alerts", batch)
            try:
                row = first_row(self.con.execute(schema.ALERT_INSERT.format(source="_rw_alerts")))
            finally:
                self.con.unregister("_rw_alerts")
        self._alert_seq += len(dicts)
        return int(row[0]) if row else 0

    def write_invalid(self, items: Sequence[Refused]) -> None:
        """Keep refused input with where it came from and why."""
        self._check_writable()
        if not items:
            return
        with self.transaction():
            self.con.executemany(
                "INSERT INTO invalid_events VALUES (now()::TIMESTAMP, ?, ?, ?)",
                [(r.where, r.reason, r.raw) for r in items],
            )

    def positions(self, consumer: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the next offset to read, as last committed with the rows."""
        rows = self.con.execute(
            'SELECT topic, "partition", next_offset FROM positions WHERE consumer = ?',
            [consumer],
        ).fetchall()
        return {(str(t), int(p)): int(o) for t, p, o in rows}

    def set_positions(self, consumer: str, positions: Mapping[tuple[str, int], int]) -> None:
        self._check_writable()
        if not positions:
            return
        with self.transaction():
            self.con.executemany(
                "INSERT OR REPLACE INTO positions VALUES (?, ?, ?, ?, now()::TIMESTAMP)",
                [(consumer, t, p, o) for (t, p), o in positions.items()],
            )

    # -- reading ---------------------------------------------------------------------------

    def count_events(self, run: str | None = None) -> int:
        if run is None:
            row = first_row(self.con.execute("SELECT count(*) FROM events"))
        else:
            row = first_row(self.con.execute("SELECT count(*) FROM events WHERE run = ?", [run]))
        return int(row[0]) if row else 0


def hash_views() -> str:
    """A fingerprint of the view definitions, so a newer runwatch refreshes them on open."""
    import hashlib

    text = "\n".join(views.create_views_sql())
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def default_db() -> str:
    """The history file: $RUNWATCH_DB, else runwatch.duckdb in the working directory."""
    return env.db()


def first_row(cur: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of a result, reading it to the end (DuckDB 2 refuses further work on a
    connection while a result is unfinished)."""
    rows = cur.fetchall()
    return rows[0] if rows else None

"""The DuckDB schema of the history: tables, and how a raw event becomes a typed row.

One `events` row per valid event: the envelope and every kind-specific field of contract §1
as typed columns, plus `raw`, the whole event as JSON, so extra fields and unknown kinds lose
nothing. Typed columns are filled by DuckDB itself from `raw` (`json_transform`, vectorised
C++), which is several times faster than building columns in Python per event.

Alert transitions go to `alert_log` (the `alerts` view adds what people ask for); Kafka
positions to `positions`, written in the same transaction as the rows they cover.
"""

from __future__ import annotations

import json

#: Bumped when a table changes shape; `meta.schema_version` records what a file holds.
#: 2: `events.id` is no longer a PRIMARY KEY (the writer deduplicates, see `store.Store`);
#: `trajectory_marks` (filled by the writer, from the events of older files when opened).
SCHEMA_VERSION = 2

#: Typed columns of `events` filled from the raw JSON: column -> (JSON path, DuckDB type).
#: The path is a key of the event object, or `src.<key>` for the emitting process.
EVENT_FIELDS: dict[str, tuple[str, str]] = {
    "v": ("v", "INTEGER"),
    "id": ("id", "VARCHAR"),
    "ts": ("ts", "DOUBLE"),
    "run": ("run", "VARCHAR"),
    "kind": ("kind", "VARCHAR"),
    "component": ("src.component", "VARCHAR"),
    "host": ("src.host", "VARCHAR"),
    "pid": ("src.pid", "BIGINT"),
    "rank": ("src.rank", "BIGINT"),
    "instance": ("src.instance", "VARCHAR"),
    # run.started / run.finished
    "labels": ("labels", "MAP(VARCHAR, VARCHAR)"),
    "config": ("config", "JSON"),
    "total_steps": ("total_steps", "BIGINT"),
    "status": ("status", "VARCHAR"),  # also trajectory.done, request.done
    "final": ("final", "BOOLEAN"),  # heartbeat
    # steps
    "step": ("step", "BIGINT"),
    "duration_s": ("duration_s", "DOUBLE"),  # also trajectory.done
    "timing": ("timing", "MAP(VARCHAR, DOUBLE)"),
    "metrics": ("metrics", "MAP(VARCHAR, DOUBLE)"),
    "mean": ("mean", "DOUBLE"),  # reward
    "count": ("count", "BIGINT"),
    # trajectories
    "traj": ("traj", "VARCHAR"),
    "phase": ("phase", "VARCHAR"),  # also rank.status
    "reward": ("reward", "DOUBLE"),
    # inference
    "req": ("req", "VARCHAR"),
    "server": ("server", "VARCHAR"),
    "prompt_tokens": ("prompt_tokens", "BIGINT"),
    "completion_tokens": ("completion_tokens", "BIGINT"),
    "running": ("running", "BIGINT"),
    "waiting": ("waiting", "BIGINT"),
    "kv_cache_usage": ("kv_cache_usage", "DOUBLE"),
    "gen_tokens_per_s": ("gen_tokens_per_s", "DOUBLE"),
    # progress
    "name": ("name", "VARCHAR"),
    "n": ("n", "BIGINT"),
    "total": ("total", "BIGINT"),
    # ranks
    "world_size": ("world_size", "BIGINT"),
    "since": ("since", "DOUBLE"),
}


def _transform_spec() -> str:
    """The `json_transform` structure that extracts every typed column in one parse."""
    spec: dict[str, object] = {}
    for path, sql_type in EVENT_FIELDS.values():
        head, _, tail = path.partition(".")
        if tail:
            sub = spec.setdefault(head, {})
            assert isinstance(sub, dict)
            sub[tail] = sql_type
        else:
            spec[head] = sql_type
    return json.dumps(spec)


def _select_typed(source: str) -> str:
    """SELECT list turning `source` (a relation with `seq` and `raw` columns) into event rows."""
    cols = []
    for column, (path, _) in EVENT_FIELDS.items():
        head, _, tail = path.partition(".")
        expr = f"j.{head}.{tail}" if tail else f"j.{head}"
        cols.append(f'{expr} AS "{column}"')
    spec = _transform_spec().replace("'", "''")
    # MATERIALIZED: without it DuckDB inlines `j` into every column that reads it and parses
    # the JSON once per column (measured: ~1.5x slower per batch)
    return f"""
        WITH b AS MATERIALIZED (
            SELECT seq, raw, json_transform(raw, '{spec}') AS j FROM {source}
        )
        SELECT b.seq, make_timestamp(CAST(j.ts * 1e6 AS BIGINT)) AS time,
               {", ".join(cols)},
               j.src.component || '@' || coalesce(j.src.host, '?')
                 || coalesce('/' || coalesce(j.src.instance, CAST(j.src.pid AS VARCHAR)), '')
                 AS process,
               CAST(b.raw AS JSON) AS raw
        FROM b"""


def event_columns() -> list[str]:
    return ["seq", "time", *EVENT_FIELDS, "process", "raw"]


def insert_events_sql(source: str, *, or_ignore: bool = False) -> str:
    """Insert the rows of `source` (seq, raw) as they are: the caller has left out ids that
    are stored already. `or_ignore` is for files of schema 1, where `id` is a primary key."""
    cols = ", ".join(f'"{c}"' for c in event_columns())
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    return f"{verb} INTO events ({cols}) {_select_typed(source)}"


def _event_table() -> str:
    cols = [
        "seq BIGINT NOT NULL",
        "time TIMESTAMP NOT NULL",
    ]
    for column, (_, sql_type) in EVENT_FIELDS.items():
        # no PRIMARY KEY on id: its index was half the cost of a write (bench/store.py);
        # `Store.write_events` keeps ids unique instead
        extra = ""
        if column in ("id", "ts", "run", "kind", "component"):
            extra = " NOT NULL"
        cols.append(f'"{column}" {sql_type}{extra}')
    cols += ["process VARCHAR NOT NULL", "raw JSON NOT NULL"]
    return "CREATE TABLE IF NOT EXISTS events (\n    " + ",\n    ".join(cols) + "\n)"


TABLES = [
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)""",
    _event_table(),
    """CREATE TABLE IF NOT EXISTS alert_log (
        seq BIGINT NOT NULL,
        id VARCHAR PRIMARY KEY,
        ts DOUBLE NOT NULL,
        time TIMESTAMP NOT NULL,
        rule VARCHAR NOT NULL,
        run VARCHAR NOT NULL,
        state VARCHAR NOT NULL,
        severity VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        subject VARCHAR,
        since DOUBLE NOT NULL,
        summary VARCHAR NOT NULL,
        details JSON,
        raw JSON NOT NULL
    )""",
    # per write batch and trajectory: its first start and first done within that batch; a
    # trajectory whose events came in several batches has several rows (min() of them is the
    # trajectory's). `idle_spans` reads this instead of grouping every trajectory event.
    """CREATE TABLE IF NOT EXISTS trajectory_marks (
        run VARCHAR NOT NULL,
        traj VARCHAR,
        start_ts DOUBLE,
        done_ts DOUBLE
    )""",
    """CREATE TABLE IF NOT EXISTS invalid_events (
        received_at TIMESTAMP NOT NULL,
        source VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        raw BLOB NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS positions (
        consumer VARCHAR NOT NULL,
        topic VARCHAR NOT NULL,
        "partition" INTEGER NOT NULL,
        next_offset BIGINT NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (consumer, topic, "partition")
    )""",
]


def insert_marks_sql(where: str = "") -> str:
    """Fold the trajectory events of `events` (those `where` selects, e.g. one batch's seq
    range) into `trajectory_marks`."""
    cond = f" AND ({where})" if where else ""
    return f"""
        INSERT INTO trajectory_marks
        SELECT run, traj,
               min(ts) FILTER (WHERE kind = 'trajectory.started'),
               min(ts) FILTER (WHERE kind = 'trajectory.done')
        FROM events
        WHERE kind IN ('trajectory.started', 'trajectory.done'){cond}
        GROUP BY run, traj"""


ALERT_INSERT = """
    INSERT OR IGNORE INTO alert_log
    SELECT seq, id, ts, make_timestamp(CAST(ts * 1e6 AS BIGINT)), rule, run, state, severity,
           key, subject, since, summary, CAST(details AS JSON), CAST(raw AS JSON)
    FROM {source}
"""

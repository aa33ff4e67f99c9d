"""Parquet export of the events, partitioned by day and run (hive layout), for tools that
read history at a scale one DuckDB file should not carry: Spark, Trino, DuckDB over S3.

    DIR/day=2026-03-14/run=grpo-qwen2.5-7b-sandbox/data_0.parquet

Run ids are URL-encoded in directory names (`a/b` -> `a%2Fb`); the `run` column inside is
intact, and `read_parquet('DIR/**/*.parquet', hive_partitioning = true)` gives both back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runwatch.store.exceptions import StoreError
from runwatch.store.store import Store, first_row


@dataclass(frozen=True, slots=True)
class Exported:
    rows: int
    files: int
    partitions: int


def export_parquet(
    store: Store,
    out: str | Path,
    *,
    overwrite: bool = False,
    since: float | None = None,
    until: float | None = None,
) -> Exported:
    """Write events (all, or those in [since, until)) under `out`."""
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise StoreError(f"{target}: exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise StoreError(f"{target}: not empty; pass --overwrite to replace what is there")
    where: list[str] = []
    args: list[object] = []
    if since is not None:
        where.append("ts >= ?")
        args.append(since)
    if until is not None:
        where.append("ts < ?")
        args.append(until)
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    row = first_row(store.con.execute(f"SELECT count(*) FROM events{cond}", args))
    rows = int(row[0]) if row else 0
    if rows == 0:
        return Exported(0, 0, 0)
    target.mkdir(parents=True, exist_ok=True)
    path = str(target).replace("'", "''")
    store.con.execute(
        f"COPY (SELECT *, strftime(time, '%Y-%m-%d') AS day FROM events{cond} ORDER BY ts, seq) "
        f"TO '{path}' (FORMAT parquet, PARTITION_BY (day, run), OVERWRITE_OR_IGNORE true, "
        "COMPRESSION zstd)",
        args,
    )
    files = list(target.rglob("*.parquet"))
    return Exported(rows, len(files), len({f.parent for f in files}))

"""SQL over the history, read-only: the guard `runwatch sql` (and anything else that runs a
person's SQL) goes through. Statements are parsed by DuckDB itself and refused unless every
one is a SELECT or an EXPLAIN (DESCRIBE, SHOW and SUMMARIZE parse as SELECT), before any
runs: a `DROP` after a `SELECT` changes nothing. The connection is a reader's besides."""

from __future__ import annotations

from typing import Any

import duckdb

from runwatch.store.exceptions import QueryFailed, QueryRefused
from runwatch.store.store import Store

READ_ONLY_TYPES = {"SELECT", "EXPLAIN"}


def duckdb_message(err: duckdb.Error) -> str:
    """DuckDB's message on one line (the `LINE 1: ...` and caret lines dropped)."""
    lines = [ln.strip() for ln in str(err).splitlines()]
    keep = [ln for ln in lines if ln and not ln.startswith("LINE ") and set(ln) != {"^"}]
    return "; ".join(keep) or type(err).__name__


def query(
    store: Store, sql: str, max_rows: int | None = None
) -> list[tuple[list[str], list[tuple[Any, ...]]]]:
    """Run read-only statements; one (columns, rows) per statement, each cut to `max_rows`
    rows plus one when given (so a caller can tell it was cut). Raises QueryRefused or
    QueryFailed with one line."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise QueryFailed(duckdb_message(err)) from None
    if not statements:
        raise QueryFailed("no SQL statement given")
    for st in statements:
        kind = st.type.name
        if kind not in READ_ONLY_TYPES:
            raise QueryRefused(
                f"refused: {kind} statements are not run here; runwatch sql only reads "
                "(SELECT, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE). Nothing was changed."
            )
    results = []
    try:
        for st in statements:
            cur = store.con.execute(st.query)
            names = [d[0] for d in cur.description or []]
            rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1)
            results.append((names, rows))
    except duckdb.Error as err:
        raise QueryFailed(duckdb_message(err)) from None
    return results

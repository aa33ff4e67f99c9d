"""runwatch.store: the history of every run in DuckDB -- schema, sink, queries, backtests."""

from runwatch.store.exceptions import (
    NotAStore,
    QueryFailed,
    QueryRefused,
    StoreError,
    StoreLocked,
)
from runwatch.store.store import Store

__all__ = ["NotAStore", "QueryFailed", "QueryRefused", "Store", "StoreError", "StoreLocked"]

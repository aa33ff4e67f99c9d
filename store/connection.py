"""Opening a history file: DuckDB's one-writer lock, waited for instead of failed on.

DuckDB lets one process write a file, and no other process may open it meanwhile, not even to
read. Writers therefore hold the file only for the length of a batch and readers open it
read-only between batches; both sides wait for the lock (`wait=`) instead of failing at the
first conflict.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import duckdb

from runwatch.store.exceptions import NotAStore, StoreLocked

_LOCK_RE = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def _is_lock_error(err: duckdb.Error) -> bool:
    return "Could not set lock" in str(err) or "Conflicting lock" in str(err)


def _lock_holder(err: duckdb.Error) -> str:
    m = _LOCK_RE.search(str(err))
    return f" (held by PID {m.group(2)})" if m else ""


def connect(
    path: str | Path, *, read_only: bool, wait: float = 30.0, external_access: bool = True
) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting up to `wait` seconds while another process holds its lock.

    Raises NotAStore for a missing file (when reading) or a file that is not DuckDB, and
    StoreLocked when the lock stayed taken for `wait` seconds.
    """
    p = Path(path)
    if read_only and not p.is_file():
        raise NotAStore(f"{p}: no such file")
    if not read_only and p.exists() and not p.is_file():
        raise NotAStore(f"{p}: not a file")
    config: dict[str, Any] = {}
    if not external_access:
        config["enable_external_access"] = False
    deadline = time.monotonic() + wait
    delay = 0.01
    while True:
        try:
            con = duckdb.connect(str(p), read_only=read_only, config=config)
            break
        except duckdb.Error as err:
            if _is_lock_error(err):
                if time.monotonic() >= deadline:
                    raise StoreLocked(
                        f"{p}: in use by another process{_lock_holder(err)} for more than "
                        f"{wait:g} s; the sink holds it only while writing a batch, so retry, "
                        "or raise --wait"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            message = str(err).splitlines()[0]
            if "not a valid DuckDB database file" in message or "database file" in message:
                raise NotAStore(f"{p}: not a DuckDB database file") from None
            raise NotAStore(f"{p}: cannot open: {message}") from None
    con.execute("SET TimeZone = 'UTC'")
    return con

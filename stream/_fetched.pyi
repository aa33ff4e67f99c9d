"""A fetch's records as one decoding step's lines (`_fetched.c`; live.py `_plain` in Python)."""

from collections.abc import Callable
from typing import Any

def plain(
    records: list[Any], emitted: Any, is_batch: Callable[[Any], bool], max_bytes: int, /
) -> tuple[bytes, list[bytes], list[float], list[int], list[int]] | None: ...

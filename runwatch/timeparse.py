"""Times for people: parsing the ones they type (epoch seconds or ISO 8601), showing ours."""

from __future__ import annotations

import argparse
import math
from datetime import UTC, datetime


def parse_time(text: str) -> float:
    """Seconds since the epoch from `1700000000.5` or `2026-11-21T09:30:00Z` (UTC if no zone)."""
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{text!r} is not a time: give epoch seconds (1700000000) or ISO 8601 "
                "(2026-11-21T09:30:00Z)"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite time")
    return value


def time_arg(text: str) -> float:
    """argparse `type=` wrapper with argparse's own error reporting."""
    try:
        return parse_time(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def iso(ts: float) -> str:
    """A compact UTC rendering for people: 2026-11-21 16:41:05Z (a time no calendar can show,
    such as one in the year 60000, as its number of seconds)."""
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"ts={ts!r}"

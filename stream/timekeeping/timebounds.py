"""When an event's `ts` is plausible (contract §1, bounds): seconds since 1970, at least 1e9
(2001-09-09), and not far ahead of the time it arrived (live) or of the stream (replay).

A `ts` in milliseconds, micro- or nanoseconds -- a common slip of emitters written outside
Python -- is refused with a reason that says so: accepted, it would put a run in year 58,866
and every other run of the stream out of time. Pure: the caller passes the reference time.
"""

from __future__ import annotations

#: Earliest plausible ts: 2001-09-09T01:46:40Z.
MIN_TS = 1e9
#: Past this a ts is no time in seconds (year 5138); milliseconds since 1970 are ~1.7e12.
MAX_TS = 1e11
#: Live: how far ahead of its arrival (after clock-skew correction) an event may be.
MAX_AHEAD_LIVE = 300.0

_UNITS = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))


def time_problem(
    ts: float, received: float | None = None, ahead: float = MAX_AHEAD_LIVE
) -> str | None:
    """Why `ts` is not a plausible event time, or None. With `received` (the time it arrived,
    on the reference clock), also refuse a ts more than `ahead` seconds past it."""
    if ts < MIN_TS:
        return f"ts {ts!r} is before 2001-09-09: runwatch wants seconds since 1970 (UTC)"
    if ts >= MAX_TS:
        for scale, unit in _UNITS:
            if MIN_TS <= ts / scale < MAX_TS:
                return f"ts {ts!r} looks like {unit} since 1970: runwatch wants seconds"
        return f"ts {ts!r} is no time in seconds since 1970"
    if received is not None and ts - received > ahead:
        return f"ts is {span(ts - received)} ahead of the time the event arrived"
    return None


def span(seconds: float) -> str:
    """`2 days 3h`, `5h 20m`, `12m 5s`, `40s`: a duration for a person."""
    s = int(seconds)
    if s >= 86_400:
        return f"{s // 86_400} days {s % 86_400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m {s % 60}s"
    return f"{seconds:.0f}s"

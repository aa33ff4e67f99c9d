"""What a run's incident names as its cause, read from its root alert -- the thing a fleet
incident groups runs by.

The rules say it in their details (contract section 8): `dep` (the service the stalled work
waits on: `inference_idle_with_pending`, `stuck_progress`), `host` (the node a silent or
failed process ran on: `heartbeat_lost`, `component_failed`, `inference_stalled`) and
`server` with `host` (an inference server: it is one process on one node, so its name alone
-- "vllm-0" in every run -- says nothing across runs; `server:vllm-0@node-7` does).
"""

from __future__ import annotations

from typing import Any

from runwatch.stream.alerts import Alert
from runwatch.stream.state.fleet import Thing

KINDS = ("dep", "server", "host")  # in this order an incident's fleet id is chosen
#: the rules whose alert says a process went silent: it points at the node it ran on
SILENT = ("heartbeat_lost",)


def subject(thing: Thing) -> str:
    """The fleet alert's subject: `dep:NAME`, `host:NAME` or `server:NAME`."""
    return f"{thing[0]}:{thing[1]}"


def points_at(alert: Alert, thing: Thing) -> bool:
    """Whether `alert`'s failure points at `thing` rather than only happening there: work
    that waits on it (a `dep`), or a process gone silent on it (a node: `SILENT`). One that
    failed with its own error, or an engine that stalled, says only where it was. The fleet
    decision needs no runs elsewhere to compare for what the failures point at (`decide.py`)."""
    kind = thing[0]
    return kind == "dep" or (kind == "host" and alert.rule in SILENT)


def causes(alert: Alert) -> tuple[Thing, ...]:
    """The things a root alert names as its cause, in `KINDS` order; none for one that names
    none (a zero reward, a NaN: no shared thing to blame)."""
    details = alert.details
    dep, host, server = _name(details, "dep"), _name(details, "host"), _name(details, "server")
    found: list[Thing] = []
    if dep is not None:
        found.append(("dep", dep))
    if server is not None and host is not None:
        found.append(("server", f"{server}@{host}"))
    if host is not None:
        found.append(("host", host))
    return tuple(found)


def _name(details: dict[str, Any], key: str) -> str | None:
    value = details.get(key)
    return value if isinstance(value, str) and value and value != "?" else None

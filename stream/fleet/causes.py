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
#: the kinds a failure names as what its work waits on (section 8's `dep`); the others are
#: where a failure happened, which says something only against the runs elsewhere
WAITED_ON = ("dep",)


def subject(thing: Thing) -> str:
    """The fleet alert's subject: `dep:NAME`, `host:NAME` or `server:NAME`."""
    return f"{thing[0]}:{thing[1]}"


def waited_on(thing: Thing) -> bool:
    """Whether a failure that names `thing` says its work waits on it (`WAITED_ON`), rather
    than where it happened: the fleet decision needs no contrast for it (`decide.py`)."""
    return thing[0] in WAITED_ON


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

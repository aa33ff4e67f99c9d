"""The one event factory of the scenarios, the simulator, the generated curves, the tests and
the benches: a contract event as the plain dict an emitter puts on the wire -- the envelope
(docs/contract.md section 1) around a kind's fields -- before it is encoded.

Ids are the caller's: deterministic where a replay must be reproducible (`{run}-{n:07d}`),
else a fresh uuid4 in hex, as an `Emitter` stamps them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

#: an event before it is encoded
Event = dict[str, Any]


def event(
    kind: str,
    ts: float,
    run: str,
    src: Mapping[str, Any],
    event_id: str | None = None,
    **fields: Any,
) -> Event:
    """A `kind` event of `run` from the process `src`, stamped `ts` (epoch seconds)."""
    return {
        "v": 1,
        "id": uuid.uuid4().hex if event_id is None else event_id,
        "ts": ts,
        "run": run,
        "kind": kind,
        "src": src,
        **fields,
    }

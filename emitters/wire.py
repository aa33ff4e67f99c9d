"""An event's line as it goes on the wire, made without a model on `emit()`'s hot path.

The envelope's start (version, run and source, up to the id) is encoded once per source and
checked in full once (`check_head`); each line then adds a uuid4 id from our own generator,
the clock's `ts`, the kind and the fields encoded once. The clock read is this module's
`time.time()`: the one place an emitter stamps time.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from runwatch.emitters.events import validate

#: What the emitter stamps: fields of these names are refused.
_ENVELOPE = frozenset(("v", "id", "ts", "run", "kind", "src"))
# uuid4 layout: version nibble 4, variant bits 10 (what uuid.UUID(version=4) sets).
_UUID4_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_BITS = (0x4000 << 64) | (0x8000 << 48)
#: Our own generator: a user's `random.seed(0)` must not make two processes' ids collide.
_RNG = random.Random()
# nor may a fork: a child would draw the very ids its parent draws next (the consumers'
# dedup would then drop one of each pair)
os.register_at_fork(after_in_child=_RNG.seed)


def _plain(value: Any) -> Any:
    """numpy / torch scalars and arrays, which trainers hand over all the time, as JSON."""
    for method in ("item", "tolist"):
        convert = getattr(value, method, None)
        if callable(convert):
            try:
                return convert()
            except (TypeError, ValueError, RuntimeError):
                continue
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


#: Compact JSON, numpy and torch values as plain ones.
encode = json.JSONEncoder(separators=(",", ":"), default=_plain).encode


def head_of(run: str, src: Mapping[str, Any]) -> str:
    """The envelope's start (up to the id) of `run`'s events from `src`."""
    return f'{{"v":1,"run":{encode(run)},"src":{encode(src)},"id":"'


def event_line(head: str, kind: str, fields: Mapping[str, Any]) -> str:
    """One event's line: `head` (`head_of`), a fresh id, the time now, `kind` and `fields`.
    ValueError for a field the envelope owns, TypeError for one JSON cannot hold."""
    ident = "%032x" % ((_RNG.getrandbits(128) & _UUID4_MASK) | _UUID4_BITS)
    if not fields:
        return f'{head}{ident}","ts":{time.time()!r},"kind":"{kind}"}}'
    if not _ENVELOPE.isdisjoint(fields):
        taken = sorted(_ENVELOPE.intersection(fields))
        raise ValueError(f"{kind}: fields {taken} are the envelope's; the emitter sets them")
    try:
        body = encode(fields)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{kind}: fields are not JSON serialisable: {err}") from None
    return f'{head}{ident}","ts":{time.time()!r},"kind":"{kind}",{body[1:]}'


def check_head(head: str, what: str) -> None:
    """Validate a head once, in full, so that `emit()` never has to; ValueError saying
    `what` ("... make") invalid events."""
    try:
        validate(json.loads(event_line(head, "heartbeat", {})))
    except ValidationError as err:
        raise ValueError(f"{what} invalid events: {err}") from None

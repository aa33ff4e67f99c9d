"""The bounds that hold for a whole event, extra fields included (contract §1, bounds):
nesting depth, 64-bit integers, valid Unicode. The models (`runwatch.emitters.events`) type
an event's own fields; this walks what they leave open.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Largest encoded event, in bytes (contract §1).
MAX_EVENT_BYTES = 64 * 1024
#: Bounds of a `process.stacks` event: threads, frames per thread.
MAX_STACK_THREADS, MAX_STACK_FRAMES = 64, 64
#: Control characters (C0, DEL, C1), which identifiers (`id`, `src.*`, `traj`, `req`,
#: `server`, `name`) may not hold. (`stream.decode` checks this its own, cheaper way.)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

RUN_ID_PATTERN = r"^[A-Za-z0-9._:/@+-]{1,200}$"
KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
COMPONENT_PATTERN = r"^[a-z][a-z0-9_-]*$"

#: The run of fleet incidents' alerts (contract section 8): reserved, no event may carry it.
FLEET_RUN = "@fleet"

#: Deepest nesting of objects and arrays an event may have (contract §1, bounds).
MAX_DEPTH = 32
#: Integers anywhere in an event fit in a signed 64-bit integer (contract §1, bounds).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def out_of_bounds(
    obj: Any, typed: Mapping[str, Any] | None = None
) -> tuple[tuple[str | int, ...], str] | None:
    """Where and why a decoded JSON value breaks the bounds that hold for the whole event,
    extra fields included (contract §1): nesting deeper than `MAX_DEPTH`, an integer outside
    64 bits, a string (or key) that is not valid Unicode. None when it keeps them.

    `typed`: the model's fields (name -> their own `typed`, or None) whose numbers the model
    types itself -- an int field is bounded there, and a float field takes any integer as a
    float -- so only strings and depth are checked beneath them. Iterative, so a deep value
    cannot exhaust the stack; the caller has bounded its size."""
    stack: list[tuple[Any, tuple[str | int, ...], Mapping[str, Any] | None, bool]] = [
        (obj, (), typed, False)
    ]
    while stack:
        value, where, fields, numbers_typed = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _unicode(value):
                return where, "not valid Unicode (a lone surrogate)"
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if not numbers_typed and not INT64_MIN <= value <= INT64_MAX:
                return where, "integer does not fit in 64 bits"
        elif isinstance(value, dict | list):
            if len(where) >= MAX_DEPTH:
                return where, f"nested deeper than {MAX_DEPTH} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not key.isascii() and not _unicode(key):
                    return (*where, key), "key is not valid Unicode (a lone surrogate)"
                if fields is not None and isinstance(key, str) and key in fields:
                    sub = fields[key]
                    stack.append((item, (*where, key), sub, sub is None))
                else:
                    stack.append((item, (*where, key), None, numbers_typed))
    return None


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

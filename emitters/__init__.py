"""What trainers, rollout workers and inference servers import: event models and emitters.

Kept light on purpose, and lazy: `from runwatch.emitters import Emitter` pulls pydantic and the
Kafka client and nothing heavier, and importing a submodule (`runwatch.emitters.topics`,
`.exceptions`) pulls only what that submodule needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runwatch.emitters.emitter import Emitter
    from runwatch.emitters.events import KNOWN_KINDS, MAX_EVENT_BYTES, Event, Source, validate

__all__ = ["KNOWN_KINDS", "MAX_EVENT_BYTES", "Emitter", "Event", "Source", "validate"]

_WHERE = {
    "Emitter": "runwatch.emitters.emitter",
    "KNOWN_KINDS": "runwatch.emitters.events",
    "MAX_EVENT_BYTES": "runwatch.emitters.events",
    "Event": "runwatch.emitters.events",
    "Source": "runwatch.emitters.events",
    "validate": "runwatch.emitters.events",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'runwatch.emitters' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

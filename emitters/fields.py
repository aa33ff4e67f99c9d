"""What an event's fields are made of: the contract's bounds and patterns, and the typed
aliases every kind's model declares its fields with (`runwatch.emitters.kinds`).

Each constraint is an annotation pydantic enforces and `runwatch.emitters.schema` reads, so the
emitter's checks and the decoder's structs made from the models refuse the same values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError, core_schema

# (the plain values live in `bounds`, which a consumer imports without pydantic)
from runwatch.emitters.bounds import (
    COMPONENT_PATTERN,
    CONTROL,
    FLEET_RUN,
    INT64_MAX,
    INT64_MIN,
    KIND_PATTERN,
    MAX_EVENT_BYTES,
    MAX_STACK_FRAMES,
    MAX_STACK_THREADS,
    RUN_ID_PATTERN,
)

__all__ = [
    "COMPONENT_PATTERN", "CONTROL", "FLEET_RUN", "KIND_PATTERN", "MAX_EVENT_BYTES",
    "MAX_STACK_FRAMES", "MAX_STACK_THREADS", "RUN_ID_PATTERN", "EventId", "FiniteFloat",
    "Fraction", "Ident", "Int64", "KindName", "MetricValue", "Name", "Quote", "Reserved",
    "RunId", "Word", "note",
]  # fmt: skip


@dataclass(frozen=True)
class Reserved:
    """Values a string field may not take, and why: an `Annotated` marker that pydantic
    enforces here and `runwatch.emitters.schema` reads (`Text.reserved`), so every check
    made from the models -- the emitter's, the decoder's -- refuses them too."""

    reserved: tuple[str, ...]
    why: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        if value in self.reserved:
            raise PydanticCustomError(
                "reserved", "{value} is reserved: {why}", {"value": repr(value), "why": self.why}
            )
        return value


RunId = Annotated[
    str,
    StringConstraints(pattern=RUN_ID_PATTERN),
    Reserved((FLEET_RUN,), "the run of fleet incidents' alerts (contract section 8)"),
]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]


def _no_control(value: str) -> str:
    found = CONTROL.search(value)
    if found is not None:
        raise PydanticCustomError(
            "control_character",
            "must not hold control characters (found {char} at {at})",
            {"char": ascii(found.group()), "at": found.start()},
        )
    return value


#: An identifier: 1-200 characters, none of them a control character.
Ident = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_control)]
EventId = Ident
#: An optional name of a source or server: up to 200 characters, no control character.
Name = Annotated[str, StringConstraints(max_length=200), AfterValidator(_no_control)]
KindName = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=100)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
#: Metric values may be null, NaN or infinite: the rules want to see those.
MetricValue = Annotated[float, Field(allow_inf_nan=True)] | None
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Word = Annotated[str, StringConstraints(min_length=1, max_length=200)]
#: Free text an event quotes from a console (an exception line, a watchdog's message).
Quote = Annotated[str, StringConstraints(max_length=2000)]


def note(text: str | None = None, *, shape: str | None = None, default: Any = None) -> Any:
    """An optional field (`default` None) with what the table of kinds says of it beyond its
    type: `text`, in parentheses after it; `shape`, written instead of the type made from it."""
    return Field(default, description=text, json_schema_extra={"shape": shape} if shape else None)

"""The envelope every event carries (`Event`, with its `Source`), and how a kind is found:
each `Event` subclass with `kind: Literal["its.name"]` enters `KNOWN_KINDS` as it is defined.

The kinds themselves are in `runwatch.emitters.kinds`; `runwatch.emitters.events` gathers them
and validates. Extra fields are kept (``extra="allow"``); rules ignore them.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, field_validator
from pydantic_core import PydanticCustomError

from runwatch.emitters.fields import (
    COMPONENT_PATTERN,
    EventId,
    FiniteFloat,
    Int64,
    KindName,
    Name,
    RunId,
)

#: Every event model's config: strict types, extra fields kept, frozen.
STRICT_OPEN = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)
#: model -> `out_of_bounds`' typed fields (a kind's, as it is defined)
TYPED_FIELDS: dict[type[BaseModel], dict[str, Any]] = {}


class Source(BaseModel):
    """The emitting process: which component, and where it runs."""

    model_config = STRICT_OPEN

    component: Annotated[str, StringConstraints(pattern=COMPONENT_PATTERN, max_length=64)]
    host: Name | None = None
    pid: Int64 | None = None
    rank: Int64 | None = None
    instance: Name | None = None


def _typed_fields(model: type[BaseModel]) -> dict[str, Any]:
    """`out_of_bounds`' view of a model: its fields, with Source's own; free-form ones out."""
    out: dict[str, Any] = {}
    for name in model.model_fields:
        if name == "config":  # {rule: {param: anything}}: every bound checked beneath
            continue
        out[name] = _typed_fields(Source) if name == "src" else None
    return out


@dataclass(frozen=True)
class Examples:
    """One event's own fields (beside the envelope) twice: `full`, with every field set, and
    `minimal`, with the required ones alone. The emitter's and the decoder's tests run each
    kind through both, so a kind is tested from its model alone."""

    full: Mapping[str, Any]
    minimal: Mapping[str, Any]


class Event(BaseModel):
    """The envelope every event carries; also the model for kinds the rules do not read.

    A kind is a subclass with `kind: Literal["its.name"]`, found when it is defined (into
    `KNOWN_KINDS`); from it alone come the emit-side check (`runwatch.emitters.checks`), the
    decoder's struct (`runwatch.stream.decode`), the tests' events (`examples`) and its row
    of the table of kinds in docs/contract.md (`make docs`)."""

    model_config = STRICT_OPEN

    #: what makes a process emit it: the table of kinds' "emitted when"
    emitted_when: ClassVar[str]
    #: its own fields, all of them and the required ones alone (see `Examples`)
    examples: ClassVar[Examples]
    #: the fields the contract's table of kinds (section 1) pins, in its order; None: a kind
    #: this implementation adds. Every other field is an addition.
    pinned: ClassVar[tuple[str, ...] | None] = None

    v: Literal[1]
    id: EventId
    ts: FiniteFloat
    run: RunId
    kind: KindName
    src: Source

    @field_validator("v", mode="before")
    @classmethod
    def _v_is_the_int_1(cls, value: Any) -> Any:
        # pydantic's Literal[1] also takes `true` and `1.0`; the contract says an int.
        if type(value) is not int:
            raise PydanticCustomError("literal_error", "Input should be 1")
        return value

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = typing.get_args(cls.model_fields["kind"].annotation)
        if len(kind) != 1 or not isinstance(kind[0], str):
            raise TypeError(f"{cls.__name__}: kind must be Literal['one.name']")
        if kind[0] in KNOWN_KINDS:
            raise TypeError(f"{cls.__name__}: {kind[0]} is {KNOWN_KINDS[kind[0]].__name__}'s")
        KNOWN_KINDS[kind[0]] = cls
        TYPED_FIELDS[cls] = _typed_fields(cls)


#: Every kind the rules read, by name, each found as its model is defined. Other kinds
#: validate as plain `Event`.
KNOWN_KINDS: dict[str, type[Event]] = {}

TYPED_FIELDS[Event] = _typed_fields(Event)

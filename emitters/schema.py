"""The event models' fields as plain data: each field's shape (its type with its bounds).

The models in `runwatch.emitters.events` are the one definition of an event kind. What else
needs the schema is made from these shapes rather than written beside the models: the
emit-side checks (`runwatch.emitters.checks`), the decoder's msgspec structs
(`runwatch.stream.decode`) and the table of kinds and fields in docs/contract.md
(`make docs`). One walk of pydantic's annotations, so a constraint the models
use is understood, or refused with a TypeError, in one place.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Num:
    """An int or a float, within `ge` / `le` when set; `finite`: no NaN or infinity."""

    type: type[int] | type[float]
    ge: float | None = None
    le: float | None = None
    finite: bool = False


@dataclass(frozen=True)
class Text:
    """A string of `min_length` to `max_length` characters, matching `pattern` when set, and
    none of `reserved` (`runwatch.emitters.fields.Reserved`)."""

    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    reserved: tuple[str, ...] = ()


def python_pattern(shape: Text) -> str | None:
    """The text's constraints as one regular expression for Python's `re` (`search`), what
    the emitter's checks and the decoder's structs run: `pattern` with its final `$` made
    the very end of the text (pydantic matches with Rust's regex, where it is; in `re` it
    also matches before a trailing newline), and a look-ahead that refuses `reserved`."""
    pattern = shape.pattern
    if pattern is not None and pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    if not shape.reserved:
        return pattern
    refuse = "|".join(re.escape(value) for value in shape.reserved)
    body = pattern[1:] if pattern is not None and pattern.startswith("^") else (pattern or "")
    return rf"^(?!(?:{refuse})\Z){body}"


@dataclass(frozen=True)
class Flag:
    """true or false."""


@dataclass(frozen=True)
class OneOf:
    """One of a few values (a `Literal`)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class MapOf:
    """An object whose keys and values each have one shape."""

    key: Shape
    value: Shape


@dataclass(frozen=True)
class ListOf:
    """An array of items of one shape, at most `max_length` of them when set."""

    item: Shape
    max_length: int | None = None


@dataclass(frozen=True)
class Object:
    """An object with a model's fields (a thread of `process.stacks`)."""

    model: type[BaseModel]


@dataclass(frozen=True)
class Maybe:
    """A value of `inner`'s shape, or null."""

    inner: Shape


@dataclass(frozen=True)
class Anything:
    """Any JSON value (the parameters of `run.started.config`)."""


Shape = Num | Text | Flag | OneOf | MapOf | ListOf | Object | Maybe | Anything


@dataclass(frozen=True)
class FieldShape:
    """One field of a model: its name, shape, whether it must be there, and what the
    contract's table says of it beyond its type (`note`; `shape_doc`, written instead of the
    type, from the field's `json_schema_extra={"shape": ...}`)."""

    name: str
    shape: Shape
    required: bool
    note: str | None = None
    shape_doc: str | None = field(default=None, compare=False)
    default: Any = field(default=None, compare=False)


_BOUNDS = ("ge", "le", "min_length", "max_length", "pattern", "allow_inf_nan", "reserved")


def _bounds(metadata: Iterable[Any]) -> dict[str, Any]:
    """The constraints the models use (pydantic's and annotated-types'), by name."""
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):
            out.update(_bounds(m.metadata))
            continue
        for name in _BOUNDS:
            value = getattr(m, name, None)
            if value is not None and not callable(value):
                out[name] = value
    return out


def shape_of(tp: Any, metadata: Iterable[Any] = ()) -> Shape:
    """The shape of a value of type `tp` (with its constraints in `metadata`); TypeError for
    a type the models do not use."""
    bounds = _bounds(metadata)
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        return shape_of(base, [*meta, *metadata])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return Object(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return Maybe(shape_of(args[0]))
        raise TypeError(f"schema: a union other than X | None: {tp!r}")
    if origin is Literal:
        return OneOf(typing.get_args(tp))
    if origin is dict:
        key, value = typing.get_args(tp)
        return MapOf(shape_of(key), shape_of(value))
    if origin is list:
        return ListOf(shape_of(typing.get_args(tp)[0]), bounds.get("max_length"))
    if tp is bool:
        return Flag()
    if tp is int or tp is float:
        finite = tp is float and bounds.get("allow_inf_nan") is False
        return Num(tp, bounds.get("ge"), bounds.get("le"), finite)
    if tp is str:
        return Text(bounds.get("min_length", 0), bounds.get("max_length"), bounds.get("pattern"),
                    bounds.get("reserved", ()))  # fmt: skip
    if tp is Any:
        return Anything()
    raise TypeError(f"schema: no shape for {tp!r}")


def fields_of(model: type[BaseModel], skip: Iterable[str] = ()) -> list[FieldShape]:
    """A model's fields, in their order, but those in `skip` (an event's envelope)."""
    left_out = set(skip)
    out = []
    for name, info in model.model_fields.items():
        if name in left_out:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        shape_doc = extra.get("shape")
        out.append(
            FieldShape(
                name,
                shape_of(info.annotation, info.metadata),
                info.is_required(),
                info.description,
                shape_doc if isinstance(shape_doc, str) else None,
                None if info.is_required() else info.default,
            )
        )
    return out

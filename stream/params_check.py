"""A rule's parameters checked against a config's table, in pydantic's words.

A rule's parameters are a plain record (`Params`, a msgspec struct in the rule's module: its
fields, bounds and defaults the one definition). Where a table says more than on or off, it
is checked by a pydantic model derived from that record here -- the same fields, defaults,
bounds (`Meta` as pydantic's constraints) and names a config uses -- strict and closed, so a
wrong type or an unknown key is an error that names the key (`runwatch.stream.config`).
pydantic is imported, and each model built, only the first time a table needs it: a command
given the defaults, or rules only switched on or off, starts without either.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Any, TypeVar, Union

import msgspec
from pydantic import BaseModel, ConfigDict, Field, create_model

from runwatch.stream.rules.base import Params

P = TypeVar("P", bound=Params)

#: every parameter model's config: unknown keys and wrong types are errors (strict:
#: `steps = "10"` is refused, not quietly read as 10)
STRICT_CLOSED = ConfigDict(extra="forbid", frozen=True, strict=True)
#: `Meta`'s bounds that pydantic's `Field` takes by the same name
_BOUNDS = ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern")


def _pydantic_type(tp: Any) -> Any:
    """The annotation pydantic checks for a field of type `tp` (its `Meta` as `Field`)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *metadata = typing.get_args(tp)
        bounds = {
            name: getattr(m, name)
            for m in metadata
            if isinstance(m, msgspec.Meta)
            for name in _BOUNDS
            if getattr(m, name) is not None
        }
        inner = _pydantic_type(base)
        return Annotated[inner, Field(**bounds)] if bounds else inner
    if origin in (Union, types.UnionType):
        return Union[tuple(_pydantic_type(a) for a in typing.get_args(tp))]  # noqa: UP007
    if origin in (list, dict):
        return origin[tuple(_pydantic_type(a) for a in typing.get_args(tp))]
    return tp


@functools.cache
def model_of(params: type[Params]) -> type[BaseModel]:
    """The pydantic model that checks a table for `params` (built once, when first asked)."""
    fields: dict[str, Any] = {}
    for f in msgspec.structs.fields(params):
        kw: dict[str, Any] = {"alias": f.encode_name} if f.encode_name != f.name else {}
        if f.default_factory is not msgspec.NODEFAULT:
            kw["default_factory"] = f.default_factory
        elif f.default is not msgspec.NODEFAULT:
            kw["default"] = f.default
        fields[f.name] = (_pydantic_type(f.type), Field(**kw))
    return create_model(params.__name__, __config__=STRICT_CLOSED, **fields)


def checked(params: type[P], table: dict[str, Any]) -> P:
    """`params` from a config's table (keys as a config writes them); raises pydantic's
    ValidationError naming each bad key."""
    model = model_of(params).model_validate(table)
    return params(**{name: getattr(model, name) for name in params.__struct_fields__})

"""A rule's parameters checked against a config's table.

A rule's parameters are a plain record (`Params`, a msgspec struct in the rule's module: its
fields, bounds and defaults the one definition). A table is first read into it by msgspec
(`quick`): strict, closed, its bounds as `Meta`. What msgspec refuses -- and the one thing it
would take that pydantic does not, a string with a newline (a pattern's `$` matches before a
final newline in Python's `re`, not in pydantic's) -- is checked by a pydantic model derived
from that record here (`checked`: the same fields, defaults, names a config uses and bounds,
as pydantic's constraints), whose errors name the key (`runwatch.stream.config`). pydantic is
imported, and each model built, only then: a command given valid tables, or a run's valid
config, starts and runs without either. tests/unit/stream/test_config.py holds `quick` to
never taking what `checked` refuses.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, Union

import msgspec

from runwatch.stream.rules.base import Params

if TYPE_CHECKING:
    from pydantic import BaseModel

P = TypeVar("P", bound=Params)

#: `Meta`'s bounds that pydantic's `Field` takes by the same name
_BOUNDS = ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern")


def quick(params: type[P], table: Mapping[str, Any]) -> P | None:
    """`params` from a table (keys as a config writes them), or None: then `checked`
    decides, and words why."""
    if _newline(table):
        return None
    try:
        return msgspec.convert(table, params)
    except msgspec.ValidationError:
        return None


def _newline(value: Any) -> bool:
    """Whether a string anywhere in a table (keys included) holds a newline."""
    if isinstance(value, str):
        return "\n" in value
    if isinstance(value, Mapping):
        return any(_newline(k) or _newline(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(map(_newline, value))
    return False


def _pydantic_type(tp: Any) -> Any:
    """The annotation pydantic checks for a field of type `tp` (its `Meta` as `Field`)."""
    from pydantic import Field

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
    """The pydantic model that checks a table for `params` (built once, when first asked):
    strict and closed, so `steps = "10"` and an unknown key are errors that name the key."""
    from pydantic import ConfigDict, Field, create_model

    fields: dict[str, Any] = {}
    for f in msgspec.structs.fields(params):
        kw: dict[str, Any] = {"alias": f.encode_name} if f.encode_name != f.name else {}
        if f.default_factory is not msgspec.NODEFAULT:
            kw["default_factory"] = f.default_factory
        elif f.default is not msgspec.NODEFAULT:
            kw["default"] = f.default
        fields[f.name] = (_pydantic_type(f.type), Field(**kw))
    strict_closed = ConfigDict(extra="forbid", frozen=True, strict=True)
    return create_model(params.__name__, __config__=strict_closed, **fields)


def checked(params: type[P], table: Mapping[str, Any]) -> P:
    """`params` from a table, by pydantic's verdict; raises pydantic's ValidationError
    naming each bad key."""
    model = model_of(params).model_validate(table)
    return params(**{name: getattr(model, name) for name in params.__struct_fields__})

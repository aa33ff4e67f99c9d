"""The decoder's msgspec structs as Python source, made from the event models.

`runwatch.stream.decode` builds its structs from `runwatch.stream.decode_structs`, which this
writes (`make docs`, or `python -m runwatch.stream.decode_gen`): the models stay the one
definition of an event (`runwatch.emitters.events`), while a consumer starts without
importing pydantic or building the models. tests/unit/stream/test_decode_structs.py holds
the file to what this makes of the models now, so a model changed without regenerating
fails the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from runwatch.emitters import events, schema

#: Where the generated module is, beside this one.
TARGET = Path(__file__).with_name("decode_structs.py")

HEADER = '''"""The decoder's structs, one per event kind, with the bounds of their fields: generated
by `runwatch.stream.decode_gen` from the event models (`runwatch.emitters.events`) -- do
not edit; `make docs` writes it again. No pydantic here: `runwatch.stream.decode` builds
the structs from `structs` at import.
"""

# ruff: noqa: E501, N806
# mypy: disable-error-code="valid-type"
from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from msgspec import Meta

#: A struct maker: (name, tag or None, fields as (name, type[, default]), pattern-constrained
#: str fields as (dotted path, Python regex)) -> the struct type.
Make = Callable[[str, "str | None", list[tuple[Any, ...]], list[tuple[str, str]]], Any]

'''


def _meta(**bounds: object) -> str:
    kw = ", ".join(f"{k}={v!r}" for k, v in bounds.items() if v is not None)
    return f"Meta({kw})" if kw else ""


def _annotated(tp: str, **bounds: object) -> str:
    meta = _meta(**bounds)
    return f"Annotated[{tp}, {meta}]" if meta else tp


def _type_of(shape: schema.Shape, names: dict[type[BaseModel], str]) -> str:
    """The source of the msgspec type of a value of this shape, its bounds included.
    allow_inf_nan needs no translation: strict JSON cannot spell a non-finite number, so
    non-finite values only ever reach pydantic through the fallback path."""
    if isinstance(shape, schema.Num):
        return _annotated(shape.type.__name__, ge=shape.ge, le=shape.le)
    if isinstance(shape, schema.Text):
        return _annotated("str", min_length=shape.min_length or None,
                          max_length=shape.max_length,
                          pattern=schema.python_pattern(shape))  # fmt: skip
    if isinstance(shape, schema.Flag):
        return "bool"
    if isinstance(shape, schema.OneOf):
        return f"Literal[{', '.join(map(repr, shape.values))}]"
    if isinstance(shape, schema.MapOf):
        return f"dict[{_type_of(shape.key, names)}, {_type_of(shape.value, names)}]"
    if isinstance(shape, schema.ListOf):
        return _annotated(f"list[{_type_of(shape.item, names)}]", max_length=shape.max_length)
    if isinstance(shape, schema.Object):
        return names[shape.model]
    if isinstance(shape, schema.Maybe):
        return f"{_type_of(shape.inner, names)} | None"
    return "Any"


class _Writer:
    """The body of `structs`: one statement per model, sub-models before their users."""

    def __init__(self) -> None:
        self.names: dict[type[BaseModel], str] = {}
        #: the pattern fields of a model written, as (dotted path, pattern)
        self.patterns: dict[type[BaseModel], list[tuple[str, str]]] = {}
        self.lines: list[str] = []
        #: each kind's fields that must be finite numbers, by its tag
        self.finite: dict[str, tuple[str, ...]] = {}

    def write(self, model: type[BaseModel], tag: str | None) -> str:
        if model in self.names:
            return self.names[model]
        fields: list[str] = []
        patterns: list[tuple[str, str]] = []
        for field in schema.fields_of(model, ["kind"] if tag is not None else []):
            # (the tag itself is left out: the maker exposes it as a class attribute)
            shape = field.shape
            for inner in (shape.inner,) if isinstance(shape, schema.Maybe) else (shape,):
                if isinstance(inner, schema.ListOf) and isinstance(inner.item, schema.Object):
                    self.write(inner.item.model, None)
                if isinstance(inner, schema.Object):
                    self.write(inner.model, None)
            if isinstance(shape, schema.Text) and (pattern := schema.python_pattern(shape)):
                patterns.append((field.name, pattern))
                shape = schema.Text(shape.min_length, shape.max_length)
            if isinstance(shape, schema.Object) and self.patterns.get(shape.model):
                # a required sub-model (the event's `src`) with patterns: checked as the
                # event's own, by path
                assert field.required, f"decode: {model.__name__}.{field.name} may be None"
                patterns += [(f"{field.name}.{p}", pat) for p, pat in self.patterns[shape.model]]
            if _finite(shape, top=True):
                self.finite.setdefault(tag or "", ())
                self.finite[tag or ""] += (field.name,)
            tp = _type_of(shape, self.names)
            default = "" if field.required else f", {field.default!r}"
            fields.append(f"({field.name!r}, {tp}{default})")
        name = model.__name__
        body = ",\n        ".join(fields)
        self.lines.append(
            f"    {name} = make(\n        {name!r},\n        {tag!r},\n"
            f"        [\n        {body},\n        ],\n        {patterns!r},\n    )"
        )
        self.names[model] = name
        self.patterns[model] = patterns
        return name


def _finite(shape: schema.Shape, top: bool) -> bool:
    """Whether a field of this shape must be a finite number: one of an event's own (or
    null), which the decoder checks after reading a record with a `NaN` token; TypeError
    for one deeper (no model has one: the check would need a walk)."""
    if isinstance(shape, schema.Maybe):
        return _finite(shape.inner, top)
    if isinstance(shape, schema.Num):
        if shape.finite and not top:
            raise TypeError("decode: a finite number inside a container or sub-model")
        return shape.finite
    for inner in (
        (shape.key, shape.value) if isinstance(shape, schema.MapOf)
        else (shape.item,) if isinstance(shape, schema.ListOf)
        else [f.shape for f in schema.fields_of(shape.model)] if isinstance(shape, schema.Object)
        else ()
    ):  # fmt: skip
        _finite(inner, top=False)
    return False


def render() -> str:
    """The source of `runwatch.stream.decode_structs` for the models as they are now."""
    writer = _Writer()
    kinds = [writer.write(model, kind) for kind, model in events.KNOWN_KINDS.items()]
    listed = "".join(f"    {kind!r},\n" for kind in events.KNOWN_KINDS)
    if "" in writer.finite:
        raise TypeError("decode: a finite number in a sub-model")
    finite = "".join(f"    {k!r}: {v!r},\n" for k, v in writer.finite.items())
    return (
        HEADER
        + f"#: Every kind the models define, in their order.\nKINDS = (\n{listed})\n\n"
        + "#: Each kind's fields that must be finite numbers (not NaN or infinite).\n"
        + f"FINITE: dict[str, tuple[str, ...]] = {{\n{finite}}}\n\n\n"
        + "def structs(make: Make) -> list[Any]:\n"
        + '    """Every kind\'s struct, made by `make`, in the order of `KINDS`."""\n'
        + "\n".join(writer.lines)
        + f"\n    return [{', '.join(kinds)}]\n"
    )


def main() -> int:
    """Write the module; with --check, exit 1 (writing nothing) when it is not current."""
    text = render()
    current = TARGET.read_text() if TARGET.exists() else ""
    if "--check" in sys.argv[1:]:
        return 0 if current == text else 1
    if current != text:
        TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

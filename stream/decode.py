"""Bytes to validated events, fast: the hot path of every consumer.

`bench/decode.py` measures pydantic's own JSON validation at ~4 µs per event and this
module at ~1 µs (a 2-CPU EPYC VM), so the common case goes through msgspec Structs that are
*generated from the pydantic models* in `runwatch.emitters.events` (one definition of the
schema). Whatever that fast path refuses -- unknown kinds, the `NaN`/`Infinity` tokens that
strict JSON parsers reject, and genuinely bad input -- is decided by the stdlib parser plus
pydantic, which also words the reason that goes to the dead-letter place.

Fast-path objects are Structs with the same attribute names and value types as the pydantic
models (tests/unit/test_decode.py holds the two paths to the same verdicts), so the rest of
the stream code is typed against the pydantic classes.
"""

from __future__ import annotations

import json
import operator
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

import annotated_types
import msgspec
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from runwatch.emitters import events
from runwatch.emitters.events import describe_errors
from runwatch.stream.exceptions import InvalidEvent

__all__ = ["InvalidEvent", "decode", "decode_obj", "describe_errors"]


# --- deriving msgspec types from the pydantic models -------------------------------------


def _meta_from(metadata: list[Any]) -> msgspec.Meta | None:
    """Translate the pydantic/annotated-types constraints the models use into msgspec's."""
    kw: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):
            sub = _meta_from(m.metadata)
            if sub is not None:
                # `is not None`: a bound of 0 is a bound (kv_cache_usage >= 0)
                for k in ("ge", "le", "pattern", "min_length", "max_length"):
                    if getattr(sub, k) is not None:
                        kw[k] = getattr(sub, k)
        elif isinstance(m, annotated_types.Ge):
            kw["ge"] = m.ge
        elif isinstance(m, annotated_types.Le):
            kw["le"] = m.le
        elif hasattr(m, "pattern") or hasattr(m, "max_length"):  # StringConstraints
            for attr in ("pattern", "min_length", "max_length"):
                if getattr(m, attr, None) is not None:
                    kw[attr] = getattr(m, attr)
            if "pattern" in kw:
                kw["pattern"] = _python_pattern(kw["pattern"])
        # allow_inf_nan needs no translation: strict JSON cannot spell a non-finite number,
        # so non-finite values only ever reach pydantic through the fallback path.
    return msgspec.Meta(**kw) if kw else None


def _python_pattern(pattern: str) -> str:
    """pydantic matches with Rust's regex, where a final `$` is the very end of the text;
    msgspec uses Python's `re`, where `$` also matches before a trailing newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + r"\Z"
    return pattern


class _Patterns:
    """The pattern-constrained strings of one event struct, checked after msgspec's decode.

    msgspec runs `re.search` on every occurrence (~0.9 µs of the ~1.5 µs an event took in
    bench/decode.py), while one partition carries the same few (run id, component) pairs
    over and over: a memo of the value tuples that matched answers almost every time, with
    the very regexes msgspec would have run deciding the rest.
    """

    __slots__ = ("get", "matched", "searches")

    MEMO = 4096  # value tuples remembered; the memo starts over when full

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        paths = [path for path, _ in fields]
        self.get = operator.attrgetter(*paths) if len(paths) > 1 else _one(paths[0])
        self.searches = tuple(re.compile(pattern).search for _, pattern in fields)
        self.matched: set[tuple[str, ...]] = set()

    def hold(self, obj: Any) -> bool:
        values = self.get(obj)
        if values in self.matched:
            return True
        if not all(s(v) is not None for s, v in zip(self.searches, values, strict=True)):
            return False
        if len(self.matched) >= self.MEMO:
            self.matched.clear()
        self.matched.add(values)
        return True


def _one(path: str) -> Any:
    get = operator.attrgetter(path)
    return lambda obj: (get(obj),)


def _without_pattern(m: msgspec.Meta) -> msgspec.Meta | None:
    kw = {k: getattr(m, k) for k in ("ge", "le", "min_length", "max_length")}
    kw = {k: v for k, v in kw.items() if v is not None}
    return msgspec.Meta(**kw) if kw else None


#: struct type -> its pattern-constrained str fields, as (dotted path, pattern), sub-structs
#: (the event's `src`) included. Patterns of strings in containers stay with msgspec (the
#: models have none).
_PATTERN_FIELDS: dict[type, list[tuple[str, str]]] = {}
#: event struct type -> its checker
_PATTERNS: dict[type, _Patterns] = {}


def _translate(tp: Any, structs: dict[type[BaseModel], Any]) -> Any:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _struct_for(tp, structs, tag=None)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        inner = _translate(base, structs)
        m = _meta_from(meta)
        return Annotated[inner, m] if m is not None else inner
    if origin in (Union, types.UnionType):
        return Union[tuple(_translate(a, structs) for a in typing.get_args(tp))]  # noqa: UP007
    if origin is dict:
        k, v = typing.get_args(tp)
        return dict[_translate(k, structs), _translate(v, structs)]  # type: ignore[misc]
    if origin is list:
        return list[_translate(typing.get_args(tp)[0], structs)]  # type: ignore[misc]
    if origin is Literal or tp in (str, int, float, bool, Any, type(None)):
        return tp
    raise TypeError(f"decode: no msgspec translation for {tp!r}")


def _struct_for(
    model: type[BaseModel], structs: dict[type[BaseModel], Any], tag: str | None
) -> Any:
    if model in structs:
        return structs[model]
    fields: list[tuple[str, Any, Any]] = []
    patterns: list[tuple[str, str]] = []
    for name, info in model.model_fields.items():
        if name == "kind" and tag is not None:
            continue  # the tag itself; exposed as a class attribute below
        tp = _translate(info.annotation, structs)
        if tp in _PATTERN_FIELDS:  # a required sub-model (the event's `src`) with patterns
            assert info.is_required(), f"decode: {model.__name__}.{name} may be None"
            patterns += [(f"{name}.{path}", p) for path, p in _PATTERN_FIELDS[tp]]
        m = _meta_from(info.metadata)
        if m is not None and m.pattern is not None and info.annotation is str:
            patterns.append((name, m.pattern))
            m = _without_pattern(m)
        if m is not None:
            tp = Annotated[tp, m]
        if info.is_required():
            fields.append((name, tp, msgspec.NODEFAULT))
        else:
            fields.append((name, tp, info.default))
    required: list[Any] = [f[:2] for f in fields if f[2] is msgspec.NODEFAULT]
    optional: list[Any] = [f for f in fields if f[2] is not msgspec.NODEFAULT]
    struct = msgspec.defstruct(
        f"Fast{model.__name__}",
        required + optional,
        tag_field="kind" if tag else None,
        tag=tag,
        namespace={"kind": tag} if tag else None,
        gc=False,
        frozen=True,
    )
    structs[model] = struct
    if patterns:
        _PATTERN_FIELDS[struct] = patterns
    return struct


def _build() -> msgspec.json.Decoder[Any]:
    structs: dict[type[BaseModel], Any] = {}
    members = [_struct_for(m, structs, tag=k) for k, m in events.KNOWN_KINDS.items()]
    for member in members:
        if member in _PATTERN_FIELDS:
            _PATTERNS[member] = _Patterns(_PATTERN_FIELDS[member])
    return msgspec.json.Decoder(Union[tuple(members)])  # noqa: UP007


_FAST = _build()


# --- decoding -----------------------------------------------------------------------------


def decode_obj(obj: Any) -> events.Event:
    """Validate an already-parsed JSON value; raises InvalidEvent with the reason."""
    try:
        return events.validate(obj)
    except ValidationError as err:
        raise InvalidEvent(describe_errors(err)) from None


def decode(raw: bytes | str) -> events.Event:
    """Decode one JSON Lines record into a validated event; raises InvalidEvent."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > events.MAX_EVENT_BYTES:
        raise InvalidEvent(f"event is {len(raw)} bytes, larger than the 64 KiB limit")
    try:
        event: events.Event = _FAST.decode(raw)
        patterns = _PATTERNS.get(type(event))
        if patterns is None or patterns.hold(event):
            return event
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
        pass  # msgspec raises UnicodeDecodeError for invalid UTF-8 inside a string
    # The fallback decides: stdlib json accepts NaN/Infinity tokens, pydantic knows
    # unknown kinds and words the reason.
    try:
        # UTF-8 only (contract §1): json.loads on bytes would also guess UTF-16/32.
        obj = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError) as err:
        raise InvalidEvent(f"not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InvalidEvent(f"not a JSON object but {type(obj).__name__}")
    return decode_obj(obj)

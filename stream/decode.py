"""Bytes to validated events, fast: the hot path of every consumer.

`bench/decode.py` measured pydantic's own JSON validation at ~3.3 µs per event here and a
typed msgspec decode at ~0.5 µs, so the common case goes through msgspec Structs that are
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
import types
import typing
from typing import Annotated, Any, Literal, Union, cast

import annotated_types
import msgspec
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from runwatch.emitters import events
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
    for name, info in model.model_fields.items():
        if name == "kind" and tag is not None:
            continue  # the tag itself; exposed as a class attribute below
        tp = _translate(info.annotation, structs)
        m = _meta_from(info.metadata)
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
    return struct


def _build() -> msgspec.json.Decoder[Any]:
    structs: dict[type[BaseModel], Any] = {}
    members = [_struct_for(m, structs, tag=k) for k, m in events.KNOWN_KINDS.items()]
    return msgspec.json.Decoder(Union[tuple(members)])  # noqa: UP007


_FAST = _build()


# --- decoding -----------------------------------------------------------------------------


def describe_errors(err: ValidationError) -> str:
    """One line naming each bad field: what a person needs to fix the emitter."""
    parts = []
    for e in err.errors(include_url=False)[:5]:
        loc = ".".join(str(x) for x in e["loc"]) or "event"
        parts.append(f"{loc}: {e['msg']}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


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
        return cast(events.Event, _FAST.decode(raw))
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

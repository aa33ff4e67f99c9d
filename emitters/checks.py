"""Cheap field checks for the kinds the rules read, so `emit()` can skip pydantic; and the
checks of everything else an emitter is handed.

Full pydantic validation costs several times what these checks do per event (figures:
bench/RESULTS.md, "What `emit()`'s field checks cost"), too much for a trainer's hot loop.
Each kind's check is made from its model (`runwatch.emitters.schema`): it accepts the common,
plainly valid shapes only (`int` for int, `int`/`float` for float, printable strings, …);
anything it does not accept is *not sure*, and the emitter then asks pydantic on the exact
wire form. So a check may be stricter than the model but never laxer --
tests/unit/emitters/test_emitter.py holds the two to that.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from runwatch.emitters.bounds import INT64_MAX, INT64_MIN
from runwatch.emitters.events import (
    COMPONENT_PATTERN,
    FLEET_RUN,
    KIND_PATTERN,
    KNOWN_KINDS,
    RUN_ID_PATTERN,
    Event,
    describe_errors,
    validate,
)
from runwatch.emitters.schema import (
    Anything,
    Flag,
    ListOf,
    MapOf,
    Maybe,
    Num,
    Object,
    OneOf,
    Shape,
    Text,
    fields_of,
    python_pattern,
)

Check = Callable[[Any], bool]
FieldsCheck = Callable[[Mapping[str, Any]], bool]


def _int(v: Any) -> bool:
    return type(v) is int and INT64_MIN <= v <= INT64_MAX


def _float(v: Any) -> bool:
    return type(v) is float or _int(v)


def _str(v: Any) -> bool:
    # printable: no control character and no lone surrogate (stricter than the models)
    return type(v) is str and v.isprintable()


def _bool(v: Any) -> bool:
    return type(v) is bool


def _plain(v: Any) -> bool:
    """A value plainly within every bound: a scalar, an int of 64 bits, a printable str."""
    return v is None or type(v) is bool or type(v) is float or _int(v) or _str(v)


def _key(k: Any) -> bool:
    # JSON object keys are strings on the wire whatever Python key type made them.
    return _str(k) or _int(k)


#: How deep `_anything` looks (an event may nest 32 levels; `Any` sits a few levels down).
_ANY_DEPTH = 16


def _anything(v: Any, depth: int = 0) -> bool:
    """Plain values, and arrays and objects of them a few levels deep."""
    if type(v) is dict:
        return depth < _ANY_DEPTH and all(_key(k) and _anything(x, depth + 1) for k, x in v.items())
    if type(v) is list:
        return depth < _ANY_DEPTH and all(_anything(x, depth + 1) for x in v)
    return _plain(v)


def _number(shape: Num) -> Check:
    lo = INT64_MIN if shape.ge is None else shape.ge
    hi = INT64_MAX if shape.le is None else shape.le
    if shape.type is int:
        if lo <= INT64_MIN and hi >= INT64_MAX:
            return _int
        lo, hi = max(lo, INT64_MIN), min(hi, INT64_MAX)
        return lambda v: type(v) is int and lo <= v <= hi
    if shape.finite:  # NaN fails every comparison: not sure, so pydantic decides
        return lambda v: _float(v) and math.isfinite(v) and lo <= v <= hi
    if shape.ge is None and shape.le is None:
        return _float
    return lambda v: _float(v) and lo <= v <= hi


def _text(shape: Text) -> Check:
    lo = shape.min_length
    hi = shape.max_length if shape.max_length is not None else math.inf
    pattern = python_pattern(shape)
    if pattern is not None:
        search = re.compile(pattern).search
        return lambda v: _str(v) and lo <= len(v) <= hi and search(v) is not None
    if lo == 0 and hi == math.inf:
        return _str
    return lambda v: type(v) is str and lo <= len(v) <= hi and v.isprintable()


def _one_of(values: tuple[Any, ...]) -> Check:
    if all(type(x) is str for x in values):
        allowed = frozenset(values)
        return lambda v: type(v) is str and v in allowed
    return lambda v: any(type(v) is type(x) and v == x for x in values)


def _map_of(key: Shape, value: Shape) -> Check:
    key_ok = _key if key == Text() else check_of(key)
    value_ok = check_of(value)
    return lambda v: type(v) is dict and all(key_ok(k) and value_ok(x) for k, x in v.items())


def _list_of(item: Shape, most: int | None) -> Check:
    item_ok = check_of(item)
    limit = most if most is not None else math.inf
    return lambda v: type(v) is list and len(v) <= limit and all(item_ok(x) for x in v)


def _object(model: type[BaseModel]) -> Check:
    fields = fields_check(model)
    return lambda v: type(v) is dict and fields(v)


def _float_or_none(v: Any) -> bool:
    return v is None or type(v) is float or _int(v)


def _maybe(inner: Shape) -> Check:
    ok = check_of(inner)
    if ok is _float:  # a metric's value: one call per value, not two
        return _float_or_none
    return lambda v: v is None or ok(v)


def check_of(shape: Shape) -> Check:
    """The cheap check of one value of this shape: True only where the model surely agrees."""
    if isinstance(shape, Num):
        return _number(shape)
    if isinstance(shape, Text):
        return _text(shape)
    if isinstance(shape, Flag):
        return _bool
    if isinstance(shape, OneOf):
        return _one_of(shape.values)
    if isinstance(shape, MapOf):
        return _map_of(shape.key, shape.value)
    if isinstance(shape, ListOf):
        return _list_of(shape.item, shape.max_length)
    if isinstance(shape, Object):
        return _object(shape.model)
    if isinstance(shape, Maybe):
        return _maybe(shape.inner)
    if isinstance(shape, Anything):
        return _anything
    raise TypeError(f"checks: no check for {shape!r}")


def fields_check(model: type[BaseModel]) -> FieldsCheck:
    """The check of a model's own fields (an event's: all but the envelope, which the
    emitter stamps and checks at construction). Fields the model lacks must be plain
    values: the whole event's bounds hold for them too."""
    envelope = Event.model_fields if issubclass(model, Event) else {}
    shapes = fields_of(model, envelope)
    required = tuple(f.name for f in shapes if f.required)
    checks = {f.name: check_of(f.shape) for f in shapes}

    def check(fields: Mapping[str, Any]) -> bool:
        for name in required:
            if name not in fields:
                return False
        for name, v in fields.items():
            ok = checks.get(name)
            if not (_plain(v) if ok is None else ok(v)):
                return False
        return True

    return check


#: Kind -> a check of its own fields, made from its model.
FIELD_CHECKS: dict[str, FieldsCheck] = {k: fields_check(m) for k, m in KNOWN_KINDS.items()}


#: Kinds seen valid already: the kind check of emit() is one set lookup.
GOOD_KINDS: set[str] = set(KNOWN_KINDS)
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def learn_kind(kind: object) -> None:
    """Check a kind not seen before; remember it (up to a bound) if it is good."""
    if not isinstance(kind, str) or len(kind) > 100 or not re.fullmatch(KIND_PATTERN, kind):
        raise ValueError(f"kind {kind!r} is not a dotted lowercase name like 'step.done'")
    model = KNOWN_KINDS.get(kind)
    if model is not None and kind not in FIELD_CHECKS:  # a kind defined after this import
        FIELD_CHECKS[kind] = fields_check(model)
    if len(GOOD_KINDS) < 10_000:
        GOOD_KINDS.add(kind)


def validate_slowly(kind: str, line: str) -> None:
    """Full pydantic validation of the exact wire form, for shapes the cheap checks doubt."""
    try:
        validate(json.loads(line))
    except ValidationError as err:
        raise ValueError(f"invalid {kind} event: {describe_errors(err, limit=None)}") from None


def check_settings(
    *,
    run: object,
    component: object,
    rank: object,
    instance: object,
    topic: object,
    heartbeat_interval: object,
    close_timeout: object,
    counts: Mapping[str, object],
) -> None:
    """The Emitter's arguments, checked once so that bad ones fail at construction."""
    if not isinstance(run, str) or not re.fullmatch(RUN_ID_PATTERN, run):
        raise ValueError(f"run id {run!r} is not 1-200 characters of [A-Za-z0-9._:/@+-]")
    if run == FLEET_RUN:
        raise ValueError(f"run id {run!r} is reserved: the run of fleet incidents' alerts")
    if not isinstance(component, str) or not re.fullmatch(COMPONENT_PATTERN, component):
        raise ValueError(f"component {component!r} must be a lowercase word such as 'trainer'")
    if rank is not None and type(rank) is not int:
        raise ValueError(f"rank must be an int, not {rank!r}")
    if instance is not None and not isinstance(instance, str):
        raise ValueError(f"instance must be a str, not {instance!r}")
    if not (isinstance(topic, str) and _TOPIC.fullmatch(topic)):
        raise ValueError(f"{topic!r} is not a Kafka topic name")
    if not (isinstance(heartbeat_interval, int | float) and 0 < heartbeat_interval < math.inf):
        raise ValueError("heartbeat_interval must be a positive number of seconds")
    if not (isinstance(close_timeout, int | float) and close_timeout >= 0):
        raise ValueError(f"close_timeout must be >= 0 seconds, not {close_timeout!r}")
    for name, value in counts.items():
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive int, not {value!r}")

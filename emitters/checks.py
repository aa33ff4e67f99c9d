"""Cheap field checks for the kinds the rules read, so `emit()` can skip pydantic.

Full pydantic validation costs several µs per event, too much for a trainer's hot loop. These
checks accept the common, plainly valid shapes only (`int` for int, `int`/`float` for float,
…); anything they do not accept is *not sure*, and the emitter then asks pydantic on the exact
wire form. So a check may be stricter than the models but never laxer —
tests/unit/test_emitter.py holds the two to that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]
FieldsCheck = Callable[[Mapping[str, Any]], bool]

_MISSING = object()


def _int(v: Any) -> bool:
    return type(v) is int


def _float(v: Any) -> bool:
    return type(v) is float or type(v) is int


def _str(v: Any) -> bool:
    return type(v) is str


def _word(v: Any) -> bool:
    return type(v) is str and 0 < len(v) <= 200


def _fraction(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and 0 <= v <= 1


def _metric(v: Any) -> bool:
    return v is None or type(v) is float or type(v) is int


def _opt(check: Check) -> Check:
    def optional(v: Any) -> bool:
        return v is None or check(v)

    return optional


def _one_of(*allowed: str) -> Check:
    values = frozenset(allowed)

    def literal(v: Any) -> bool:
        return type(v) is str and v in values

    return literal


def _dict_of(value: Check) -> Check:
    def mapping(v: Any) -> bool:
        # JSON object keys are strings on the wire whatever Python key type made them.
        return type(v) is dict and all(value(x) for x in v.values())

    return mapping


def _config(v: Any) -> bool:
    return type(v) is dict and all(type(x) is dict for x in v.values())


def _fields(required: Mapping[str, Check], optional: Mapping[str, Check]) -> FieldsCheck:
    req = tuple(required.items())
    opt = tuple((name, _opt(check)) for name, check in optional.items())

    def check(fields: Mapping[str, Any]) -> bool:
        for name, ok in req:
            v = fields.get(name, _MISSING)
            if v is _MISSING or not ok(v):
                return False
        return all(name not in fields or ok(fields[name]) for name, ok in opt)

    return check


_OK_ERR_TIMEOUT_ABORTED = _one_of("ok", "error", "timeout", "aborted")

#: Kind -> a check of its own fields (the envelope is the emitter's, checked at construction).
FIELD_CHECKS: dict[str, FieldsCheck] = {
    "run.started": _fields(
        {},
        {"labels": _dict_of(_str), "config": _config, "total_steps": _int},
    ),
    "run.finished": _fields({"status": _one_of("ok", "failed", "killed")}, {}),
    "heartbeat": _fields({}, {"final": lambda v: type(v) is bool}),
    "step.started": _fields({"step": _int}, {}),
    "step.done": _fields({"step": _int}, {"duration_s": _float, "timing": _dict_of(_float)}),
    "step.metrics": _fields({"step": _int, "metrics": _dict_of(_metric)}, {}),
    "reward": _fields({"step": _int, "mean": _float}, {"count": _int}),
    "trajectory.started": _fields({"traj": _word}, {"step": _int}),
    "trajectory.phase": _fields({"traj": _word, "phase": _word}, {}),
    "trajectory.done": _fields(
        {"traj": _word, "status": _OK_ERR_TIMEOUT_ABORTED},
        {"reward": _float, "duration_s": _float},
    ),
    "request.queued": _fields({"req": _word}, {"server": _str}),
    "request.done": _fields(
        {"req": _word},
        {
            "server": _str,
            "prompt_tokens": _int,
            "completion_tokens": _int,
            "status": _one_of("ok", "error", "aborted"),
        },
    ),
    "inference.stats": _fields(
        {"server": _word, "running": _int, "waiting": _int},
        {"kv_cache_usage": _fraction, "gen_tokens_per_s": _float},
    ),
    "progress": _fields({"name": _word, "n": _int}, {"total": _int}),
    "rank.status": _fields(
        {"rank": _int, "world_size": _int, "phase": _word},
        {"since": _float, "step": _int},
    ),
}

"""Cheap field checks for the kinds the rules read, so `emit()` can skip pydantic; and the
checks of everything else an emitter is handed.

Full pydantic validation costs several µs per event, too much for a trainer's hot loop. These
checks accept the common, plainly valid shapes only (`int` for int, `int`/`float` for float,
…); anything they do not accept is *not sure*, and the emitter then asks pydantic on the exact
wire form. So a check may be stricter than the models but never laxer —
tests/unit/emitters/test_emitter.py holds the two to that.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from runwatch.emitters.events import (
    COMPONENT_PATTERN,
    INT64_MAX,
    INT64_MIN,
    KIND_PATTERN,
    KNOWN_KINDS,
    MAX_STACK_FRAMES,
    MAX_STACK_THREADS,
    RUN_ID_PATTERN,
    describe_errors,
    validate,
)

Check = Callable[[Any], bool]
FieldsCheck = Callable[[Mapping[str, Any]], bool]

_MISSING = object()


def _int(v: Any) -> bool:
    return type(v) is int and INT64_MIN <= v <= INT64_MAX


def _float(v: Any) -> bool:
    return type(v) is float or _int(v)


def _str(v: Any) -> bool:
    # printable: no control character and no lone surrogate (stricter than the models)
    return type(v) is str and v.isprintable()


def _name(v: Any) -> bool:
    return type(v) is str and len(v) <= 200 and v.isprintable()


def _word(v: Any) -> bool:
    return type(v) is str and 0 < len(v) <= 200 and v.isprintable()


def _quote(v: Any) -> bool:
    """Text quoted from a console: any printable string up to 2,000 characters."""
    return _str(v) and len(v) <= 2000


def _fraction(v: Any) -> bool:
    return (type(v) is float or _int(v)) and 0 <= v <= 1


def _metric(v: Any) -> bool:
    return v is None or type(v) is float or _int(v)


def _plain(v: Any) -> bool:
    """A value plainly within every bound: a scalar, an int of 64 bits, a printable str."""
    return v is None or type(v) is bool or type(v) is float or _int(v) or _str(v)


def _key(k: Any) -> bool:
    # JSON object keys are strings on the wire whatever Python key type made them.
    return _str(k) or _int(k)


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
        return type(v) is dict and all(_key(k) and value(x) for k, x in v.items())

    return mapping


def _config(v: Any) -> bool:
    return type(v) is dict and all(
        _key(rule)
        and type(params) is dict
        and all(_key(k) and _plain(x) for k, x in params.items())
        for rule, params in v.items()
    )


def _fields(required: Mapping[str, Check], optional: Mapping[str, Check]) -> FieldsCheck:
    req = tuple(required.items())
    opt = tuple((name, _opt(check)) for name, check in optional.items())

    known = {name for name, _ in req} | {name for name, _ in opt}

    def check(fields: Mapping[str, Any]) -> bool:
        for name, ok in req:
            v = fields.get(name, _MISSING)
            if v is _MISSING or not ok(v):
                return False
        if not all(name not in fields or ok(fields[name]) for name, ok in opt):
            return False
        # extra fields: the whole event's bounds hold for them too
        return (len(fields) <= len(known) and all(name in known for name in fields)) or all(
            name in known or _plain(v) for name, v in fields.items()
        )

    return check


_OK_ERR_TIMEOUT_ABORTED = _one_of("ok", "error", "timeout", "aborted")


def _frame(v: Any) -> bool:
    return (type(v) is dict and len(v) == 3 and _name(v.get("file")) and _int(v.get("line"))
            and _name(v.get("function")))  # fmt: skip


def _thread(v: Any) -> bool:
    frames = v.get("frames") if type(v) is dict else None
    return (type(frames) is list and len(v) == 2 and _name(v.get("name"))
            and len(frames) <= MAX_STACK_FRAMES and all(_frame(f) for f in frames))  # fmt: skip


def _threads(v: Any) -> bool:
    return type(v) is list and len(v) <= MAX_STACK_THREADS and all(_thread(t) for t in v)


#: Kind -> a check of its own fields (the envelope is the emitter's, checked at construction).
FIELD_CHECKS: dict[str, FieldsCheck] = {
    "run.started": _fields(
        {},
        {"labels": _dict_of(_str), "config": _config, "total_steps": _int},
    ),
    "run.finished": _fields({"status": _one_of("ok", "failed", "killed")}, {}),
    "run.resumed": _fields({}, {"rule": _word, "by": _name, "reason": _name}),
    "heartbeat": _fields({}, {"final": lambda v: type(v) is bool}),
    "step.started": _fields({"step": _int}, {}),
    "step.done": _fields({"step": _int}, {"duration_s": _float, "timing": _dict_of(_float)}),
    "step.metrics": _fields({"step": _int, "metrics": _dict_of(_metric)}, {}),
    "eval.metrics": _fields({"step": _int, "metrics": _dict_of(_metric)}, {}),
    "reward": _fields({"step": _int, "mean": _float}, {"count": _int}),
    "trajectory.started": _fields({"traj": _word}, {"step": _int, "group": _word}),
    "trajectory.phase": _fields({"traj": _word, "phase": _word}, {}),
    "trajectory.done": _fields(
        {"traj": _word, "status": _OK_ERR_TIMEOUT_ABORTED},
        {"reward": _float, "duration_s": _float, "group": _word, "step": _int},
    ),
    "request.queued": _fields({"req": _word}, {"server": _name}),
    "request.done": _fields(
        {"req": _word},
        {
            "server": _name,
            "prompt_tokens": _int,
            "completion_tokens": _int,
            "status": _one_of("ok", "error", "aborted"),
        },
    ),
    "inference.stats": _fields(
        {"server": _word, "running": _int, "waiting": _int},
        {"kv_cache_usage": _fraction, "gen_tokens_per_s": _float, "prompt_tokens_per_s": _float},
    ),
    "collective.timeout": _fields(
        {"backend": _word},
        {
            "rank": _int,
            "group_rank": _int,
            "pg": _name,
            "op": _name,
            "seq": _int,
            "timeout_s": _float,
            "ran_s": _float,
            "last_enqueued": _int,
            "last_completed": _int,
            "message": _quote,
        },
    ),
    "component.failed": _fields(
        {"error": _quote, "how": _one_of("exception", "fatal", "exit")}, {"exit_code": _int}
    ),
    "process.stacks": _fields(
        {"request": _word, "how": _one_of("emitter", "py-spy")},
        {"threads": _threads, "truncated": lambda v: type(v) is bool, "error": _quote},
    ),
    "progress": _fields({"name": _word, "n": _int}, {"total": _int}),
    "weights.published": _fields({"version": _int}, {"step": _int}),
    "weights.loaded": _fields({"version": _int}, {"server": _word}),
    "rank.status": _fields(
        {"rank": _int, "world_size": _int, "phase": _word},
        {"since": _float, "step": _int},
    ),
}


#: Kinds seen valid already: the kind check of emit() is one set lookup.
GOOD_KINDS: set[str] = set(KNOWN_KINDS)
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def learn_kind(kind: object) -> None:
    """Check a kind not seen before; remember it (up to a bound) if it is good."""
    if not isinstance(kind, str) or len(kind) > 100 or not re.fullmatch(KIND_PATTERN, kind):
        raise ValueError(f"kind {kind!r} is not a dotted lowercase name like 'step.done'")
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

"""Hostile input: lines an attacker or a careless non-Python emitter sends, across numbers, time,
strings, structure, size and non-objects, and a hypothesis strategy that makes more.

Each corpus entry is (name, line, refused): `line(ts)` renders the raw line, with a ts the
caller chooses for the lines that need a plausible one (so a valid-shaped line never moves the
stream's time); `refused` says whether the boundary refuses it (the rest are valid events of
runs of their own, which must be applied without disturbing anyone else's).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Line = Callable[[float], bytes]

SRC = {"component": "trainer", "host": "hostile-host", "pid": 666}


def event(kind: str = "heartbeat", run: str = "hostile-run", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"v": 1, "id": "", "ts": 0.0, "run": run, "kind": kind, "src": SRC}
    return {**base, **fields}


def _counter() -> Callable[[], str]:
    n = [0]

    def next_id() -> str:
        n[0] += 1
        return f"hostile-{n[0]:05d}"

    return next_id


_next = _counter()


def obj(make: Callable[[float], dict[str, Any]]) -> Line:
    """A line from an object built with the ts; a fresh id each time it is rendered."""

    def render(ts: float) -> bytes:
        o = make(ts)
        if o.get("id") == "":
            o["id"] = _next()
        return json.dumps(o).encode()

    return render


def raw(text: str | bytes, placeholder: bool = True) -> Line:
    """A line written by hand; `@TS@` becomes the ts, `@ID@` a fresh id."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text

    def render(ts: float) -> bytes:
        out = data.replace(b"@TS@", repr(ts).encode())
        return out.replace(b"@ID@", _next().encode()) if placeholder else out

    return render


def _ev(at: float, **over: Any) -> dict[str, Any]:
    return {**event(), "ts": at, **over}


ENVELOPE = '"v": 1, "id": "@ID@", "ts": @TS@, "run": "hostile-run", "src": {"component": "t"}'

#: (name, line, refused by the boundary)
CORPUS: list[tuple[str, Line, bool]] = [
    # -- numbers ---------------------------------------------------------------------------
    (
        "int beyond 64 bits in step",
        obj(lambda t: _ev(t, kind="reward", step=2**64, mean=0.0)),
        True,
    ),
    (
        "negative int beyond 64 bits",
        obj(lambda t: _ev(t, kind="step.started", step=-(2**64))),
        True,
    ),
    (
        "rank beyond 64 bits",
        obj(lambda t: _ev(t, kind="rank.status", rank=2**64, world_size=8, phase="recv")),
        True,
    ),
    ("int beyond 64 bits in an extra field", obj(lambda t: _ev(t, note=2**70)), True),
    (
        "int beyond 64 bits nested in an extra field",
        obj(lambda t: _ev(t, note={"a": [2**65]})),
        True,
    ),
    (
        "int beyond 64 bits in run.started.config",
        obj(lambda t: _ev(t, kind="run.started", config={"zero_reward": {"steps": 2**64}})),
        True,
    ),
    ("pid beyond 64 bits", obj(lambda t: _ev(t, src={**SRC, "pid": 2**64})), True),
    ("ts NaN token", raw("{" + ENVELOPE.replace("@TS@", "NaN") + ', "kind": "heartbeat"}'), True),
    (
        "ts Infinity token",
        raw("{" + ENVELOPE.replace("@TS@", "Infinity") + ', "kind": "heartbeat"}'),
        True,
    ),
    (
        "ts 1e400 (overflows to infinity)",
        raw("{" + ENVELOPE.replace("@TS@", "1e400") + ', "kind": "heartbeat"}'),
        True,
    ),
    ("ts as a string", obj(lambda t: _ev(t, ts=str(t))), True),
    ("ts as a boolean", obj(lambda t: _ev(t, ts=True)), True),
    ("step as a float", obj(lambda t: _ev(t, kind="step.started", step=1.5)), True),
    ("step as a boolean", obj(lambda t: _ev(t, kind="step.started", step=True)), True),
    (
        "kv cache usage above 1",
        obj(
            lambda t: _ev(
                t, kind="inference.stats", server="s", running=0, waiting=0, kv_cache_usage=1.5
            )
        ),
        True,
    ),
    ("v is 2", obj(lambda t: _ev(t, v=2)), True),
    ("v is true", obj(lambda t: _ev(t, v=True)), True),
    # -- time ------------------------------------------------------------------------------
    ("ts 1e30", obj(lambda t: _ev(t, ts=1e30)), True),
    ("ts in milliseconds", obj(lambda t: _ev(t, ts=t * 1000)), True),
    ("ts in microseconds", obj(lambda t: _ev(t, ts=t * 1e6)), True),
    ("ts in nanoseconds", obj(lambda t: _ev(t, ts=t * 1e9)), True),
    ("ts zero", obj(lambda t: _ev(t, ts=0.0)), True),
    ("ts negative", obj(lambda t: _ev(t, ts=-5.0)), True),
    ("ts in the year 3000, an unrelated run", obj(lambda t: _ev(t, ts=32_503_680_000.0)), True),
    ("ts a week ahead, an unrelated run", obj(lambda t: _ev(t, ts=t + 7 * 86_400)), True),
    # -- strings ---------------------------------------------------------------------------
    (
        "lone surrogate in src.instance",
        obj(lambda t: _ev(t, src={**SRC, "instance": "vllm-\ud800"})),
        True,
    ),
    ("lone surrogate in an extra field", obj(lambda t: _ev(t, note="x\udc00y")), True),
    ("lone surrogate in a key", obj(lambda t: _ev(t, **{"n\ud83d": 1})), True),
    (
        "lone surrogate in a label",
        obj(lambda t: _ev(t, kind="run.started", run="hostile-labels", labels={"a": "\ud800"})),
        True,
    ),
    (
        "newline in src.instance (a forged console line)",
        obj(lambda t: _ev(t, src={**SRC, "instance": "i\n2026-01-01 FIRING critical"})),
        True,
    ),
    ("NUL in the id", obj(lambda t: _ev(t, id="a\u0000b")), True),
    ("tab in a trajectory id", obj(lambda t: _ev(t, kind="trajectory.started", traj="t\t1")), True),
    (
        "DEL in a server name",
        obj(lambda t: _ev(t, kind="inference.stats", server="s\x7f", running=0, waiting=0)),
        True,
    ),
    (
        "C1 control in a progress name",
        obj(lambda t: _ev(t, kind="progress", name="a\u0085", n=1)),
        True,
    ),
    ("escape sequence in src.host", obj(lambda t: _ev(t, src={**SRC, "host": "\u001b[2J"})), True),
    (
        "invalid UTF-8 in an extra field",
        raw(
            b'{"v": 1, "id": "@ID@", "ts": @TS@, "run": "hostile-run", "kind": "heartbeat", '
            b'"src": {"component": "t"}, "note": "\xff\xfe"}'
        ),
        True,
    ),
    (
        "invalid UTF-8 in the id",
        raw(
            b'{"v": 1, "id": "\xc3\x28", "ts": @TS@, "run": "hostile-run", "kind": "heartbeat", '
            b'"src": {"component": "t"}}'
        ),
        True,
    ),
    ("run id of 201 characters", obj(lambda t: _ev(t, run="r" * 201)), True),
    ("run id with a space", obj(lambda t: _ev(t, run="has space")), True),
    # contract section 8: the run of fleet incidents' alerts; an event that claims it is
    # refused at every ingress (a fleet incident can be named by no emitter)
    ("the reserved run id @fleet", obj(lambda t: _ev(t, run="@fleet")), True),
    ("the reserved run id, on the fallback path", obj(lambda t: _ev(t, run="@fleet", n="é")), True),
    ("id of 201 characters", obj(lambda t: _ev(t, id="i" * 201)), True),
    ("uppercase component", obj(lambda t: _ev(t, src={"component": "Trainer"})), True),
    ("kind with a space", obj(lambda t: _ev(t, kind="step done")), True),
    # valid, and shown escaped wherever they are displayed
    (
        "Slack injection in src.host",
        obj(
            lambda t: _ev(
                t,
                run="hostile-slack",
                src={**SRC, "host": "<!channel> <https://evil.example|Open Grafana>"},
            )
        ),
        False,
    ),
    (
        "bidi override in a phase",
        obj(
            lambda t: _ev(
                t, kind="trajectory.phase", run="hostile-bidi", traj="t1", phase="\u202egnol"
            )
        ),
        False,
    ),
    ("run id that begins with a dash", obj(lambda t: _ev(t, run="-hostile-dash")), False),
    (
        "non-ASCII label value",
        obj(lambda t: _ev(t, kind="run.started", run="hostile-utf8", labels={"team": "数学"})),
        False,
    ),
    # -- structure -------------------------------------------------------------------------
    (
        "nested 3000 deep in an extra field",
        raw("{" + ENVELOPE + ', "kind": "heartbeat", "note": ' + "[" * 3000 + "]" * 3000 + "}"),
        True,
    ),
    (
        "nested 40 deep in an extra field",
        raw("{" + ENVELOPE + ', "kind": "heartbeat", "note": ' + "[" * 40 + "]" * 40 + "}"),
        True,
    ),
    (
        "nested 3000 deep in run.started.config",
        raw(
            "{"
            + ENVELOPE
            + ', "kind": "run.started", "config": {"zero_reward": {"x": '
            + "[" * 3000
            + "]" * 3000
            + "}}}"
        ),
        True,
    ),
    ("missing id", obj(lambda t: {k: v for k, v in _ev(t).items() if k != "id"}), True),
    ("missing src", obj(lambda t: {k: v for k, v in _ev(t).items() if k != "src"}), True),
    ("src is a string", obj(lambda t: _ev(t, src="trainer")), True),
    ("metrics is a list", obj(lambda t: _ev(t, kind="step.metrics", step=1, metrics=[1])), True),
    (
        "bad run.started.config parameter",
        obj(lambda t: _ev(t, kind="run.started", config={"zero_reward": {"steps": -1}})),
        True,
    ),
    (
        "unknown rule in run.started.config",
        obj(lambda t: _ev(t, kind="run.started", config={"no_such_rule": {}})),
        True,
    ),
    ("trailing garbage", raw("{" + ENVELOPE + ', "kind": "heartbeat"} trailing'), True),
    (
        "two objects on one line",
        raw("{" + ENVELOPE + ', "kind": "heartbeat"}{' + ENVELOPE + ', "kind": "heartbeat"}'),
        True,
    ),
    ("UTF-16", lambda t: json.dumps(_ev(t, id=_next())).encode("utf-16"), True),
    # -- size ------------------------------------------------------------------------------
    ("larger than 64 KiB", obj(lambda t: _ev(t, note="x" * 70_000)), True),
    (
        "a metrics dict just under 64 KiB",
        obj(
            lambda t: _ev(
                t,
                kind="step.metrics",
                run="hostile-big",
                step=1,
                metrics={f"m{i:05d}": 0.5 for i in range(3000)},
            )
        ),
        False,
    ),
    # -- not objects -----------------------------------------------------------------------
    ("not JSON", raw("this is not json"), True),
    ("a JSON array", raw("[1, 2, 3]"), True),
    ("a JSON string", raw('"heartbeat"'), True),
    ("JSON null", raw("null"), True),
    ("a number", raw("1800000000"), True),
    ("an empty object", raw("{}"), True),
    ("a lone brace", raw("{"), True),
]


def lines_of(names: list[str] | None = None) -> list[tuple[str, Line, bool]]:
    return [c for c in CORPUS if names is None or c[0] in names]


# -- generated --------------------------------------------------------------------------------

_bad_strings = st.sampled_from(
    ["\ud800", "\udfff", "a\u0000", "\n", "\x7f", "\u0085", "\u001b[31m", "x" * 201, ""]
)
_bad_numbers = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30, -(10**25)])
_fields = st.sampled_from(["id", "run", "note", "step", "rank", "ts"])


@st.composite
def hostile_objects(draw: st.DrawFn) -> Line:
    """An event object with one value made hostile: a bad string or an integer out of range,
    in an envelope field, a typed field or an extra one, or nested deep."""
    field = draw(_fields)
    value: Any = draw(st.one_of(_bad_strings, _bad_numbers))
    depth = draw(st.integers(0, 40))
    for _ in range(depth if field == "note" else 0):
        value = [value]
    kind = "step.started" if field == "step" else "heartbeat"
    if field == "rank":
        return obj(lambda t: _ev(t, src={**SRC, "rank": value}))
    fields = {"step": 1, field: value}
    return obj(lambda t: _ev(t, kind=kind, **fields))

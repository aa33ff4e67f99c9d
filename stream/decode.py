"""Bytes to validated events, fast: the hot path of every consumer.

pydantic's own JSON validation costs several times what msgspec does per event (measured:
`bench/decode.py`, figures in bench/RESULTS.md), so the common case goes through msgspec
Structs that are *generated from the pydantic models* in `runwatch.emitters.events` (one
definition of the schema), ahead of time (`runwatch.stream.decode_structs`, written by
`decode_gen`), so that a consumer starts without importing pydantic or the models. Fields
the models lack (kept in history, read by no rule) are read past, not built. A plain record
that strict JSON refuses for a `NaN`/`Infinity` token is read by the stdlib parser and
checked by the same structs; whatever else the fast path refuses -- unknown kinds, and
genuinely bad input -- is decided by the stdlib parser plus pydantic (imported then), which
also words the reason that goes to the dead-letter place.

Fast-path objects are Structs with the same attribute names and value types as the pydantic
models (tests/unit/stream/test_decode.py holds the two paths to the same verdicts), so the rest of
the stream code is typed against the pydantic classes.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
from collections.abc import Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Union

import msgspec

from runwatch.emitters.bounds import MAX_DEPTH, MAX_EVENT_BYTES, out_of_bounds
from runwatch.stream import decode_structs
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.timekeeping.timebounds import MAX_TS, MIN_TS, time_problem

if TYPE_CHECKING:
    from runwatch.emitters import events

__all__ = [
    "Admitted", "InvalidEvent", "admit", "admit_lines", "chunk_admitted", "decode", "decode_obj",
    "lines_admitted",
]  # fmt: skip


# --- the msgspec structs, generated from the pydantic models ------------------------------


class _Patterns:
    """The pattern-constrained strings of one event struct, checked after msgspec's decode.

    msgspec runs `re.search` on every occurrence (most of an event's decode, bench/decode.py
    found), while one partition carries the same few (run id, component) pairs
    over and over: a memo of the value tuples that matched answers almost every time, with
    the very regexes msgspec would have run deciding the rest.
    """

    __slots__ = ("get", "matched", "searches")

    MEMO = 4096  # value tuples remembered; the memo starts over when full

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        paths = [path for path, _ in fields]
        self.get = operator.attrgetter(*paths) if len(paths) > 1 else _one(paths[0])
        self.searches = tuple(re.compile(pattern).search for _, pattern in fields)
        #: one memo for every struct with these fields and patterns
        self.matched: set[tuple[str, ...]] = _MEMOS.setdefault(tuple(fields), set())

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


class _RunStartedChecks(_Patterns):
    """run.started's patterns, and its free-form `config` walked for the bounds (rare)."""

    __slots__ = ()

    def hold(self, obj: Any) -> bool:
        return super().hold(obj) and out_of_bounds(obj.config) is None


def _one(path: str) -> Any:
    get = operator.attrgetter(path)
    return lambda obj: (get(obj),)


#: event struct type -> its checker
_PATTERNS: dict[type, _Patterns] = {}
#: (path, pattern) of the fields checked -> the value tuples that matched
_MEMOS: dict[tuple[tuple[str, str], ...], set[tuple[str, ...]]] = {}
#: the structs whose only patterns are the envelope's (run, src.component): most kinds,
#: checked in `decode` itself against their memo, `_ENVELOPE_MATCHED`
_ENVELOPE_ONLY: set[type] = set()


def _build(forbid: bool = True) -> Any:
    """The union of every kind's struct (`decode_structs`, generated from the models; named
    Fast* or, reading past fields the models lack, Open*), each with its pattern checker."""

    def make(name: str, tag: str | None, fields: list[tuple[Any, ...]],
             patterns: list[tuple[str, str]]) -> Any:  # fmt: skip
        # (msgspec wants the fields without a default first)
        struct = msgspec.defstruct(
            f"{'Fast' if forbid else 'Open'}{name}",
            [f for f in fields if len(f) == 2] + [f for f in fields if len(f) == 3],
            tag_field="kind" if tag else None,
            tag=tag,
            namespace={"kind": tag} if tag else None,
            gc=False,
            frozen=True,
            # an extra field is checked before the open structs read past it (`_open`)
            forbid_unknown_fields=forbid,
        )
        if tag is not None and decode_structs.FINITE.get(tag):
            _FINITE[struct] = operator.attrgetter(*decode_structs.FINITE[tag])
        if tag is not None and patterns:
            checks = _RunStartedChecks if tag == "run.started" else _Patterns
            _PATTERNS[struct] = checks(patterns)
            if checks is _Patterns and [path for path, _ in patterns] == ["run", "src.component"]:
                _ENVELOPE_ONLY.add(struct)
        return struct

    return Union[tuple(decode_structs.structs(make))]  # noqa: UP007


#: event struct type -> its fields that must be finite numbers (`ts`), as one getter
_FINITE: dict[type, Any] = {}
_FAST_TYPE = _build()
_FAST = msgspec.json.Decoder(_FAST_TYPE)
_ENVELOPE_MATCHED = next((_PATTERNS[t].matched for t in _ENVELOPE_ONLY), set())


@functools.cache
def _open_type() -> Any:
    """The same structs, reading past fields the models lack (extra fields: kept in history,
    never read by a rule), for records `_FAST` refused for one: made the first time one
    comes (most streams never bring one; a command starts sooner without it)."""
    return _build(forbid=False)


@functools.cache
def _open_decoder() -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_open_type())


_BACKSLASH, _DEL = ord("\\"), 0x7F
_MAX_BYTES = MAX_EVENT_BYTES
_UNKNOWN_FIELD = "Object contains unknown field"
#: 19 digits in a row (each digit made a 0 first): perhaps an integer past 64 bits (or a
#: long id), for the fallback to read. (A regex takes ten times as long.)
_DIGITS_AS_0, _LONG_DIGITS = bytes.maketrans(b"123456789", b"0" * 9), b"0" * 19


# --- decoding -----------------------------------------------------------------------------


def decode_obj(obj: Any) -> events.Event:
    """Validate an already-parsed JSON value; raises InvalidEvent with the reason. The
    pydantic models decide (imported here, on the first event that needs them: most
    streams never bring one)."""
    from pydantic import ValidationError

    from runwatch.emitters.events import describe_errors, validate

    try:
        return validate(obj)
    except ValidationError as err:
        raise InvalidEvent(describe_errors(err)) from None


def decode(raw: bytes | str) -> events.Event:
    """Decode one JSON Lines record into a validated event; raises InvalidEvent.

    What it accepts keeps every bound of contract §1 (the models' types and ranges, 64-bit
    integers, valid Unicode, identifiers without control characters, nesting depth, size),
    so nothing downstream -- rules, alerts, history, a terminal -- can fail on it. The fast
    path takes only plain records: ASCII with no escape and no DEL (so no string can hold a
    surrogate or a control character) whose every value is typed and bounded by the model
    (the free-form `run.started.config` is walked), or lies in a field the model lacks that
    is within the bounds (`_open`). The rest goes to the fallback, which checks the whole
    object.
    """
    if type(raw) is not bytes:
        raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(raw) > _MAX_BYTES:
        raise InvalidEvent(f"event is {len(raw)} bytes, larger than the 64 KiB limit", "too_large")
    # (int membership is a memchr: ~20 ns against ~150 for a bytes needle)
    plain = raw.isascii() and _BACKSLASH not in raw and _DEL not in raw
    if plain:
        try:
            event: events.Event = _FAST.decode(raw)
            # every kind has patterns (run id); most only the envelope's: the memo's answer
            # without a call
            if type(event) in _ENVELOPE_ONLY and (event.run, event.src.component) in (
                _ENVELOPE_MATCHED
            ):
                return event
            if _PATTERNS[type(event)].hold(event):
                return event
        except msgspec.ValidationError as err:
            opened = _open(raw) if str(err).startswith(_UNKNOWN_FIELD) else None
            if opened is not None:
                return opened
        except (msgspec.DecodeError, RecursionError):
            pass
    # The fallback decides: stdlib json accepts NaN/Infinity tokens (a plain record with
    # one is checked by the structs: `_converted`), pydantic knows unknown kinds and words
    # the reason.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        raise InvalidEvent(f"nested deeper than {MAX_DEPTH} levels", "too_deep")
    try:
        # UTF-8 only (contract §1): json.loads on bytes would also guess UTF-16/32.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidEvent(
            f"not JSON: not valid UTF-8 at byte {err.start} ({err.reason})", "not_json"
        ) from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise InvalidEvent(f"not JSON: {err}", "not_json") from None
    if not isinstance(obj, dict):
        raise InvalidEvent(f"not a JSON object but {type(obj).__name__}", "not_an_object")
    converted = _converted(obj, raw) if plain else None
    return converted if converted is not None else decode_obj(obj)


def _converted(obj: dict[str, Any], raw: bytes) -> events.Event | None:
    """A plain record that strict JSON refuses (most often for a `NaN` or `Infinity` token:
    a trainer's non-finite metric, as Python's json writes it), as the stdlib read it,
    checked by the same structs (None: pydantic decides, and words the reason). What the
    structs cannot say, checked here: no non-finite number where the model wants a finite
    one (`ts`), and, for fields the models lack, the bounds `_open` checks."""
    if _LONG_DIGITS in raw.translate(_DIGITS_AS_0):  # (the depth is checked: `decode`)
        return None
    try:
        event: events.Event = msgspec.convert(obj, _FAST_TYPE)
    except msgspec.ValidationError as err:
        if not str(err).startswith(_UNKNOWN_FIELD):
            return None
        try:
            event = msgspec.convert(obj, _open_type())
        except msgspec.ValidationError:
            return None
    finite = _FINITE[type(event)](event)
    for value in finite if type(finite) is tuple else (finite,):
        if value is not None and not math.isfinite(value):
            return None
    return event if _PATTERNS[type(event)].hold(event) else None


def _open(raw: bytes) -> events.Event | None:
    """A plain record with fields the models lack, read past them (None: the fallback
    decides). An extra field is typed by no model, so its bounds are what is left to check:
    a depth within the limit (fewer brackets than it, counted anywhere) and no integer past
    64 bits (no 19 digits in a row anywhere) -- cheap and conservative: what they refuse,
    the fallback reads in full."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _LONG_DIGITS in raw.translate(_DIGITS_AS_0):
        return None
    try:
        event: events.Event = _open_decoder().decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    return event if _PATTERNS[type(event)].hold(event) else None


def _depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text, brackets inside strings
    not counted; checked before any recursive parser sees the text. Only for records with
    more brackets than the limit, so plain Python is fast enough."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


#: Before clock correction, further ahead of its arrival than this an event is refused
#: outright: no host's clock is a day fast.
MAX_AHEAD_RAW = 86_400.0


def admit(raw: bytes | str, received: float | None = None) -> events.Event:
    """The ingress boundary: `decode`, then a plausible `ts` (seconds since 1970, not
    milliseconds; with `received`, the time the event arrived, at most a day ahead of it).
    Every role takes outside input through this; raises InvalidEvent with the reason."""
    event = decode(raw)
    ts = event.ts
    if MIN_TS <= ts < MAX_TS and (received is None or ts - received <= MAX_AHEAD_RAW):
        return event  # what `time_problem` finds plausible, without the call
    problem = time_problem(ts, received, MAX_AHEAD_RAW)
    if problem is not None:
        raise InvalidEvent(problem, "bad_time")
    return event


_TS = operator.attrgetter("ts")
_RUN, _COMPONENT = operator.attrgetter("run"), operator.attrgetter("src.component")
#: the envelope's two patterns, each with the values that matched it (a batch's run ids and
#: components are sets of their own: no pair a line), started over when full
_ENVELOPE_SEARCHES = next((_PATTERNS[t].searches for t in _ENVELOPE_ONLY), ())
_RUNS_MATCHED: set[str] = set()
_COMPONENTS_MATCHED: set[str] = set()
_MATCHED_MAX = 65_536
_JSON_SPACE = b" \t\r\n"  # (what JSON allows after a value; `rstrip()` takes more)


#: A batch admitted in one step: its events, their `ts` and the structs of their kinds --
#: the last two as the checks found them, for the reader to take as they are (the reorder
#: window wants the stamps; the engine's check, whether a kind it may refuse is there)
#: rather than ask each event again
Admitted = tuple[list["events.Event"], list[float], set[type]]


def admit_lines(raws: Sequence[bytes]) -> list[events.Event] | None:
    """`lines_admitted(raws)`'s events, or None."""
    got = lines_admitted(raws)
    return None if got is None else got[0]


def lines_admitted(raws: Sequence[bytes]) -> Admitted | None:
    """`admit` of many lines in one step, or None: then some line is not plain (blank,
    escaped, not ASCII, too large, a field or kind the fast path does not take, a pattern or
    a ts it does not vouch for) and the caller admits them one by one, which decides each and
    words every reason. What it returns is what `admit` returns for each line (received: None).

    Most of a replay's lines are plain: one msgspec call decodes them all (`decode_lines`), and
    each check of `decode` and `admit` runs once over the lot instead of once a line. Each
    line must be one event: joined by newlines, lines that are each `{...}` make every joint
    `}\n{`, which no value can span (inside a string it would be an unescaped newline; inside
    an object or array, a missing comma), so each value read lies within one line, and the
    count of events decoded says none holds two.
    """
    n = len(raws)
    try:
        stripped = list(map(bytes.rstrip, raws, repeat(_JSON_SPACE, n)))
        # each line `{...}`, seen from its ends (not by counting newlines and joints in the
        # joined text: two passes over it). A newline inside a line is JSON space to
        # `decode_lines`, as to `decode`: what a line holds is what it alone holds
        if (
            not n
            or bytes(map(_FIRST_BYTE, stripped)) != b"{" * n
            or bytes(map(_LAST_BYTE, stripped)) != b"}" * n
        ):
            return None
    except TypeError:  # a str among them
        return None
    except IndexError:  # a blank line
        return None
    return _decoded(b"\n".join(stripped), raws)


def chunk_admitted(data: bytes, lines: Sequence[bytes]) -> Admitted | None:
    """`lines_admitted(lines)` where `data` is the text `lines` were split from (a piece of a
    file, `replay.Chunk`, each line ending in its newline): decoded as it is, not joined
    again. Where every line is `{...}` and a newline -- each joint a bare `}\n{`, as
    `lines_admitted` asks of the lines it joins -- that is seen from the lines' first and
    last bytes, cheaper than counting newlines and joints in the text; anything else (a line
    ending in other space, a blank one) is `lines_admitted`' to decide."""
    n = len(lines)
    if (
        n
        and data[-1:] == b"\n"
        and bytes(map(_FIRST_BYTE, lines)) == b"{" * n
        and bytes(map(_BYTE_BEFORE_NEWLINE, lines)) == b"}" * n
    ):
        return _decoded(data, lines)
    return lines_admitted(lines)


_FIRST_BYTE, _BYTE_BEFORE_NEWLINE = operator.itemgetter(0), operator.itemgetter(-2)
_LAST_BYTE = operator.itemgetter(-1)


def _decoded(joined: bytes, raws: Sequence[bytes]) -> Admitted | None:
    """The events of `raws`, one a line, from `joined` (their text: each line `{...}`, the
    joints bare newlines), if every check of `decode` and `admit` holds for each."""
    if (
        not joined.isascii()
        or _BACKSLASH in joined
        or _DEL in joined
        or max(map(len, raws)) > _MAX_BYTES
    ):
        return None
    return events_of(joined, len(raws))


def events_of(joined: bytes, n: int) -> Admitted | None:
    """`_decoded` past its checks of the bytes, which the caller made (the live driver's
    native step, `stream/_fetched.c`): `n` lines' events, or None."""
    try:
        decoded: list[events.Event] = _FAST.decode_lines(joined)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if len(decoded) != n:
        return None
    stamps = list(map(_TS, decoded))
    if not (min(stamps) >= MIN_TS and max(stamps) < MAX_TS):
        return None
    types = set(map(type, decoded))
    if types <= _ENVELOPE_ONLY:  # the envelope's patterns alone
        run_ok, component_ok = _ENVELOPE_SEARCHES
        if _all_match(set(map(_RUN, decoded)), _RUNS_MATCHED, run_ok) and _all_match(
            set(map(_COMPONENT, decoded)), _COMPONENTS_MATCHED, component_ok
        ):
            return decoded, stamps, types
        return None
    for event in decoded:
        if not _PATTERNS[type(event)].hold(event):
            return None
    return decoded, stamps, types


def _all_match(values: set[str], matched: set[str], search: Any) -> bool:
    """Whether every value matches the pattern `search` is of, `matched` answering for those
    that matched before (and remembering the new ones)."""
    new = values - matched
    if not new:
        return True
    if not all(search(value) is not None for value in new):
        return False
    if len(matched) + len(new) > _MATCHED_MAX:
        matched.clear()
    matched |= new
    return True

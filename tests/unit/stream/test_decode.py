"""The decoder: what is a contract event (§1), and the fast path agreeing with pydantic's models."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from helpers import encode, make_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from runwatch.emitters import events
from runwatch.stream.decode import decode, decode_obj
from runwatch.stream.exceptions import InvalidEvent

SRC = {"component": "rollout", "host": "node-1", "pid": 4200, "rank": 3, "instance": "w-7"}

#: Every kind's fields from its model (`Event.examples`): every field set, and the required
#: ones alone.
FULL = {k: dict(m.examples.full) for k, m in events.KNOWN_KINDS.items()}
MINIMAL = {k: dict(m.examples.minimal) for k, m in events.KNOWN_KINDS.items()}


def event_of(kind_: str, fields: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    """An event of `kind_` with these fields; `envelope` overrides anything (kind included)."""
    return {**make_event(kind_, 100.5, src=SRC), **copy.deepcopy(fields), **envelope}


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def assert_same_values(fast: Any, model: BaseModel) -> None:
    """Every field of the pydantic model has the same value on the fast-path object."""
    for name in type(model).model_fields:
        want, got = getattr(model, name), getattr(fast, name)
        if isinstance(want, BaseModel):
            assert_same_values(got, want)
        elif isinstance(want, list) and want and isinstance(want[0], BaseModel):
            assert len(got) == len(want), name
            for g, w in zip(got, want, strict=True):
                assert_same_values(g, w)
        else:
            assert same(got, want), f"{name}: fast {got!r} != pydantic {want!r}"


def nest(depth: int) -> Any:
    """A value nested `depth` levels deep (its own level counted, as the bound counts)."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def is_fast(obj: object) -> bool:
    return not isinstance(obj, BaseModel)


def accepted_by_pydantic(raw: bytes) -> BaseModel | None:
    """The reference verdict: the size limit, then stdlib json and the pydantic models."""
    if len(raw) > events.MAX_EVENT_BYTES:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    try:
        return events.validate(obj)
    except ValidationError:
        return None


def reason(raw: bytes | str) -> str:
    with pytest.raises(InvalidEvent) as info:
        decode(raw)
    return info.value.reason


# --- valid events -------------------------------------------------------------------------


@pytest.mark.parametrize("table", [FULL, MINIMAL], ids=["full", "minimal"])
@pytest.mark.parametrize("kind", sorted(events.KNOWN_KINDS))
def test_every_known_kind_decodes_on_the_fast_path_like_pydantic(
    kind: str, table: dict[str, dict[str, Any]]
) -> None:
    event = event_of(kind, table[kind])
    got = decode(encode(event))
    model = events.validate(event)
    assert type(model) is events.KNOWN_KINDS[kind]
    assert is_fast(got), "a plain valid event should take the fast path"
    assert got.kind == kind
    assert_same_values(got, model)


def test_str_input_decodes_like_bytes() -> None:
    event = event_of("progress", FULL["progress"])
    assert decode(json.dumps(event)).n == 511


def test_unknown_kind_is_accepted_with_its_fields_kept() -> None:
    assert "custom.thing" not in events.KNOWN_KINDS
    event = event_of("custom.thing", {"cmd": "pytest", "exit": 1})
    got = decode(encode(event))
    assert isinstance(got, events.Event)
    assert got.kind == "custom.thing"
    assert got.model_extra == {"cmd": "pytest", "exit": 1}


def test_extra_fields_of_known_kinds_are_read_past_without_pydantic() -> None:
    event = event_of("progress", FULL["progress"], unit="it", rate=3.5, nested={"a": [1, 2]})
    event["src"]["gpu"] = "H100"
    got = decode(encode(event))
    assert is_fast(got)  # not the fallback: an extra field costs no pydantic validation
    model = events.validate(event)
    assert_same_values(got, model)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (2**63, "integer does not fit in 64 bits"),
        (-(2**63) - 1, "integer does not fit in 64 bits"),
        (nest(33), "nested deeper than 32 levels"),
    ],
)
def test_an_extra_field_out_of_bounds_is_refused_as_the_fallback_words_it(
    extra: Any, why: str
) -> None:
    with pytest.raises(InvalidEvent, match=why):
        decode(encode(event_of("heartbeat", {}, extra=extra)))


def test_an_extra_field_within_the_bounds_near_them_is_accepted() -> None:
    for extra in (2**63 - 1, -(2**63), 10**18, nest(31), "9" * 40):
        assert decode(encode(event_of("heartbeat", {}, extra=extra))).kind == "heartbeat"


def test_extra_fields_of_known_kinds_are_kept_by_the_pydantic_path() -> None:
    event = event_of("progress", FULL["progress"], unit="it", rate=3.5)
    event["src"]["gpu"] = "H100"
    model = events.validate(event)
    assert model.model_extra == {"unit": "it", "rate": 3.5}
    assert model.src.model_extra == {"gpu": "H100"}
    # and they do not stop the event from decoding
    assert decode(encode(event)).n == 511


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_metric_values_are_accepted(token: str) -> None:
    event = event_of("step.metrics", {"step": 1, "metrics": {"loss": 1.0, "grad": 0.0}})
    raw = encode(event).replace(b'"grad": 0.0', f'"grad": {token}'.encode())
    got = decode(raw)
    assert got.metrics["loss"] == 1.0
    assert not math.isfinite(got.metrics["grad"])
    assert str(got.metrics["grad"]) == {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[token]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_reward_mean_is_accepted(value: float) -> None:
    raw = encode(event_of("reward", {"step": 1, "mean": value}))
    assert str(decode(raw).mean) == str(value)


@pytest.mark.parametrize("usage", [0, 0.0, 0.5, 1, 1.0])
def test_kv_cache_usage_bounds_are_inclusive_on_the_fast_path(usage: float) -> None:
    event = event_of("inference.stats", {**FULL["inference.stats"], "kv_cache_usage": usage})
    got = decode(encode(event))
    assert is_fast(got)
    assert got.kv_cache_usage == usage


def test_null_metric_values_are_accepted() -> None:
    got = decode(encode(event_of("step.metrics", {"step": 1, "metrics": {"a": None}})))
    assert got.metrics == {"a": None}


def test_a_utf8_bom_is_tolerated() -> None:
    raw = b"\xef\xbb\xbf" + encode(event_of("heartbeat", {}))
    assert decode(raw).kind == "heartbeat"


# --- the envelope ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_non_finite_ts_is_rejected(value: str) -> None:
    raw = encode(event_of("heartbeat", {})).replace(b'"ts": 100.5', f'"ts": {value}'.encode())
    assert "ts" in reason(raw)


@pytest.mark.parametrize(
    "run", ["a", "x" * 200, "A-Za-z0-9._:/@+-", "team/job@2026-03-14+retry:1", "1"]
)
def test_run_ids_of_the_contract_charset_are_accepted(run: str) -> None:
    assert decode(encode(event_of("heartbeat", {}, run=run))).run == run


@pytest.mark.parametrize(
    "run",
    ["", "x" * 201, "a b", "run#1", "é", "a\n", "\na", "a\t", "a,b", "a*", "a\\b", "a%20"],
)
def test_run_ids_outside_the_charset_or_length_are_rejected(run: str) -> None:
    assert reason(encode(event_of("heartbeat", {}, run=run))).startswith("run:")


def test_an_event_of_exactly_64_kib_is_accepted_and_one_byte_more_is_not() -> None:
    event = event_of("heartbeat", {}, pad="")
    base = len(encode(event))
    event["pad"] = "x" * (events.MAX_EVENT_BYTES - base)
    raw = encode(event)
    assert len(raw) == events.MAX_EVENT_BYTES
    assert decode(raw).kind == "heartbeat"
    event["pad"] += "x"
    assert "64 KiB" in reason(encode(event))


def test_an_oversized_event_is_rejected_before_parsing() -> None:
    raw = b"[" * (events.MAX_EVENT_BYTES + 1)
    assert "larger than the 64 KiB limit" in reason(raw)


@pytest.mark.parametrize("field", ["v", "id", "ts", "run", "kind", "src"])
def test_missing_envelope_fields_are_rejected_naming_the_field(field: str) -> None:
    event = event_of("progress", FULL["progress"])
    del event[field]
    assert field in reason(encode(event))


def test_missing_component_is_rejected() -> None:
    event = event_of("heartbeat", {})
    del event["src"]["component"]
    assert "src.component" in reason(encode(event))


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("progress", "n", True),
        ("progress", "n", "3"),
        ("progress", "n", 3.0),
        ("step.done", "step", False),
        ("step.done", "step", "3"),
        ("step.done", "step", 3.0),
        ("inference.stats", "running", 1.5),
        ("rank.status", "world_size", "8"),
        ("reward", "count", True),
        ("heartbeat", "v", True),
        ("heartbeat", "v", 1.0),
        ("heartbeat", "v", "1"),
        ("heartbeat", "v", 2),
        ("heartbeat", "ts", "100.5"),
        ("heartbeat", "ts", True),
        ("heartbeat", "id", 7),
        ("heartbeat", "run", 7),
        ("heartbeat", "final", "yes"),
        ("heartbeat", "final", 1),
        ("step.metrics", "metrics", {"a": "1.0"}),
        ("step.metrics", "metrics", {"a": True}),
        ("step.metrics", "metrics", [1.0]),
        ("reward", "mean", None),
        ("run.started", "labels", {"a": 1}),
        ("run.started", "config", {"zero_reward": 5}),
        ("run.finished", "status", "crashed"),
        ("trajectory.done", "status", "OK"),
        ("trajectory.started", "traj", ""),
        ("inference.stats", "kv_cache_usage", 1.5),
        ("inference.stats", "kv_cache_usage", -0.5),
    ],
)
def test_wrong_types_are_rejected_naming_the_field(kind: str, field: str, value: Any) -> None:
    fields = {**FULL[kind], field: value}
    assert reason(encode(event_of(kind, fields))).startswith(f"{field}")


@pytest.mark.parametrize(("field", "value"), [("pid", True), ("pid", "7"), ("host", 3)])
def test_wrong_types_in_src_are_rejected(field: str, value: Any) -> None:
    event = event_of("heartbeat", {})
    event["src"][field] = value
    assert reason(encode(event)).startswith(f"src.{field}")


@pytest.mark.parametrize("component", ["Trainer", "", "train er", "trainer\n", "3d"])
def test_component_must_be_a_lowercase_word(component: str) -> None:
    event = event_of("heartbeat", {})
    event["src"]["component"] = component
    assert reason(encode(event)).startswith("src.component")


@pytest.mark.parametrize("kind", ["Heartbeat", "heartbeat\n", "a..b", ".a", "a.", "", "a b"])
def test_kind_must_be_a_dotted_lowercase_name(kind: str) -> None:
    assert reason(encode(event_of("heartbeat", {}, kind=kind))).startswith("kind")


@pytest.mark.parametrize("raw", [b"[]", b"1", b'"heartbeat"', b"null", b"true", b"[{}]"])
def test_non_object_json_is_rejected(raw: bytes) -> None:
    assert "not a JSON object" in reason(raw)


@pytest.mark.parametrize("raw", [b"", b"{", b"{'v': 1}", b"{} {}", b"nope", b"\x00"])
def test_not_json_is_rejected(raw: bytes) -> None:
    assert reason(raw).startswith("not JSON")


@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82"],
    ids=["ff", "bad-continuation", "encoded-surrogate", "truncated"],
)
def test_invalid_utf8_is_rejected(bad: bytes) -> None:
    raw = encode(event_of("heartbeat", {}))
    assert decode(raw).src.host == "node-1"
    for field in (b'"node-1"', b'"r1"'):
        with pytest.raises(InvalidEvent):
            decode(raw.replace(field, field[:-1] + bad + b'"'))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_json_in_other_encodings_is_rejected(encoding: str) -> None:
    raw = json.dumps(event_of("heartbeat", {})).encode(encoding)
    assert reason(raw).startswith("not JSON")


def test_reasons_name_at_most_five_fields_and_count_the_rest() -> None:
    text = reason(b'{"kind": "rank.status", "src": 1}')
    assert text.count(";") == 4
    assert text.endswith("more)")


def test_decode_obj_validates_parsed_objects() -> None:
    assert decode_obj(event_of("heartbeat", {})).kind == "heartbeat"
    with pytest.raises(InvalidEvent, match="v: Input should be 1"):
        decode_obj({**event_of("heartbeat", {}), "v": 2})


def test_invalid_event_is_a_value_error_with_a_reason() -> None:
    with pytest.raises(ValueError, match="not JSON") as info:
        decode(b"{")
    assert isinstance(info.value, InvalidEvent)
    assert info.value.reason == str(info.value)


# --- differential: the fast path and pydantic agree -----------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["", "\n", "r1\n", "x" * 201, "trainer", "ok", "1", "3.0", "é", "a b"])
    | st.sampled_from(["\U0001f600" * 200, "\U0001f600" * 201, "\x00", "\ud800", "\r", "\u2028"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def near_values(value: Any) -> list[Any]:
    """Values near a valid one: the same with a twist, or the wrong type."""
    near: list[Any] = [None, True, False, [], {}, [value], {"v": value}]
    if isinstance(value, bool):
        near += [int(value), str(value).lower()]
    elif isinstance(value, int):
        near += [value + 1, -value, str(value), 2**64, -(2**63) - 1, 10**400]
        if abs(value) < 2**64:
            near.append(float(value))
    elif isinstance(value, float):
        near += [str(value), math.nan, math.inf, -math.inf, 1e308, -0.0, 10**20]
        if math.isfinite(value):
            near += [int(value), value + 1, -value - 0.5]
    elif isinstance(value, str):
        near += [value + "\n", "\n" + value, value.upper(), "", value * 60, value + " x"]
    elif isinstance(value, dict):
        near += [{k: None for k in value}, {k: str(v) for k, v in value.items()}, [1]]
    return near


def _variants(value: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(near_values(value)) | json_values


@st.composite
def mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid event of some kind with a few fields dropped, retyped or replaced."""
    kind = draw(st.sampled_from(sorted(events.KNOWN_KINDS)))
    table = draw(st.sampled_from([FULL, MINIMAL]))
    event = event_of(kind, table[kind])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = event
        if draw(st.booleans()):
            target = event["src"] if isinstance(event.get("src"), dict) else event
        keys = sorted(target)
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["drop", "twist", "add"]))
        if action == "drop":
            del target[key]
        elif action == "twist":
            target[key] = draw(_variants(target[key]))
        else:
            name = draw(st.sampled_from(["extra", "step", "n", "final", "kind", "v", "mean"]))
            target[name] = draw(json_values)
    return event


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_events())
@pytest.mark.slow
def test_fast_decode_and_pydantic_agree_on_mutated_events(event: dict[str, Any]) -> None:
    raw = json.dumps(event).encode()  # NaN/Infinity tokens, as Python emitters write them
    model = accepted_by_pydantic(raw)
    try:
        got: Any = decode(raw)
    except InvalidEvent as err:
        got = err
    if isinstance(got, InvalidEvent):
        assert model is None, f"decode rejected ({got.reason}) what pydantic accepts"
        return
    assert model is not None, f"decode accepted what pydantic rejects: {got!r}"
    assert got.kind == model.kind
    if is_fast(got):
        assert_same_values(got, model)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(events.KNOWN_KINDS)),
    run=st.text(min_size=0, max_size=205),
    component=st.text(max_size=10),
)
def test_fast_decode_and_pydantic_agree_on_random_strings(
    kind: str, run: str, component: str
) -> None:
    event = event_of(kind, FULL[kind], run=run)
    event["src"]["component"] = component
    raw = json.dumps(event).encode("utf-8", "surrogatepass")
    model = accepted_by_pydantic(raw)
    try:
        got: Any = decode(raw)
    except InvalidEvent as err:
        got = err
    if isinstance(got, InvalidEvent):
        assert model is None, f"decode rejected ({got.reason}) what pydantic accepts"
        return
    assert model is not None, f"decode accepted what pydantic rejects: {got!r}"
    assert (got.run, got.src.component) == (run, component)


def single_field_mutations() -> list[dict[str, Any]]:
    """Every known kind with one field (top level or in src) replaced by each near value."""
    out = []
    for kind in sorted(events.KNOWN_KINDS):
        base = event_of(kind, FULL[kind])
        for key in base:
            for value in near_values(base[key]):
                out.append({**copy.deepcopy(base), key: value})
            out.append({k: v for k, v in copy.deepcopy(base).items() if k != key})
        for key in base["src"]:
            for value in near_values(base["src"][key]):
                out.append({**copy.deepcopy(base), "src": {**base["src"], key: value}})
    return out


def test_fast_decode_and_pydantic_agree_on_every_single_field_mutation() -> None:
    disagreements = []
    cases = single_field_mutations()
    for event in cases:
        raw = json.dumps(event).encode()
        model = accepted_by_pydantic(raw)
        try:
            got: Any = decode(raw)
        except InvalidEvent:
            got = None
        if (got is None) != (model is None):
            disagreements.append((event, got, model))
        elif got is not None and model is not None and is_fast(got):
            try:
                assert_same_values(got, model)
            except AssertionError as err:
                disagreements.append((event, got, str(err)))
    assert len(cases) > 1000
    assert disagreements == []

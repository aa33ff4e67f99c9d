"""A fetch's records as one decoding step's lines: the native step (`stream/_fetched.c`)
against the Python it mirrors (`live._plain_in_python`), on fetches made of plain event
lines and of every way a record or a line can fail to be plain -- no value, blank and
space-only lines (the vertical tab and form feed too), JSON space at a line's end, non-ASCII
bytes, a backslash, DEL, a line too large, a line that is not `{...}`, headers that mark a
batch in another spelling or do not."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runwatch.emitters.bounds import MAX_EVENT_BYTES
from runwatch.stream import live
from runwatch.stream.records import BATCH_HEADER
from tests.helpers import make_event
from tests.unit.stream.test_batches import Record  # (its values here: str and None too)


def event_line(k: int) -> bytes:
    kind = ["heartbeat", "step.metrics", "trajectory.done"][k % 3]
    fields: dict[str, Any] = {}
    if kind == "step.metrics":
        fields = {"step": k, "metrics": {"loss": 0.5}}
    elif kind == "trajectory.done":
        fields = {"traj": f"t{k}", "status": "ok"}
    event = make_event(kind, 1.7e9 + k, run=f"run-{k % 4}", **fields)
    return json.dumps({**event, "id": f"e-{k}"}).encode()  # (the same line for the same k)


#: how a line may be spoilt (or kept plain)
SPOIL = [
    lambda b: b,
    lambda b: b,
    lambda b: b + b" \t\r",
    lambda b: b + b"\x0b",
    lambda b: b"",
    lambda b: b" \x0c ",
    lambda b: b.replace(b'"loss"', '"lössé"'.encode()),  # (a metric's name: any text)
    lambda b: b.replace(b'"loss"', b'"lo\\u0073s"'),
    lambda b: b.replace(b'"loss"', b'"lo\x7fss"'),
    lambda b: b + b" " * MAX_EVENT_BYTES,
    lambda b: b"[" + b + b"]",
    lambda b: b"{",
    lambda b: b"}",
    lambda b: b[:-1],
    lambda b: b"{}",
]
HEADERS = [
    (),
    None,
    (BATCH_HEADER,),
    [BATCH_HEADER],
    (("Content-Type", b"application/x-ndjson; charset=utf-8"),),
    (("content-type", b"application/json"),),
    (("trace", b"1"), BATCH_HEADER),
]

#: spoilings that keep a batch plain (a blank line, a space-only one, JSON space at an end)
KEEP = [0, 1, 2, 4, 5]
records = st.lists(
    st.tuples(
        st.lists(
            st.tuples(
                st.integers(0, 50),
                st.sampled_from(KEEP * 12 + list(range(len(SPOIL)))),
            ),
            max_size=4,
        ),
        st.sampled_from([2, 2, 2, 3, 4, *range(len(HEADERS))]),
        st.integers(0, 2**41),
        st.sampled_from(["lines"] * 8 + ["one"] * 3 + ["none", "str"]),
    ),
    max_size=5,
)


def fetch(spec: list[tuple[list[tuple[int, int]], int, int, str]]) -> list[Record]:
    out = []
    for offset, (lines, headers, stamp, what) in enumerate(spec):
        text = b"\n".join(SPOIL[s](event_line(k)) for k, s in lines)
        value: Any = {"lines": text, "none": None, "str": text.decode("latin-1")}.get(what)
        if what == "one":
            value = SPOIL[lines[0][1]](event_line(lines[0][0])) if lines else event_line(0)
        out.append(Record(value, stamp, offset, HEADERS[headers]))
    return out


def test_the_native_step_is_built() -> None:
    """The install builds `_fetched.c` wherever a C compiler is (this machine, CI): a build
    that failed would go unnoticed (the extension is optional) but for this."""
    plain = importlib.import_module("runwatch.stream._fetched").plain
    assert live._NATIVE_PLAIN is plain


def listed(steps: Iterable[Any] | None) -> list[Any] | None:
    """`live._plain`'s steps as a list (it hands them on lazily), None as None."""
    return None if steps is None else list(steps)


@settings(max_examples=400, deadline=None)
@given(records)
@example([([(1, 0), (2, 0)], 2, 1_700_000_000_123, "lines")])
@example([([(1, 0), (2, 4), (3, 5)], 3, 5, "lines"), ([(4, 2)], 0, 7, "one")])
@example([([(1, 0)], 2, 5, "lines"), ([(2, 9)], 2, 6, "lines")])
@example([([(1, 0)], 4, 5, "lines"), ([(2, 0)], 5, 6, "lines")])
def test_the_native_step_answers_what_the_python_answers(spec: Any) -> None:
    records = fetch(spec)
    try:
        python = live._plain_in_python(records)
    except TypeError:  # (a str value in a batch: Kafka's are bytes; the native one says None)
        python = None
    assert listed(live._plain(records)) == python


@pytest.mark.parametrize("what", ["lines", "one"])
@pytest.mark.parametrize("spoil", range(len(SPOIL)))
def test_each_spoiling_alone_is_answered_alike(spoil: int, what: str) -> None:
    """Each way a line can be spoilt, alone in a fetch of plain lines of every kind."""
    records = fetch([([(3, 0), (1, spoil), (2, 0)], 2, 5, what), ([(4, 0)], 2, 6, "lines")])
    assert listed(live._plain(records)) == live._plain_in_python(records)


def test_a_plain_fetch_is_read_in_one_step_and_a_spoilt_one_is_not() -> None:
    """What the property above must not pass for want of a plain fetch: events come out."""
    records = fetch([([(1, 0), (2, 2), (3, 4), (4, 5)], 2, 1_700_000_000_500, "lines")])
    got = listed(live._plain(records))
    assert got is not None
    assert [(line, arrival, offset, n) for _, line, arrival, offset, n in got] == [
        (event_line(1), 1_700_000_000.5, 0, 1),
        (event_line(2) + b" \t\r", 1_700_000_000.5, 0, 2),
    ]  # (the blank line and the space-only one left out)
    assert live._plain(fetch([([(2, 0), (1, 7)], 2, 5, "lines")])) is None  # (a backslash)

"""Hostile input never stops runwatch: the corpus's verdicts at the ingress boundary, and the
property that for any valid stream S with hostile lines H woven in anywhere, the alert
transitions of S's runs are those of S alone and every line of H is applied (if valid) or
reported with a reason -- through replay, and through the live driver."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hostile import CORPUS, Line, hostile_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runwatch.dev import scenarios
from runwatch.stream.alerts import Alert
from runwatch.stream.check import check_lines
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import admit
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.live import LiveDriver
from runwatch.stream.refused import Refused
from runwatch.stream.replay import replay

T = 1_800_000_000.0
NORMAL = json.dumps({"v": 1, "id": "n1", "ts": T, "run": "normal", "kind": "heartbeat",
                     "src": {"component": "trainer", "host": "h"}}).encode()  # fmt: skip


def test_the_corpus_covers_forty_kinds_of_hostile_input() -> None:
    assert len(CORPUS) >= 40
    assert len({name for name, _, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("name", "line", "refused"), CORPUS, ids=[c[0] for c in CORPUS])
def test_each_line_is_refused_with_one_printable_reason_or_accepted(
    name: str, line: Line, refused: bool
) -> None:
    raw = line(T)
    checked = check_lines([("f", 1, NORMAL), ("f", 2, raw)], RulesConfig.default())
    reasons = [b.reason for b in checked.invalid]
    assert [b.position for b in checked.invalid] == ([2] if refused else []), (name, reasons)
    for reason in reasons:
        assert reason.strip()
        assert reason.isprintable(), repr(reason)  # safe for any terminal or log line
    if not refused:  # and what is accepted can be written out and shown
        event = admit(raw)
        orjson.dumps(json.loads(raw))
        assert event.run


@pytest.mark.parametrize(
    ("ts", "words"),
    [
        (T * 1000, "looks like milliseconds"),
        (T * 1e6, "looks like microseconds"),
        (T * 1e9, "looks like nanoseconds"),
        (1e30, "no time in seconds"),
        (5.0, "before 2001-09-09"),
    ],
)
def test_a_wrong_ts_is_refused_saying_what_is_wrong(ts: float, words: str) -> None:
    raw = NORMAL.replace(str(T).encode(), repr(ts).encode())
    with pytest.raises(InvalidEvent, match=words):
        admit(raw)


def test_an_event_far_ahead_of_its_arrival_is_refused_live() -> None:
    with pytest.raises(InvalidEvent, match="2 days 0h ahead of the time the event arrived"):
        admit(NORMAL, received=T - 2 * 86_400)
    assert admit(NORMAL, received=T - 60).ts == T  # a host a minute fast is fine


# -- the property -----------------------------------------------------------------------------


def _stream() -> list[bytes]:
    return [orjson.dumps(e) for e in scenarios.orchestrator_dies()]


STREAM = _stream()
S_RUNS = {json.loads(STREAM[0])["run"]}


def _of_s(alerts: list[Alert]) -> list[dict[str, Any]]:
    return [a.to_dict() for a in alerts if a.run in S_RUNS]


ALONE = _of_s(list(replay([("s", i, raw) for i, raw in enumerate(STREAM)], Engine())))


def weave(stream: list[bytes], hostile: list[Line], seed: int) -> tuple[list[bytes], set[int]]:
    """The stream with each hostile line put in at a random place, with the ts of the event
    before it (so a valid one never moves the stream's time); and where they went."""
    rng = random.Random(seed)
    places = sorted(rng.randrange(1, len(stream)) for _ in hostile)
    out: list[bytes] = []
    at: set[int] = set()
    pending = list(zip(places, hostile, strict=True))
    for i, raw in enumerate(stream):
        while pending and pending[0][0] == i:
            _, line = pending.pop(0)
            ts = json.loads(stream[i - 1])["ts"]
            at.add(len(out))
            out.append(line(ts))
        out.append(raw)
    return out, at


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picked=st.lists(st.sampled_from(CORPUS), min_size=1, max_size=25),
    generated=st.lists(hostile_objects(), max_size=10),
    seed=st.integers(0, 2**32 - 1),
)
def test_hostile_lines_change_no_transition_of_the_stream_and_each_is_accounted_for(
    picked: list[tuple[str, Line, bool]], generated: list[Line], seed: int
) -> None:
    hostile = [line for _, line, _ in picked] + generated
    lines, at = weave(STREAM, hostile, seed)
    bad: list[Refused] = []
    alerts = list(replay([("w", i, raw) for i, raw in enumerate(lines)], Engine(),
                         on_invalid=bad.append))  # fmt: skip
    assert _of_s(alerts) == ALONE
    reported = [b.position for b in bad]
    assert len(reported) == len(set(reported)), "a line is reported once"
    assert set(reported) <= at, "only hostile lines are refused"
    for i in at - set(reported):  # not refused: valid, and applied
        admit(lines[i])
    # hostile[k] went to the k-th place: the corpus lines it must refuse are all reported
    places = sorted(at)
    must = {places[k] for k, (_, _, refused) in enumerate(picked) if refused}
    assert must <= set(reported)


def test_the_live_driver_dead_letters_every_hostile_record_and_goes_on() -> None:
    driver = LiveDriver(min_correction=float("inf"))
    lines, at = weave(STREAM, [line for _, line, _ in CORPUS], seed=7)
    dead = []
    for offset, raw in enumerate(lines):
        after = next(i for i in range(offset, len(lines)) if i not in at)
        arrival = json.loads(lines[after])["ts"]  # when the stream's next event arrived
        _, letters = driver.feed([(raw, arrival, offset)])
        dead += letters
    refused = {o for o, (_, _, r) in zip(sorted(at), CORPUS, strict=True) if r}
    # the year-3000 and week-ahead lines are refused live too: ahead of their arrival
    assert {d.position for d in dead} == refused
    assert all(d.reason and d.reason.isprintable() for d in dead)
    assert driver.failures == 0

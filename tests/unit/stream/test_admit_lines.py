"""Many lines admitted in one step (`decode.admit_lines`): what it returns is what `admit`
returns line by line, or nothing; it never reads two lines as one event or one as two."""

from __future__ import annotations

import io
import json
from typing import Any

from hostile import CORPUS, hostile_objects
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.stream.decode import admit, admit_lines, chunk_admitted
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.refused import Refused
from runwatch.stream.replay import Batches, Chunk, stamped

TS = 1_795_680_000.0
SRC = {"component": "trainer", "host": "gpu-001", "pid": 31_001, "rank": 0}


def line(i: int, kind: str = "heartbeat", **fields: Any) -> bytes:
    event = {"v": 1, "id": f"id-{i:06d}", "ts": TS + i, "run": "rl-1", "kind": kind, "src": SRC}
    return json.dumps({**event, **fields}, separators=(",", ":")).encode()


PLAIN = [
    line(1),
    line(2, "trajectory.started", traj="t-1", step=1),
    line(3, "trajectory.phase", traj="t-1", phase="tool"),
    line(4, "trajectory.done", traj="t-1", status="ok", reward=0.5),
    line(5, "inference.stats", server="vllm-0", running=3, waiting=0),
    line(6, "run.started", labels={"team": "rl"}, config={"zero_reward": {"steps": 4}}),
]


def one_by_one(raws: list[bytes]) -> list[Any]:
    out: list[Any] = []
    for raw in raws:
        try:
            out.append(admit(raw))
        except InvalidEvent as err:
            out.append(err.kind)
    return out


def test_plain_lines_are_admitted_in_one_step_as_one_by_one() -> None:
    for raws in (PLAIN, [raw + b"\n" for raw in PLAIN], [PLAIN[0] + b" \r\n"], PLAIN[:1]):
        assert admit_lines(raws) == one_by_one(raws)


def test_a_newline_inside_a_line_is_space_as_one_by_one() -> None:
    # (one event over two lines of its own: what the line alone holds, nothing joined)
    spread = [raw.replace(b",", b",\n", 1) for raw in PLAIN]
    assert admit_lines(spread) == one_by_one(spread)
    assert admit_lines([PLAIN[0], TWO, PLAIN[1]]) is None


#: Lines that each hold no event alone, but joined might read as events: a line of two
#: events (by a newline, or a space), pieces of one event, an event with a trailing byte
#: JSON does not take as space; beside them, plain lines.
TWO = line(10) + b"\n" + line(11)
HALVES = [line(12)[: line(12).index(b",") + 1], line(12)[line(12).index(b",") + 1 :]]
BROKEN = [
    [TWO, *HALVES],
    [line(10) + b" " + line(11), *HALVES],
    [line(10) + b" " + line(11)],
    [TWO + b"\n", line(12)[:40], line(12)[40:] + b"\n"],
    [line(13)[:60], line(13)[60:]],
    [line(14) + b"\x0c"],
    [line(15), b"", line(16)],
    [line(17), b"  \n", line(18)],
    [b" " + line(19)],
    [line(20).replace(b'"rl-1"', b'"rl 1"')],
    [line(23), line(24).replace(b'"trainer"', b'"Trainer"')],
    [line(21, extra="field")],
    [line(22).replace(b'"ts":', b'"ts":1e3+')],
    [],
]


def test_what_does_not_read_as_one_event_a_line_is_left_to_the_lines() -> None:
    for raws in BROKEN:
        assert admit_lines(raws) is None, raws


hostile_lines = st.sampled_from([entry for _, entry, _ in CORPUS]) | hostile_objects()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(PLAIN + [raw + b"\n" for raw in PLAIN] + [TWO, b"\n", b""]),
            hostile_lines.map(lambda render: render(TS)),
            st.sampled_from(PLAIN).flatmap(
                lambda raw: st.integers(1, len(raw) - 1).map(lambda k: raw[:k])
            ),
        ),
        max_size=8,
    )
)
def test_admitted_in_one_step_or_not_at_all(raws: list[bytes]) -> None:
    got = admit_lines(raws)
    assert got is None or got == one_by_one(raws)
    # the same lines as a file's piece (`replay.Chunk`: its text, and the lines read from it)
    data = b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for raw in raws)
    lines = io.BytesIO(data).readlines()
    chunk = chunk_admitted(data, lines)
    assert chunk is None or chunk[0] == one_by_one(lines)


def test_a_plain_piece_of_a_file_is_admitted_as_it_was_read() -> None:
    for data in (b"\n".join(PLAIN), b"\n".join(PLAIN) + b"\n", PLAIN[0] + b"\n",
                 b"\r\n".join(PLAIN) + b"\r\n", b" \n".join(PLAIN)):  # fmt: skip
        lines = io.BytesIO(data).readlines()
        chunk = chunk_admitted(data, lines)
        assert chunk is not None, data  # one step
        assert chunk[0] == one_by_one(lines), data
    for raws in BROKEN:  # (what the lines do not take, the piece does not take either)
        data = b"\n".join(raws)
        chunk = chunk_admitted(data, io.BytesIO(data).readlines())
        assert chunk is None or chunk[0] == [], raws


def test_a_piece_s_stamps_and_kinds_are_its_events_own() -> None:
    data = b"\n".join(PLAIN) + b"\n"
    admitted = chunk_admitted(data, io.BytesIO(data).readlines())
    assert admitted is not None
    events, stamps, types = admitted
    assert events == one_by_one(PLAIN)
    assert stamps == [event.ts for event in events]
    assert types == {type(event) for event in events}


def test_a_piece_with_a_start_the_engine_refuses_is_taken_line_by_line() -> None:
    """The kinds the decode found say a run.started is there: the engine's check runs, and
    the start it refuses is reported and held back from the stream (its ts moves nothing)."""
    bad = line(7, "run.started", config={"zero_reward": {"steps": -3}})
    data = b"\n".join([*PLAIN[:5], bad, line(8)]) + b"\n"
    refused: list[Refused] = []
    piece = Chunk("f", 1, data, io.BytesIO(data).readlines())
    batches = list(stamped(Batches([piece]), Engine().check, refused.append))
    assert [(r.position, r.kind) for r in refused] == [(6, "refused_by_rules")]
    stamps = [ts for batch_stamps, _ in batches for ts in batch_stamps]
    assert stamps == [TS + i for i in (1, 2, 3, 4, 5, 8)]
    # and one the engine takes goes through in one step, the start among the rest
    good = b"\n".join(PLAIN) + b"\n"
    whole = Chunk("f", 1, good, io.BytesIO(good).readlines())
    one = list(stamped(Batches([whole]), Engine().check, refused.append))
    assert [len(held) for _, held in one] == [len(PLAIN)]
    assert len(refused) == 1

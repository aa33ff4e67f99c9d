"""Batches on Kafka (contract section 8): a record of runwatch.events may carry several events
of one run, one per line, under the header `content-type: application/x-ndjson`; a record
without it is one event. The decode boundary (`runwatch.stream.records`), the live driver's
records (`LiveDriver.feed_records`), and the worker against the Kafka double -- its live path
and a takeover's re-read -- read a batch as its events, and a bad line alone is refused."""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import encode, make_event
from worker_double import NAN, TOPICS, alerts, broker, ids, until, worker

from runwatch.emitters.topics import BATCH_HEADER
from runwatch.stream import live
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.live import LiveDriver
from runwatch.stream.records import is_batch, record_events
from runwatch.stream.refused import Refused

BATCH = (BATCH_HEADER,)


@dataclass(frozen=True)
class Record:
    """What a consumer's record carries, as `feed_records` reads it."""

    value: bytes | None
    timestamp: int
    offset: int
    headers: tuple[tuple[str, bytes], ...] = ()


def zero_reward_run(run: str, t0: float) -> list[dict[str, Any]]:
    """A run whose reward is 0 for five steps: zero_reward fires once, at the fifth."""
    out = [make_event("run.started", t0, run=run, total_steps=10)]
    for step in range(1, 6):
        out.append(make_event("reward", t0 + step, run=run, step=step, mean=0.0))
    return out


def batch_of(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


# -- the decode boundary -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "batch"),
    [
        ((BATCH_HEADER,), True),
        ((("Content-Type", b"application/x-ndjson; charset=utf-8"),), True),
        ((("other", b"x"), BATCH_HEADER), True),
        ((), False),
        (None, False),
        ((("content-type", b"application/json"),), False),
        ((("x-content-type", b"application/x-ndjson"),), False),
    ],
)
def test_the_batch_header_is_read_as_http_reads_a_content_type(headers: Any, batch: bool) -> None:
    assert is_batch(headers) is batch


def test_a_batch_is_its_lines_each_checked_alone() -> None:
    good = [encode(e) for e in zero_reward_run("r1", 1.7e9)]
    value = batch_of(good[0], b"", b"not json", good[1], b"  ", good[2])
    got = list(record_events(value, batch=True))
    assert [line for line, _ in got] == [good[0], b"not json", good[1], good[2]]
    bad = got[1][1]
    assert isinstance(bad, InvalidEvent)
    assert bad.reason.startswith("line 2 of 4 of a batch: not JSON")
    assert bad.kind == "not_json"
    assert [e.kind for _, e in got if not isinstance(e, InvalidEvent)] == [
        "run.started",
        "reward",
        "reward",
    ]


def test_a_record_without_the_header_is_one_event_whatever_its_lines() -> None:
    pretty = json.dumps(make_event("heartbeat", 1.7e9), indent=2).encode()
    ((raw, event),) = record_events(pretty, batch=False)
    assert raw == pretty
    assert not isinstance(event, InvalidEvent)
    assert event.kind == "heartbeat"
    ((_, refused),) = record_events(batch_of(pretty, pretty), batch=False)
    assert isinstance(refused, InvalidEvent)  # two objects are not one event


# -- the live driver -----------------------------------------------------------------------


def test_a_batch_and_single_records_read_alike_by_the_live_driver() -> None:
    t0 = time.time() - 60
    events = zero_reward_run("r1", t0)
    one, many = LiveDriver(), LiveDriver()
    now = int(time.time() * 1000)  # the broker's time of every record (clock offsets alike)
    made_one, dead_one = one.feed_records([Record(encode(e), now, 0) for e in events])
    made_many, dead_many = many.feed_records(
        [Record(batch_of(*map(encode, events)), now, 0, BATCH)]
    )
    assert [a.to_dict() for a in made_one] == [a.to_dict() for a in made_many]
    assert [(a.rule, a.state) for a in made_many] == [("zero_reward", "firing")]
    assert dead_one == dead_many == []
    assert one.applied == many.applied == len(events)
    assert many.position == 0  # the record's offset, whatever it held


def test_plain_records_decoded_in_one_step_apply_as_each_decoded_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver decodes a feed's lines in one step where every one is plain
    (`decode.admit_lines`): the same events, places and transitions as one by one."""
    t0 = time.time() - 60
    lines = [encode(e) for e in [*zero_reward_run("r1", t0), *zero_reward_run("r2", t0)]]
    now = int(time.time() * 1000)
    records = [Record(batch_of(*lines[:4]), now, 3, BATCH), Record(lines[4], now + 5, 4),
               Record(b"\n" + batch_of(*lines[5:]), now + 9, 5, BATCH)]  # fmt: skip
    got = live._plain(records)
    assert got is not None  # (the one-step path is the one taken)
    steps = list(got)
    assert [tuple(place) for _, _, *place in steps] == [
        *((now / 1000, 3, n) for n in range(1, 5)), ((now + 5) / 1000, 4, 0),
        *(((now + 9) / 1000, 5, n) for n in range(1, 8))]  # fmt: skip
    one_step = LiveDriver()
    made = one_step.feed_records(records)
    monkeypatch.setattr(live, "_plain", lambda records: None)
    alone = LiveDriver()
    assert [a.to_dict() for a in made[0]] == [a.to_dict() for a in alone.feed_records(records)[0]]
    assert [(a.run, a.rule) for a in made[0]] == [("r1", "zero_reward"), ("r2", "zero_reward")]
    assert (one_step.applied, one_step.position) == (alone.applied, alone.position) == (12, 5)


def test_one_bad_line_of_a_batch_is_a_dead_letter_and_the_rest_apply() -> None:
    t0 = time.time() - 60
    good = [encode(e) for e in zero_reward_run("r1", t0)]
    bad = b'{"v": 1, "run": "r1"}'
    driver = LiveDriver()
    now = int(time.time() * 1000)
    value = batch_of(*good[:3], bad, *good[3:], b"[1, 2]")
    made, dead = driver.feed_records([Record(value, now, 7, BATCH)])
    assert [(a.rule, a.state) for a in made] == [("zero_reward", "firing")]
    assert driver.applied == len(good)
    assert driver.invalid == 2  # counted per line
    assert [(d.raw, d.position, d.kind) for d in dead] == [
        (bad, 7, "schema"),
        (b"[1, 2]", 7, "not_an_object"),
    ]
    assert dead[0].reason.startswith("line 4 of 8 of a batch: ")
    assert "id" in dead[0].reason
    letter = json.loads(dead[1].to_json())
    assert (letter["raw"], letter["offset"]) == ("[1, 2]", 7)
    assert letter["reason"].startswith("line 8 of 8 of a batch: not a JSON object")


def test_a_batch_s_duplicates_and_its_empty_record_are_handled_as_singles_are() -> None:
    t0 = time.time() - 60
    events = zero_reward_run("r1", t0)
    driver = LiveDriver()
    now = int(time.time() * 1000)
    first = encode(events[0])
    made, dead = driver.feed_records([
        Record(batch_of(first, first, *map(encode, events[1:])), now, 0, BATCH),
        Record(first, now, 1),  # sent again alone: an id is applied once
        Record(None, now, 2, BATCH),
    ])  # fmt: skip
    assert len(made) == 1
    assert driver.duplicates == 2
    assert [(d.reason, d.position) for d in dead] == [("empty record (no value)", 2)]


# -- the worker, against the Kafka double --------------------------------------------------


def send_batch(b: Any, partition: int, run: str, *lines: bytes) -> None:
    b.produce(TOPICS.events, batch_of(*lines), partition, run.encode(), BATCH)


def nan_steps(run: str, losses: list[float], first: int = 1) -> list[bytes]:
    now = time.time() - 1
    return [encode(make_event("step.metrics", now, run=run, step=n, metrics={"loss": loss}))
            for n, loss in enumerate(losses, first)]  # fmt: skip


def test_the_worker_reads_a_batch_as_its_events_and_dead_letters_a_bad_line() -> None:
    b, said = broker(), []

    async def scenario() -> None:
        async with worker(b, said):
            send_batch(b, 0, "r1", *nan_steps("r1", [0.5, 0.4]), b"{bad",
                       *nan_steps("r1", [math.nan], first=3))  # fmt: skip
            await until(lambda: alerts(b) == [NAN], "the NaN in the batch alerted")
            await until(lambda: b.values(TOPICS.dlq), "the bad line dead-lettered")

    asyncio.run(scenario())
    ((letter,),) = [[json.loads(v) for v in b.values(TOPICS.dlq)]]
    assert (letter["raw"], letter["offset"]) == ("{bad", 0)
    assert letter["reason"].startswith("line 3 of 4 of a batch: not JSON")


def test_a_takeover_re_reads_batches_and_repeats_nothing() -> None:
    b, first, second = broker(), [], []

    async def scenario() -> None:
        async with worker(b, first, killed=True):
            send_batch(b, 0, "r1", *nan_steps("r1", [0.5, math.nan]))
            await until(lambda: alerts(b) == [NAN], "the NaN alerted")
        # killed with no checkpoint: the next worker re-reads the batch from the start
        send_batch(b, 0, "r1", *nan_steps("r1", [0.3, 0.2], first=3))
        async with worker(b, second):
            await until(lambda: len(alerts(b)) == 2, "the resolve, once")
            await asyncio.sleep(0.2)

    asyncio.run(scenario())
    assert alerts(b) == [NAN, ("r1", "non_finite_metric", "resolved")]
    assert len(set(ids(b))) == 2
    assert not b.values(TOPICS.dlq)


def test_a_takeover_publishes_the_bad_lines_of_a_record_its_predecessor_had_not() -> None:
    """One batch record with three bad lines: the previous owner published the first one's
    letter and died. The next owner learns that letter's place (offset and line) and
    publishes the other two -- an offset alone would say the whole record was done."""
    b, said = broker(), []
    good = nan_steps("r1", [0.5, 0.4, 0.3])
    send_batch(b, 0, "r1", good[0], b"{bad-1", good[1], b"{bad-2", good[2], b"[3]")
    first = Refused("line 2 of 6 of a batch: not JSON", b"{bad-1", TOPICS.events, 0, 0,
                    "not_json", line=2)  # fmt: skip
    b.produce(TOPICS.dlq, first.to_json(), 0)  # what the previous owner got out

    async def scenario() -> None:
        async with worker(b, said):  # live: the takeover published what was missing
            pass

    asyncio.run(scenario())
    got = [json.loads(v) for v in b.values(TOPICS.dlq)]
    assert [(x["raw"], x["offset"], x.get("line")) for x in got] == [
        ("{bad-1", 0, 2), ("{bad-2", 0, 4), ("[3]", 0, 6)]  # fmt: skip


def test_a_batch_of_hosts_shifts_each_event_as_its_own_host() -> None:
    """The driver looks a host up once for a run of its events (a batch record is one
    process's) and again where the host changes, inside a record or between two: each
    event is shifted as a plain `ClockOffsets.shift` of it, host by host, gives."""
    from runwatch.stream.timekeeping.skew import ClockOffsets

    t0 = 1.7e9
    skews = {"node-a": -40.0, "node-b": 25.0, "node-c": -3.0, None: 60.0}
    plan = ["node-a", "node-a", "node-b", "node-a", None, None, "node-c", "node-b", "node-b"]
    records, events = [], []
    for k in range(30):  # one record a second, its hosts in turns and runs of one
        arrival = t0 + k
        lines = []
        for j, host in enumerate(plan[k % 4 : k % 4 + 5]):
            event = make_event("heartbeat", arrival - 0.2 - 0.01 * j + skews[host],
                               run=f"r{j % 2}", host=host, pid=100 + j)  # fmt: skip
            lines.append(encode(event))
            events.append((event, arrival))
        records.append(Record(batch_of(*lines), int(arrival * 1000), k, BATCH))
    driver = LiveDriver()
    driver.feed_records(records)
    plain = ClockOffsets()
    want = []
    for event, arrival in events:
        src = event["src"]
        host = src.get("host") or (src["component"], src.get("instance"), src.get("pid"))
        want.append(plain.shift(host, event["run"], event["ts"], arrival, driver.min_correction))
    assert driver.corrected == sum(1 for skew in want if skew) > 0
    assert {h: list(held) for h, held in driver.clocks._hosts.items()} == {
        h: list(held) for h, held in plain._hosts.items()
    }
    assert len(driver.clocks) == 7  # three named hosts, four processes without one

"""The emitter's Kafka transport sends a batch's consecutive events of one run as one record
(contract section 8: JSON Lines under `content-type: application/x-ndjson`, key the run id),
a lone event as a plain record, and counts what the broker confirmed or refused per event.
Against a stand-in for kafka-python's producer; tests/integration/test_emitter_kafka.py
holds it to a real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runwatch.emitters.spool import Spool
from runwatch.emitters.topics import BATCH_HEADER
from runwatch.emitters.transport import KafkaDestination


class Future:
    def __init__(self, error: BaseException | None) -> None:
        self.exception = error

    def succeeded(self) -> bool:
        return self.exception is None

    def failed(self) -> bool:
        return self.exception is not None


class MessageSizeTooLargeError(Exception):
    """Named as kafka-python names it: the broker refuses the record for what it is."""


class Producer:
    """kafka-python's `send`, `flush` and `partitions_for`; refuses records over `limit`
    bytes as a broker would."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.sent: list[dict[str, Any]] = []
        self.limit = limit

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def send(self, topic: str, value: bytes, key: bytes, *, headers: Any = None,
             partition: int | None = None) -> Future:  # fmt: skip
        if len(value) > self.limit:
            return Future(MessageSizeTooLargeError(f"{len(value)} bytes"))
        self.sent.append({"key": key, "value": value, "headers": headers})
        return Future(None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float = 0) -> None:
        pass


def line(run: str, n: int) -> str:
    return json.dumps({"v": 1, "run": run, "src": {"component": "trainer"}, "id": f"{run}-{n}",
                       "ts": 1.7e9 + n, "kind": "step.started", "step": n},
                      separators=(",", ":"))  # fmt: skip


def destination(tmp_path: Path, producer: Producer) -> KafkaDestination:
    d = KafkaDestination("localhost:1", "runwatch.events", "r1", Spool(tmp_path / "spool"))
    d.producer = producer
    return d


def test_consecutive_events_of_a_run_go_as_one_batch_record(tmp_path: Path) -> None:
    producer = Producer()
    d = destination(tmp_path, producer)
    lines = [line("r1", n) for n in range(5)]
    assert d._send(lines, live=True) == 5
    ((record,),) = [producer.sent]
    assert record["key"] == b"r1"
    assert record["headers"] == [BATCH_HEADER]
    assert record["value"].split(b"\n") == [x.encode() for x in lines]
    assert d.sent == 5


def test_a_lone_event_goes_as_a_plain_record(tmp_path: Path) -> None:
    producer = Producer()
    assert destination(tmp_path, producer)._send([line("r1", 0)], live=True) == 1
    assert producer.sent == [{"key": b"r1", "value": line("r1", 0).encode(), "headers": None}]


def test_spooled_events_of_several_runs_are_batched_per_run_in_order(tmp_path: Path) -> None:
    producer = Producer()
    lines = [line("a", 0), line("a", 1), line("b", 2), line("a", 3)]
    assert destination(tmp_path, producer)._send(lines, live=False) == 4
    assert [(r["key"], r["value"].count(b"\n") + 1) for r in producer.sent] == [
        (b"a", 2), (b"b", 1), (b"a", 1)
    ]  # fmt: skip


def test_a_batch_holds_at_most_batch_bytes(tmp_path: Path) -> None:
    producer = Producer()
    d = destination(tmp_path, producer)
    d.batch_bytes = 3 * (len(line("r1", 0)) + 1)
    assert d._send([line("r1", n) for n in range(7)], live=True) == 7
    assert [r["value"].count(b"\n") + 1 for r in producer.sent] == [3, 3, 1]


def test_a_batch_the_broker_finds_too_large_is_sent_again_in_smaller_ones(
    tmp_path: Path,
) -> None:
    producer = Producer(limit=2 * (len(line("r1", 0)) + 1))
    d = destination(tmp_path, producer)
    lines = [line("r1", n) for n in range(6)]
    assert d._send(lines, live=True) == 0  # nothing settled: spooled, not dropped
    assert d.spool.dropped == 0
    for _ in range(8):  # each refusal cuts the batches to a quarter, until they pass
        d.producer = producer  # (the outage handling let it go)
        if d._send(lines, live=True) == 6:
            break
    assert d.spool.dropped == 0
    assert sum(r["value"].count(b"\n") + 1 for r in producer.sent) == 6
    assert all(len(r["value"]) <= producer.limit for r in producer.sent)


def test_a_lone_event_the_broker_refuses_for_good_is_dropped_and_counted(
    tmp_path: Path,
) -> None:
    producer = Producer(limit=10)
    d = destination(tmp_path, producer)
    assert d._send([line("r1", 0)], live=True) == 1  # settled: refused for what it is
    assert d.spool.dropped == 1
    assert producer.sent == []

"""The run view in a training process: one model, parsed once per record; one follower thread
per Emitter feeding both the guard and the stack responder; a record that is not a run view
refused without stopping either."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runwatch.dev.broker import free_port
from runwatch.emitters import Emitter
from runwatch.emitters.follower import RunViewFollower
from runwatch.emitters.runview import RunView

from .test_guard import Scripted, wait_for

WIRE: dict[str, Any] = {
    "v": 1, "run": "r", "ts": 1.7e9, "lifted": 1,
    "resumed": {"ts": 1.7e9 - 60, "by": "alice@node-1", "rule": None},
    "alerts": [{"id": "t-1", "rule": "zero_reward", "key": "k", "subject": None,
                "severity": "critical", "action": None, "since": 1.7e9 - 300}],
}  # fmt: skip


def record(*, pause: bool = True, stacks: str | None = None) -> bytes:
    """A run view's record: zero_reward firing (or nothing), and a stacks request."""
    wire = {**WIRE, "alerts": WIRE["alerts"] if pause else []}
    if stacks is not None:
        wire["stacks"] = {"request": stacks, "at": 1.7e9}
    return json.dumps(wire).encode()


def test_the_wire_form_round_trips_and_stacks_is_there_only_when_asked() -> None:
    view = RunView.parse(record())
    assert view.to_dict() == WIRE
    assert view.alerts[0].rule == "zero_reward"
    assert RunView.parse(view.to_json()) == view
    asked = RunView.parse(record(stacks="incident|r|1"))
    assert asked.stacks is not None
    assert asked.to_dict()["stacks"] == {"request": "incident|r|1", "at": 1.7e9}
    newer = RunView.parse(json.dumps({**WIRE, "from_a_newer_runwatch": 1}))
    assert newer == view  # a field it does not know is left out, not refused


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"", "not JSON"),
        (b"[1]", "not an object"),
        (b'{"alerts": 7}', "run: Field required"),
        (json.dumps({**WIRE, "lifted": "1"}).encode(), "lifted: Input should be a valid int"),
        (json.dumps({**WIRE, "v": 2}).encode(), "v: Input should be 1"),
    ],
)
def test_a_record_that_is_not_a_run_view_is_refused_saying_why(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError, match="not a run view") as info:
        RunView.parse(raw)
    assert why in str(info.value)


class Reader:
    def __init__(self) -> None:
        self.seen: list[RunView | None] = []
        self.missed_: list[Exception] = []

    def see(self, view: RunView | None) -> None:
        self.seen.append(view)

    def missed(self, err: Exception) -> None:
        self.missed_.append(err)


def test_the_follower_feeds_every_reader_and_parses_each_record_once() -> None:
    source = Scripted(record())
    follower = RunViewFollower(source)  # not started: each look is the test's
    a, b = Reader(), Reader()
    follower.follow(a, 5.0)
    follower.follow(b, 0.5)
    assert follower.interval == 0.5  # the most eager reader's
    first, second = follower.look(), follower.look()
    assert first is second  # the same record: parsed once
    source.answer = b"nonsense"
    assert follower.look() is None
    source.answer = None  # serve does not know the run (yet)
    follower.look()
    assert a.seen == b.seen == [first, first, None]
    assert [str(e)[:16] for e in a.missed_] == ["not a run view: "]
    assert (follower.looks, follower.failures) == (3, 1)
    follower.drop(a)
    follower.look()
    assert len(a.seen) == 3
    assert len(b.seen) == 4
    follower.close()
    assert source.closed


@pytest.fixture
def emitter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Emitter, Scripted]]:
    """An emitter with a service behind it (nothing listens: its events wait in the spool),
    whose run view comes from a scripted source."""
    source = Scripted(None)
    monkeypatch.setattr(Emitter, "_view_source", lambda self, topic=None: source)
    em = Emitter(run="r", component="trainer", url=f"http://127.0.0.1:{free_port()}",
                 spool=tmp_path, heartbeat=False, stacks_interval=0.01)  # fmt: skip
    yield em, source
    em.close(timeout=0.5)


def test_one_follower_thread_feeds_the_guard_and_the_stack_responder(
    emitter: tuple[Emitter, Scripted],
) -> None:
    em, source = emitter
    guard = em.guard(rules={"zero_reward"}, poll_interval=0.01)
    responder = em._responder
    assert responder is not None
    assert responder.follower is guard.follower is em._follower
    readers = [t for t in threading.enumerate() if t.name.startswith("runwatch-view")]
    assert [t.name for t in readers] == ["runwatch-view-trainer"]
    assert not [t for t in threading.enumerate() if "guard" in t.name or "stacks" in t.name]

    source.answer = record(stacks="incident|r|1")
    wait_for(guard.should_pause, "the guard pauses")
    wait_for(lambda: responder.answered == {"incident|r|1"}, "the responder answers")

    # a record that is not a run view: the guard fails open, the responder counts a miss,
    # and the one thread goes on feeding both
    failures = responder.failures
    source.answer = json.dumps({**WIRE, "alerts": "all of them"}).encode()
    wait_for(lambda: not guard.should_pause() and not guard.decision.reachable, "fails open")
    wait_for(lambda: responder.failures > failures, "the responder saw the miss")
    source.answer = record(stacks="incident|r|2")
    wait_for(guard.should_pause, "the guard pauses again")
    wait_for(lambda: "incident|r|2" in responder.answered, "the responder answers again")
    assert [t for t in threading.enumerate() if t.name.startswith("runwatch-view")] == readers


def test_a_second_guard_and_the_responder_share_the_first_thread(
    emitter: tuple[Emitter, Scripted],
) -> None:
    em, _ = emitter
    first = em.guard(poll_interval=0.01)
    second = em.guard(poll_interval=0.01)
    assert first.closed
    assert second.follower is em._follower
    assert len([t for t in threading.enumerate() if t.name.startswith("runwatch-view")]) == 1


class Stuck(Scripted):
    """A source whose look never ends until the test lets it: a forked child's reader
    blocked on a lock its parent held at the fork."""

    def __init__(self) -> None:
        super().__init__(None)
        self.entered, self.release = threading.Event(), threading.Event()

    def fetch(self) -> bytes | None:
        self.entered.set()
        self.release.wait(120)
        return None


def test_close_is_bounded_by_its_timeout_when_the_view_reader_cannot_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Stuck()
    monkeypatch.setattr(Emitter, "_view_source", lambda self, topic=None: source)
    em = Emitter(run="r", component="trainer", url=f"http://127.0.0.1:{free_port()}",
                 spool=tmp_path, heartbeat=False, stacks_interval=0.01)  # fmt: skip
    reader = em._follower
    assert reader is not None
    wait_for(source.entered.is_set, "the reader is in its look")
    closing = threading.Thread(target=em.close, kwargs={"timeout": 0.2})
    closing.start()
    closing.join(60)
    stuck = closing.is_alive()
    source.release.set()  # let the look end either way: nothing outlives the test
    closing.join(60)
    reader._thread.join(60)
    assert not stuck, "close() waited on a reader that could not stop"
    assert source.closed  # released by the reader's thread once its look ended

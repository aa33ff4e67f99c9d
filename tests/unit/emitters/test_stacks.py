"""The emitter's stack responder: every thread's stack, bounded, no locals; each request
answered once; a source that fails costs a counted miss, never an exception."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from runwatch.emitters import events
from runwatch.emitters.runview import RunView, StacksAsked
from runwatch.emitters.stacks import MAX_BYTES, StackResponder, Taken, capture, py_spy


def waiting_in_a_function_of_mine(ready: threading.Event, done: threading.Event) -> None:
    secret = "hunter2"  # a local: it must never travel
    ready.set()
    done.wait(30)
    assert secret


def test_capture_names_each_thread_and_where_it_is_without_locals() -> None:
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=waiting_in_a_function_of_mine, args=(ready, done),
                              name="rollout-worker")  # fmt: skip
    worker.start()
    try:
        ready.wait(30)
        threads, truncated = capture()
    finally:
        done.set()
        worker.join()
    assert not truncated
    assert threads[0]["name"] == "MainThread"
    assert threads[0]["frames"][-1]["function"] == "capture"  # innermost last
    (mine,) = [t for t in threads if t["name"] == "rollout-worker"]
    functions = [f["function"] for f in mine["frames"]]
    assert "waiting_in_a_function_of_mine" in functions
    text = json.dumps(threads)
    assert "hunter2" not in text
    # what an event can carry
    events.validate({"v": 1, "id": "i", "ts": 1.0, "run": "r", "kind": "process.stacks",
                     "src": {"component": "trainer"}, "request": "incident|r|1",
                     "how": "emitter", "threads": threads, "truncated": truncated})  # fmt: skip


def deep(n: int, out: list[Any]) -> None:
    if n:
        deep(n - 1, out)
    else:
        out.append(capture())


def test_a_deep_stack_keeps_its_innermost_frames_and_says_so() -> None:
    got: list[Any] = []
    deep(200, got)
    ((threads, truncated),) = got
    assert truncated
    frames = threads[0]["frames"]
    assert len(frames) == events.MAX_STACK_FRAMES
    assert frames[-1]["function"] == "capture"
    assert len(json.dumps(threads)) < MAX_BYTES + 8_000


def asking(request: str | None) -> RunView:
    stacks = StacksAsked(request=request, at=1.0) if request is not None else None
    return RunView(run="r", ts=1.0, alerts=[], lifted=0, resumed=None, stacks=stacks)


def test_each_request_is_answered_once_and_failures_are_counted() -> None:
    answers: list[tuple[str, Taken]] = []
    responder = StackResponder(lambda req, taken: answers.append((req, taken)))
    responder.see(None)
    responder.missed(OSError("down"))
    for view in (asking(None), asking("i-1"), asking("i-1"), asking("i-2")):
        responder.see(view)
    assert [a for a, _ in answers] == ["i-1", "i-2"]
    assert answers[0][1].how == "emitter"
    assert responder.failures == 1


def test_py_spy_dumps_another_process_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `runwatch watch` answers with: the command's stacks from outside."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import time\ndef stuck_in_here():\n    while True:\n        time.sleep(0.05)\n"
        "print('go', flush=True)\nstuck_in_here()\n"
    )
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"go\n"
        taken = py_spy(child.pid)
        assert taken.error is None, taken.error
        (main,) = [t for t in taken.threads if t["name"] == "MainThread"]
        assert main["frames"][-1]["function"] == "stuck_in_here"  # innermost last
        assert main["frames"][-1]["file"] == str(script)
        monkeypatch.setenv("RUNWATCH_PY_SPY", str(tmp_path / "no-such-py-spy"))
        missing = py_spy(child.pid)
        assert (missing.threads, missing.error) == (
            [],
            "py-spy is not installed (pip install py-spy)",
        )
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_an_events_topic_of_another_name_leaves_stacks_unanswered_not_the_emitter_broken(
    tmp_path: Path,
) -> None:
    from runwatch.emitters import Emitter

    em = Emitter(run="r", component="trainer", kafka="127.0.0.1:9", topic="my-events",
                 spool=tmp_path, heartbeat=False)  # fmt: skip
    try:
        assert em._responder is None
        assert em.stacks_from(lambda: Taken("py-spy")) is False
    finally:
        em.close(timeout=0.1)

"""Suite-wide guards: a test may not leave threads or child processes behind.

A leaked thread or process outlives its test and makes later tests flaky or slow, so the
test that leaked fails, naming what it left. Threads and processes get a short grace period
to finish, since a clean `close()` may still be winding down when the test body returns.
Fixtures of a wider scope (a session-wide broker) start before the snapshot and are not
counted. `@pytest.mark.allow_leaks` opts a test out.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from helpers import child_pids, describe_pid, leftover_children, leftover_threads

#: Seconds new threads and child processes get to finish after the test body returned.
GRACE_S = 1.0


def pytest_configure(config: pytest.Config) -> None:
    # runwatch's own tests want a bad emit() to raise, not to be dropped and counted
    os.environ.setdefault("RUNWATCH_STRICT", "1")
    config.addinivalue_line(
        "markers", "allow_leaks: the test may leave threads or child processes behind"
    )


@pytest.fixture(autouse=True)
def _own_spool(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's emitters keep what they cannot send under a directory of its own, never
    in the user's ~/.cache, where another test (or a run before) left segments."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(autouse=True)
def _no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_leaks"):
        yield
        return
    threads_before = set(threading.enumerate())
    children_before = child_pids()
    yield
    deadline = time.monotonic() + GRACE_S
    threads = leftover_threads(threads_before, deadline)
    children = leftover_children(children_before, deadline)
    problems = []
    if threads:
        names = ", ".join(f"{t.name} (daemon={t.daemon})" for t in threads)
        problems.append(f"threads left running: {names}")
    if children:
        procs = ", ".join(describe_pid(p) for p in sorted(children))
        problems.append(f"child processes left behind: {procs}")
    if problems:
        pytest.fail("test leaked resources: " + "; ".join(problems), pytrace=False)

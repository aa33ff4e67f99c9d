"""Suite-wide guards: a test may not leave threads or child processes behind.

A leaked thread or process outlives its test and makes later tests flaky or slow, so the
test that leaked fails, naming what it left. Threads and processes get a short grace period
to finish, since a clean `close()` may still be winding down when the test body returns.
Fixtures of a wider scope (a session-wide broker) start before the snapshot and are not
counted. `@pytest.mark.allow_leaks` opts a test out.

Nor may a test drop a socket or a file unclosed: its ResourceWarning is an error
(pyproject.toml), and so is the warning pytest makes of it when it is warned in a finalizer,
where it cannot be raised. One dropped in a reference cycle warns only when the garbage is
collected: after each test outside tests/unit (the servers' tests, where the sockets are) it
is collected at once, so the test that dropped it fails, not a later one. The unit tests
leave it to the collector's pace: a full collection after each of thousands would cost the
inner loop minutes.

Nor may the suite write into the user's cache. An emitter that cannot send keeps its events
under `$XDG_CACHE_HOME/runwatch/spool` (else `~/.cache/...`): each test gets a cache of its
own (`_own_spool`), and the session one beneath it, for the fixtures of a wider scope that
start before a test's (a module's serve and watches). The session's HOME is a copy of the
user's made of links, but for `~/.cache/runwatch`: whatever this session's processes write
there, having lost the cache they were given, fails the run (`_guard_report`), and the
user's own directory is never touched -- other test sessions share it.

Nor may a property test depend on how fast this machine is: hypothesis's default deadline
(200 ms an example) fails a test that a loaded 2-core machine merely runs slowly, so the
suite's profile has none.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import child_pids, describe_pid, leftover_children, leftover_threads
from hypothesis import settings

settings.register_profile("runwatch", deadline=None)
settings.load_profile("runwatch")

#: Seconds new threads and child processes get to finish after the test body returned.
GRACE_S = 1.0
#: The tests whose garbage is left to the collector's pace (see the module's docstring).
UNIT_TESTS = Path(__file__).parent / "unit"


#: The session's own directory (its HOME and cache), shared by xdist's workers.
SESSION_VAR = "RUNWATCH_TESTS_SESSION_DIR"
#: The user's cache of runwatch, as this session's processes would reach it through HOME.
GUARDED = Path(".cache", "runwatch")
#: In the session's directory: the first test after which GUARDED was there.
FIRST_SEEN = "first-seen-after"


def _links_to(real: Path, into: Path, leave_out: str) -> None:
    """Make `into` hold a link to each entry of `real` but `leave_out` (tools keep their
    settings and caches; only runwatch's is left out)."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in real.iterdir() if real.is_dir() else ():
        if entry.name != leave_out:
            (into / entry.name).symlink_to(entry)


def _own_session_cache() -> Path | None:
    """Point HOME and XDG_CACHE_HOME at this session's directory; None in an xdist worker,
    whose controller did (the workers inherit its environment, and it checks at the end)."""
    if os.environ.get(SESSION_VAR):
        return None
    session = Path(tempfile.mkdtemp(prefix="runwatch-tests-"))
    home = Path(os.path.expanduser("~"))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    _links_to(home, session / "home", ".cache")
    _links_to(home / ".cache", session / "home" / ".cache", "runwatch")
    _links_to(cache, session / "cache", "runwatch")
    os.environ.update(
        {SESSION_VAR: str(session), "HOME": str(session / "home"),
         "XDG_CACHE_HOME": str(session / "cache")}
    )  # fmt: skip
    return session


def _guard_report(session: Path) -> str:
    """What this session's processes wrote under HOME's ~/.cache/runwatch, or ""."""
    guarded = session / "home" / GUARDED
    if not guarded.exists():
        return ""
    found = []
    for destination in sorted(guarded.glob("spool/*/destination.json")):
        try:
            where = json.loads(destination.read_text())
        except (OSError, ValueError):
            where = "?"
        files = sorted(p.name for p in destination.parent.iterdir())
        found.append(f"  {destination.parent.name}: {where}; {files}")
    try:
        first = (session / FIRST_SEEN).read_text()
    except OSError:
        first = "(before the first test ended, or after the last)"
    return (f"the suite wrote under the user's cache (~/{GUARDED}, here {guarded}), its "
            f"emitters having lost the cache the suite gave them; first seen after {first}\n"
            + "\n".join(found or [f"  {p}" for p in sorted(guarded.rglob("*"))]))  # fmt: skip


_session: Path | None = None
_guard_failed = ""


def pytest_configure(config: pytest.Config) -> None:
    global _session
    # runwatch's own tests want a bad emit() to raise, not to be dropped and counted
    os.environ.setdefault("RUNWATCH_STRICT", "1")
    _session = _own_session_cache()
    config.addinivalue_line(
        "markers", "allow_leaks: the test may leave threads or child processes behind"
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    global _guard_failed
    if _session is None:
        return
    _guard_failed = _guard_report(_session)
    if _guard_failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        shutil.rmtree(_session, ignore_errors=True)  # links are removed, never followed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _guard_failed:
        terminalreporter.section("runwatch: the user's cache", sep="=", red=True, bold=True)
        terminalreporter.write_line(_guard_failed)


@pytest.fixture(scope="session")
def _caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each test's cache is made, numbered by `_cache_numbers`: not one `mktemp` a test
    in the session's temp directory, which lists that directory to number the next one (a
    test's cost grew with the tests before it: seconds a `make unit` worker)."""
    return tmp_path_factory.mktemp("caches")


_cache_numbers = itertools.count()


@pytest.fixture(autouse=True)
def _own_spool(
    request: pytest.FixtureRequest, _caches: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Each test's emitters keep what they cannot send under a directory of its own, never
    in the user's ~/.cache, where another test (or a run before) left segments."""
    cache = _caches / str(next(_cache_numbers))
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    yield
    session = Path(os.environ.get(SESSION_VAR) or "/nonexistent")
    if (session / "home" / GUARDED).exists():  # one stat a test: which test (or fixture)
        try:
            with (session / FIRST_SEEN).open("x") as first:  # the first worker to see it
                first.write(request.node.nodeid)
        except OSError:
            pass


def _collect(request: pytest.FixtureRequest) -> None:
    """Collect the garbage a test left, but for the sockets kafka-python drops itself.

    kafka-python 3.0.12 drops a socket when a client closes while one of its connects is in
    flight (kafka/net/inet.py's `connect` makes it, and nothing closes it once the task is
    cancelled): an unclosed socket to the session's broker is that library's, not the test's.
    A client the test forgot to close still fails it, by the network thread it leaves.
    """
    with warnings.catch_warnings():
        if "kafka_broker" in request.fixturenames:
            host, port = request.getfixturevalue("kafka_broker").rsplit(":", 1)
            peer = re.escape(f"raddr=('{host}', {port})>")
            unclosed = rf"unclosed <socket\.socket .*{peer}"
            warnings.filterwarnings("ignore", unclosed, ResourceWarning)
        gc.collect()


@pytest.fixture(autouse=True)
def _no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_leaks"):
        yield
        return
    threads_before = set(threading.enumerate())
    children_before = child_pids()
    yield
    if not request.node.path.is_relative_to(UNIT_TESTS):
        _collect(request)  # what it dropped in a cycle warns now, against this test
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

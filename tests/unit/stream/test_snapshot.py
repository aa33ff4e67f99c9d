"""Checkpoints pickled in a forked child: the state as it was at the fork, whatever the parent
applies meanwhile; a child that dies or is abandoned leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

import orjson
import pytest

from runwatch.dev.scenarios import sandbox_hang, zero_reward
from runwatch.stream import checkpoint
from runwatch.stream.config import RulesConfig
from runwatch.stream.exceptions import SnapshotFailed
from runwatch.stream.kafka.snapshot import Snapshot
from runwatch.stream.live import LiveDriver


def fresh() -> LiveDriver:
    return LiveDriver(RulesConfig.default(), topic="runwatch.events", partition=0)


def fed(driver: LiveDriver, events: list[dict[str, object]], first: int = 0) -> LiveDriver:
    for i, event in enumerate(events, first):
        driver.feed([(orjson.dumps(event), float(event["ts"]) + 0.05, i)])  # type: ignore[arg-type]
    return driver


def beyond_a_pipe() -> LiveDriver:
    """A state whose checkpoint is larger than a pipe holds (64 KiB): its child cannot have
    finished before the parent reads (10,000 event ids, random, do not compress)."""
    src = {"component": "trainer", "host": "h", "pid": 1}
    events = [{"v": 1, "id": uuid.uuid4().hex, "ts": 1.7e9 + i, "run": "r", "kind": "heartbeat",
               "src": src} for i in range(10_000)]  # fmt: skip
    driver = fed(fresh(), events)
    assert len(checkpoint.dump(driver, {"offset": 1})) > 1 << 16
    return driver


def reaped(pid: int) -> bool:
    """Whether `pid`, a child of this process, is gone and waited for (only that child is
    asked: the others, a broker of the session say, are none of this test's business)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_child_writes_the_state_as_it_was_at_the_fork() -> None:
    async def case() -> tuple[bytes, LiveDriver]:
        driver = fed(fresh(), sandbox_hang()[:200])
        snapshot = Snapshot(driver, {"offset": 200}, fork=True)
        children.append(snapshot._pid)
        fed(driver, zero_reward()[:50], first=200)  # the parent goes on meanwhile
        return await snapshot.data(), driver

    children: list[int] = []
    data, parent = asyncio.run(case())
    loaded = fresh()
    assert checkpoint.load(data, loaded) == {"offset": 200}
    assert set(loaded.engine.runs) == {"grpo-qwen2.5-7b-sandbox"}
    assert len(parent.engine.runs) == 2  # the later run is the parent's alone
    assert data == checkpoint.dump(fed(fresh(), sandbox_hang()[:200]), {"offset": 200})
    assert reaped(children[0])


def test_without_fork_it_pickles_in_place() -> None:
    driver = fed(fresh(), sandbox_hang()[:50])
    snapshot = Snapshot(driver, {"offset": 50}, fork=False)
    assert asyncio.run(snapshot.data()) == checkpoint.dump(driver, {"offset": 50})


def test_a_child_that_dies_is_a_failure_and_is_reaped() -> None:
    async def case() -> None:
        snapshot = Snapshot(beyond_a_pipe(), {"offset": 1}, fork=True)
        children.append(snapshot._pid)
        os.kill(snapshot._pid, signal.SIGKILL)  # blocked on the full pipe: still there
        with pytest.raises(SnapshotFailed):
            await snapshot.data()

    children: list[int] = []
    asyncio.run(case())
    assert reaped(children[0])


def test_a_snapshot_abandoned_on_the_way_leaves_no_child() -> None:
    async def case() -> None:
        snapshot = Snapshot(beyond_a_pipe(), {"offset": 1}, fork=True)
        children.append(snapshot._pid)
        task = asyncio.create_task(snapshot.data())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    children: list[int] = []
    asyncio.run(case())
    assert reaped(children[0])

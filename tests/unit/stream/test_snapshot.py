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
        snapshot = Snapshot([(driver, {"offset": 200})], fork=True)
        children.append(snapshot._pid)
        fed(driver, zero_reward()[:50], first=200)  # the parent goes on meanwhile
        (data,) = await snapshot.data()
        assert data is not None
        return data, driver

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
    snapshot = Snapshot([(driver, {"offset": 50})], fork=False)
    assert asyncio.run(snapshot.data()) == [checkpoint.dump(driver, {"offset": 50})]


def test_a_child_that_dies_is_a_failure_and_is_reaped() -> None:
    async def case() -> None:
        snapshot = Snapshot([(beyond_a_pipe(), {"offset": 1})], fork=True)
        children.append(snapshot._pid)
        os.kill(snapshot._pid, signal.SIGKILL)  # blocked on the full pipe: still there
        with pytest.raises(SnapshotFailed):
            await snapshot.data()

    children: list[int] = []
    asyncio.run(case())
    assert reaped(children[0])


def test_a_snapshot_abandoned_on_the_way_leaves_no_child() -> None:
    async def case() -> None:
        snapshot = Snapshot([(beyond_a_pipe(), {"offset": 1})], fork=True)
        children.append(snapshot._pid)
        task = asyncio.create_task(snapshot.data())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    children: list[int] = []
    asyncio.run(case())
    assert reaped(children[0])


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-place"])
def test_one_child_makes_the_checkpoints_of_several_partitions(fork: bool) -> None:
    """A worker's round of checkpoints forks once (the parent pays for each fork, not only
    the child): each partition's checkpoint comes back as its own, in order, as dumping
    that driver alone gives it -- one larger than a pipe among them."""
    drivers = [fed(fresh(), sandbox_hang()[:120]), beyond_a_pipe(), fed(fresh(), zero_reward())]
    parts = [(d, {"offset": k}) for k, d in enumerate(drivers)]

    async def case() -> list[bytes | None]:
        snapshot = Snapshot(parts, fork=fork)
        if fork:
            children.append(snapshot._pid)
        for d in drivers:  # the parent goes on meanwhile
            fed(d, zero_reward()[:20], first=10_000)
        return await snapshot.data()

    children: list[int] = []
    first, second, third = asyncio.run(case())
    assert first == checkpoint.dump(fed(fresh(), sandbox_hang()[:120]), {"offset": 0})
    assert third == checkpoint.dump(fed(fresh(), zero_reward()), {"offset": 2})
    assert second is not None
    loaded = fresh()
    assert checkpoint.load(second, loaded) == {"offset": 1}
    assert len(loaded.engine.seen) == 10_000  # as it was at the fork
    assert all(reaped(pid) for pid in children)


def test_a_state_that_cannot_be_pickled_leaves_the_others_checkpoints_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken, good = fed(fresh(), sandbox_hang()[:50]), fed(fresh(), zero_reward())
    monkeypatch.setattr(broken, "dump_state", lambda: {"unpicklable": lambda: None})

    async def case() -> list[bytes | None]:
        snapshot = Snapshot([(broken, {"offset": 1}), (good, {"offset": 2})], fork=True)
        children.append(snapshot._pid)
        return await snapshot.data()

    children: list[int] = []
    assert asyncio.run(case()) == [None, checkpoint.dump(good, {"offset": 2})]
    assert reaped(children[0])

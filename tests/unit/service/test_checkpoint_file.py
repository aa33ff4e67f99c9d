"""`runwatch serve`'s checkpoint store, a file beside its logs
(`runwatch/service/checkpoint_file.py`), and when serve writes it: the one `Checkpointer`,
every `checkpoint_every` seconds with something new, at once on a compaction or a stop."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from runwatch.service.checkpoint_file import FileCheckpoints
from runwatch.service.core import Service


def test_the_file_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    store = FileCheckpoints(tmp_path / "state.ckpt")

    async def scenario() -> list[bytes | None]:
        out = [await store.read(0)]
        await store.write(0, b"first")
        await store.write(0, b"second")
        out.append(await store.read(0))
        return out

    assert asyncio.run(scenario()) == [None, b"second"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.ckpt"]  # no temporary left


def test_a_file_that_cannot_be_read_or_written_raises(tmp_path: Path) -> None:
    (tmp_path / "state.ckpt").mkdir()  # a directory where the file should be
    store = FileCheckpoints(tmp_path / "state.ckpt")
    with pytest.raises(IsADirectoryError):
        asyncio.run(store.read(0))
    with pytest.raises(IsADirectoryError):
        asyncio.run(store.write(0, b"x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.ckpt"]


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def beat(ident: str) -> bytes:
    src = {"component": "trainer", "host": "h", "pid": 1}
    return json.dumps({"v": 1, "id": ident, "ts": time.time(), "run": "r", "kind": "heartbeat",
                       "src": src}).encode()  # fmt: skip


def test_serve_checkpoints_when_due_and_at_once_when_asked(tmp_path: Path) -> None:
    clock = Clock()
    service = Service(tmp_path / "h.duckdb", tmp_path / "wal", clock=clock, checkpoint_every=60)
    written: list[Any] = []
    write = service.checkpoint_store.write

    async def noted(partition: int, data: bytes) -> None:
        written.append(clock.now)
        await write(partition, data)

    service.checkpoint_store.write = noted  # type: ignore[method-assign]
    try:
        service.recover()
        service.ingest([beat("a")])
        assert service.checkpoint(at_once=False) is None  # the interval has not passed
        clock.now += 60
        assert service.checkpoint(at_once=False)  # it has, with something new
        clock.now += 120
        assert service.checkpoint(at_once=False) is None  # nothing new since
        assert service.checkpoint() is None  # not even at once
        service.ingest([beat("b")])
        assert service.checkpoint()  # a compaction, a stop: at once
    finally:
        service.close()
    assert len(written) == 2
    assert (tmp_path / "wal" / "state.ckpt").exists()

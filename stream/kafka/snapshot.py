"""A checkpoint made off the live path: the worker forks, the child pickles the state as it
was at the fork and hands the bytes back through a pipe, and the parent goes on applying
events meanwhile (copy-on-write keeps the child's view fixed) -- Redis's BGSAVE.

Pickling thousands of live runs takes seconds (bench/RESULTS.md, "A checkpoint of many live
runs"); done in place, those are seconds in which no event is applied and no timer turns.
Forked, the live path stops only for the fork itself (the page tables' copy). The child
touches nothing but the state and the pipe and leaves with `os._exit`, so the locks, sockets
and threads it inherits from the parent (aiokafka's, the event loop's) are never used in it.
Where `os.fork` is missing, `Snapshot` pickles in place.

One child makes the checkpoints of every partition due at once: a fork costs the parent
more than the page tables' copy -- every page it writes while the child lives is copied
(the live path writes all over the run states), which on a worker's heap is more CPU than
the pickling saves it -- so the worker forks once per round of checkpoints, not once per
partition (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct
from collections.abc import Sequence
from typing import Any

from runwatch.stream import checkpoint
from runwatch.stream.exceptions import SnapshotFailed
from runwatch.stream.live import LiveDriver

#: whether this platform can fork (Linux and macOS: yes)
CAN_FORK = hasattr(os, "fork")


#: before each checkpoint the child writes: its length, or FAILED where it could not be made
_LENGTH = struct.Struct(">q")
FAILED = -1


class Snapshot:
    """Checkpoints in the making, of one driver or several (each with the position it
    covers): started now (the states as they are now), bytes later."""

    def __init__(self, parts: Sequence[tuple[LiveDriver, Any]], fork: bool = CAN_FORK) -> None:
        self._count = len(parts)
        self._data: list[bytes | None] | None = None
        self._pid = 0
        self._read = -1
        if not fork:
            self._data = [checkpoint.dump(driver, position) for driver, position in parts]
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: pickle, write, leave without running anything else
            code = 1
            try:
                os.close(read)
                for driver, position in parts:
                    _write_all(write, _framed(driver, position))
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self._pid, self._read = pid, read

    async def data(self) -> list[bytes | None]:
        """The checkpoints' bytes, in order (None: that one could not be made), once the
        child has written them all and left. Read on the event loop (the pipe is
        non-blocking): no thread, nothing to wait for on cancel. Raises SnapshotFailed
        where the child did not finish."""
        if self._data is not None:
            return self._data
        try:
            data = await _read_all(self._read)
            while True:
                pid, status = os.waitpid(self._pid, os.WNOHANG)
                if pid:
                    break
                await asyncio.sleep(0.005)  # it has closed the pipe: it is leaving
        except BaseException:
            self.abandon()
            raise
        self._pid = 0
        self.abandon()  # the pipe
        if os.waitstatus_to_exitcode(status) != 0:
            raise SnapshotFailed(f"the child making the checkpoint ended with status {status}")
        self._data = _unframed(data, self._count)
        return self._data

    def abandon(self) -> None:
        """Stop a child still at work (the worker stops, the partition went elsewhere)."""
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = 0
        if self._read >= 0:
            os.close(self._read)
            self._read = -1


def _framed(driver: LiveDriver, position: Any) -> bytes:
    """One checkpoint as the child writes it: its length and bytes, or FAILED (one state
    that cannot be pickled leaves the others' checkpoints made)."""
    try:
        data = checkpoint.dump(driver, position)
    except Exception:
        return _LENGTH.pack(FAILED)
    return _LENGTH.pack(len(data)) + data


def _unframed(data: bytes, count: int) -> list[bytes | None]:
    """The `count` checkpoints a child wrote (`_framed`)."""
    out: list[bytes | None] = []
    at = 0
    try:
        for _ in range(count):
            (length,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            out.append(None if length == FAILED else data[at : at + length])
            at += max(length, 0)
    except struct.error:  # (it ended early)
        at = -1
    if at != len(data):
        raise SnapshotFailed(f"the child wrote {len(data)} bytes, not {count} checkpoints")
    return out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _read_all(fd: int) -> bytes:
    """Everything until the writer closes its end, read as it becomes readable."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        except BlockingIOError:
            return  # more to come
        except OSError as err:
            if not ended.done():
                ended.set_exception(err)
            return
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
    return b"".join(chunks)

"""A checkpoint made off the live path: the worker forks, the child pickles the state as it
was at the fork and hands the bytes back through a pipe, and the parent goes on applying
events meanwhile (copy-on-write keeps the child's view fixed) -- Redis's BGSAVE.

Pickling thousands of live runs takes seconds (bench/RESULTS.md, "A checkpoint of many live
runs"); done in place, those are seconds in which no event is applied and no timer turns.
Forked, the live path stops only for the fork itself (the page tables' copy). The child
touches nothing but the state and the pipe and leaves with `os._exit`, so the locks, sockets
and threads it inherits from the parent (aiokafka's, the event loop's) are never used in it.
Where `os.fork` is missing, `Snapshot` pickles in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from runwatch.stream import checkpoint
from runwatch.stream.exceptions import SnapshotFailed
from runwatch.stream.live import LiveDriver

#: whether this platform can fork (Linux and macOS: yes)
CAN_FORK = hasattr(os, "fork")


class Snapshot:
    """One checkpoint in the making: started now (the state as it is now), bytes later."""

    def __init__(self, driver: LiveDriver, position: Any, fork: bool = CAN_FORK) -> None:
        self._data: bytes | None = None
        self._pid = 0
        self._read = -1
        if not fork:
            self._data = checkpoint.dump(driver, position)
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: pickle, write, leave without running anything else
            code = 1
            try:
                os.close(read)
                _write_all(write, checkpoint.dump(driver, position))
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self._pid, self._read = pid, read

    async def data(self) -> bytes:
        """The checkpoint's bytes, once the child has written them all and left. Read on the
        event loop (the pipe is non-blocking): no thread, nothing to wait for on cancel."""
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
        self._data = data
        return data

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

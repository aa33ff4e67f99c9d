"""The service's write-ahead logs: what was acknowledged, and which alerts were published.

`EventLog`: each accepted request appends `#t=<arrival>`, its event lines and a `#x=` line
per line it refused (a dead letter: source, reason, the raw line), then fsyncs; only then
is the request answered. The byte offset after a line is its position; the history
records up to which position (of which generation: `#g=`, the first line, counts the
rewrites of compaction) it holds, so it writes exactly the missing records and never waits
the service. The whole log is re-read on restart to rebuild the rules' state.

Damage is skipped, not obeyed: a torn, unterminated tail (a crash mid-write; never
acknowledged) is cut at the last newline however long it is, and inside the log a line
that is not a record -- a run of NUL bytes left by a crash, a marker that does not parse --
is passed over, keeping every intact record before and after it.

`AlertLog`: every alert transition is appended and fsynced *before* it is notified, so a
restarted service knows what it already said and never says it twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from runwatch.exceptions import LogsInUse
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.refused import Refused

log = logging.getLogger("runwatch.serve")

ARRIVAL, GENERATION, DEAD = b"#t=", b"#g=", b"#x="
CHUNK = 1 << 20


def _append(fd: int, size: int, data: bytes) -> None:
    """Write at the end and fsync, or leave the file as it was (a full disk, say): a record
    is in the log whole or not at all."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):  # else the torn tail is cut at the next start
            os.ftruncate(fd, size)
        raise


def replace_file(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: beside it, fsynced, then renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _cut_torn_tail(path: Path, fd: int) -> int:
    """Cut what follows the last newline (a write a crash interrupted); the new size."""
    size = os.fstat(fd).st_size
    end = size
    with path.open("rb") as f:
        while end > 0:
            start = max(0, end - CHUNK)
            f.seek(start)
            nl = f.read(end - start).rfind(b"\n")
            if nl >= 0:
                end = start + nl + 1
                break
            end = start
    if end != size:
        log.warning("%s: dropped a torn tail of %d bytes (a write a crash cut)", path, size - end)
        os.truncate(path, end)
    return end


def _repair(line: bytes) -> bytes:
    """A line of the log as written: NUL bytes a crash left are not part of any record."""
    if b"\0" in line:
        return line[line.rfind(b"\0") + 1 :]
    return line


def _lines(path: Path, start: int, stop: int) -> Iterator[tuple[bytes, int]]:
    """(line, offset after it) of the whole lines of a log between two offsets, the
    newline off and NUL damage repaired."""
    pos = start
    with path.open("rb") as f:
        f.seek(start)
        for line in f:
            pos += len(line)
            if pos > stop:
                return
            yield _repair(line.rstrip(b"\n")), pos


def dead_line(refused: Refused) -> bytes:
    """A refused line as the log keeps it: `#x=` and [source, reason, raw line]."""
    text = refused.raw.decode("utf-8", "surrogateescape")
    return DEAD + json.dumps([refused.source, refused.reason, text]).encode()


def parse_dead(line: bytes) -> Refused | None:
    try:
        source, reason, text = json.loads(line[len(DEAD) :])
        return Refused(str(reason), str(text).encode("utf-8", "surrogateescape"), str(source))
    except (ValueError, TypeError, UnicodeError):
        return None


class EventLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = _cut_torn_tail(path, self._fd)
        self.generation = self._generation()
        self.damaged = 0  # lines passed over by the last read

    def _generation(self) -> int:
        with self.path.open("rb") as f:
            first = f.readline(64)
        if first.startswith(GENERATION):
            try:
                return int(first[len(GENERATION) :])
            except ValueError:
                pass
        return 0

    def append(
        self, arrival: float, lines: Sequence[bytes], dead: Sequence[Refused] = ()
    ) -> list[int]:
        """Append and fsync; returns each event line's end offset (its position)."""
        head = ARRIVAL + repr(arrival).encode() + b"\n"
        body = b"".join(line + b"\n" for line in lines)
        letters = b"".join(dead_line(d) + b"\n" for d in dead)
        _append(self._fd, self.size, head + body + letters)
        ends, pos = [], self.size + len(head)
        for line in lines:
            pos += len(line) + 1
            ends.append(pos)
        self.size += len(head) + len(body) + len(letters)
        return ends

    def scan(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[bytes, int]]:
        """(line, offset after it) of every line between two offsets, damage repaired."""
        for line, pos in _lines(self.path, start, self.size if stop is None else stop):
            if line.startswith((b"{", b"#")):
                yield line, pos
            elif line:
                self.damaged += 1

    def read(self, start: int = 0) -> Iterator[tuple[bytes, float, int]]:
        """(line, arrival, end offset) of every event in the log from `start` (the start
        of a request's record), in order."""
        self.damaged = 0
        arrival = 0.0
        for line, pos in self.scan(start):
            if line.startswith(ARRIVAL):
                try:
                    t = float(line[len(ARRIVAL) :])
                except ValueError:
                    t = math.nan
                if math.isfinite(t):
                    arrival = t
                else:
                    self.damaged += 1
            elif not line.startswith(b"#"):
                yield line, arrival, pos

    def rewrite(self, keep: Callable[[bytes], bool]) -> int:
        """Keep only the events `keep` accepts (with their arrival headers), as the next
        generation; returns the new size. Written beside, fsynced, then renamed over the log:
        a crash leaves one or the other whole."""
        tmp = self.path.with_suffix(".compact")
        with tmp.open("wb") as out:
            out.write(GENERATION + str(self.generation + 1).encode() + b"\n")
            arrival: float | None = None
            for line, t, _ in self.read():
                if not keep(line):
                    continue
                if t != arrival:
                    out.write(ARRIVAL + repr(t).encode() + b"\n")
                    arrival = t
                out.write(line + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.generation += 1
        return self.size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class AlertLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        with path.open("rb") as f:
            f.seek(max(0, self.size - 1))
            if self.size and f.read(1) != b"\n":  # end a half-written line: the next starts clean
                _append(self._fd, self.size, b"\n")
                self.size += 1

    def read(self, start: int = 0, stop: int | None = None) -> list[Alert]:
        """The transitions between two offsets (a torn or damaged line is passed over)."""
        return [a for a, _ in self.scan(start, stop)]

    def scan(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[Alert, int]]:
        for line, pos in _lines(self.path, start, self.size if stop is None else stop):
            try:
                yield Alert.from_json(line), pos
            except InvalidAlert:
                continue  # a half-written line: that transition was never notified

    def append(self, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        data = b"".join(a.to_json() + b"\n" for a in alerts)
        _append(self._fd, self.size, data)
        self.size += len(data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LogsLock:
    """One service per set of logs: an exclusive lock on `lock` in their directory, held for
    the process's life (the kernel lets go of it when the process dies, kill -9 included)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "lock"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._fd)
            raise LogsInUse(
                f"{directory} is in use by another runwatch serve (pid {holder}); "
                "one service per --db/--wal: stop it first, or give this one its own --db"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

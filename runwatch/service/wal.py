"""The service's write-ahead logs: what was acknowledged, and which alerts were published.

`EventLog`: each accepted request appends `#t=<arrival>` and its event lines, then fsyncs;
only then is the request answered 200. The byte offset after a line is that event's
position; the DuckDB history records up to which position it holds the events (in the same
transaction as the rows), so a restart writes exactly the missing ones. The whole log is
re-read on restart to rebuild the rules' state (like the Kafka worker re-reads its
partition), keeping live verdicts equal to a replay.

`AlertLog`: every alert transition is appended and fsynced *before* it is notified, so a
restarted service knows what it already said and never says it twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert


class EventLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = self._trim()

    def _trim(self) -> int:
        """Drop a half-written tail (a crash in the middle of a write): it was never acked."""
        size = os.fstat(self._fd).st_size
        if size == 0:
            return 0
        with self.path.open("rb") as f:
            f.seek(max(0, size - 65536 * 4))
            tail = f.read()
        if tail.endswith(b"\n"):
            return size
        cut = tail.rfind(b"\n")
        keep = size - len(tail) + cut + 1 if cut >= 0 else 0
        os.truncate(self.path, keep)
        return keep

    def append(self, arrival: float, lines: Sequence[bytes]) -> list[int]:
        """Append and fsync; returns each line's end offset (its position)."""
        head = f"#t={arrival!r}\n".encode()
        data = head + b"\n".join(lines) + b"\n"
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)
        ends, pos = [], self.size + len(head)
        for line in lines:
            pos += len(line) + 1
            ends.append(pos)
        self.size += len(data)
        return ends

    def read(self) -> Iterator[tuple[bytes, float, int]]:
        """(line, arrival, end offset) of every event in the log, in order."""
        arrival, pos = 0.0, 0
        with self.path.open("rb") as f:
            for line in f:
                pos += len(line)
                if pos > self.size:
                    return
                if line.startswith(b"#t="):
                    arrival = float(line[3:])
                    continue
                yield line.rstrip(b"\n"), arrival, pos

    def rewrite(self, keep: Callable[[bytes], bool]) -> int:
        """Keep only the events `keep` accepts (with their arrival headers); returns the new
        size. Written beside, fsynced, then renamed over the log: a crash leaves one or the
        other whole."""
        tmp = self.path.with_suffix(".compact")
        with tmp.open("wb") as out:
            arrival: float | None = None
            for line, t, _ in self.read():
                if not keep(line):
                    continue
                if t != arrival:
                    out.write(f"#t={t!r}\n".encode())
                    arrival = t
                out.write(line + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        return self.size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class AlertLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            os.write(self._fd, b"\n")  # end a half-written line: the next starts clean

    def read(self) -> list[Alert]:
        out = []
        for line in self.path.read_bytes().splitlines():
            try:
                out.append(Alert.from_json(line))
            except InvalidAlert:
                continue  # a half-written last line: that transition was never notified
        return out

    def append(self, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        data = b"".join(a.to_json() + b"\n" for a in alerts)
        os.write(self._fd, data)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

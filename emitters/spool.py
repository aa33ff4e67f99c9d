"""Per-process JSON Lines segments on disk: the file destination, and Kafka's fallback.

One process writes `<dir>/events-<host>-<pid>-<n>-<seq>.jsonl`: append-only segments, one event
per line, rotated at `segment_bytes`; `seq` orders them. Every write is whole lines in one
`os.write` on an `O_APPEND` descriptor, with no user-space buffer, so a forked child never
re-flushes its parent's half-written buffer and a reader sees only whole lines (a reader
should still stop at the last newline: a full disk can cut a write short).

A hard limit (`max_bytes`, this process's segments together) bounds the disk used while a
broker is away; past it events are dropped and *counted* (`dropped`), and the emitter reports
the count in its heartbeats, which pass the limit for that reason (`Priority`).

Not thread-safe by itself: callers hold `lock` around every method but `read`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("runwatch.emitters")

#: Segment names: events-<host>-<pid>-<n>-<seq>.jsonl, `n` counting the spools of a process
#: (host with odd characters replaced by `_`).
SEGMENT_SUFFIX = ".jsonl"
_SEQ_DIGITS = 10
_RECOUNT_EVERY_S = 1.0
_SPOOLS = itertools.count()


class Priority(str):
    """A line the size limit lets through (heartbeats: they carry the count of drops)."""

    __slots__ = ()


#: In a destination's spool directory: where its segments were going (`runwatch spool`).
DESTINATION_FILE = "destination.json"


def default_base() -> Path:
    """Where emitters keep events they could not send yet, by destination."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "runwatch" / "spool"


def destination_dir(base: Path, identity: dict[str, str]) -> Path:
    """The spool directory of one destination under `base`: events spooled for a broker or
    a service are only ever sent there -- by a later emitter with the same destination, or
    `runwatch spool flush` -- never to another one that happens to share the base."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return Path(base) / f"{identity['kind']}-{digest}"


def read_destination(directory: Path) -> dict[str, str] | None:
    """Where a spool directory's segments go, as its emitter wrote it; None if unknown."""
    try:
        found = json.loads((directory / DESTINATION_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else None


def _safe_host(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"


def this_host() -> str:
    """This host, as segment names spell it."""
    return _safe_host(socket.gethostname())


class Spool:
    """This process's segments in `directory`; see the module docstring for the format."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = 1 << 30,
        segment_bytes: int = 16 << 20,
        prefix: str = "events",
        destination: dict[str, str] | None = None,
        max_age: float | None = None,
    ) -> None:
        self.directory = Path(directory)
        #: segments older than this (s, by their last write) are dropped, not sent (`expire`)
        self.max_age = max_age
        self.destination = destination  # written beside the first segment
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        host, pid, nth = _safe_host(socket.gethostname()), os.getpid(), next(_SPOOLS)
        #: This spool's segments start with this; `nth` keeps two emitters of one process
        #: apart (one replaying and removing segments that the other still appends to).
        self.prefix = f"{prefix}-{host}-{pid}-{nth}-"
        self._host_prefix = f"{prefix}-{host}-"
        self.lock = threading.Lock()
        #: Events this spool could not keep: over the limit, or the disk refused them.
        self.dropped = 0
        self._seq = -1  # next segment number; -1 until the directory was looked at
        self._fd = -1
        self._fd_size = 0
        self._bytes = 0
        self._recounted_at = 0.0
        self._complained_at = float("-inf")

    # --- naming and accounting -------------------------------------------------------------

    def _path(self, seq: int) -> Path:
        return self.directory / f"{self.prefix}{seq:0{_SEQ_DIGITS}d}{SEGMENT_SUFFIX}"

    def _scan(self) -> list[tuple[int, Path, int]]:
        """(seq, path, size) of this process's segments, oldest first."""
        found = []
        try:
            entries = list(os.scandir(self.directory))
        except OSError:  # not there yet, or not a directory: writing will say why
            return []
        for entry in entries:
            name = entry.name
            if not (name.startswith(self.prefix) and name.endswith(SEGMENT_SUFFIX)):
                continue
            digits = name[len(self.prefix) : -len(SEGMENT_SUFFIX)]
            if len(digits) == _SEQ_DIGITS and digits.isdigit():
                try:
                    found.append((int(digits), Path(entry.path), entry.stat().st_size))
                except FileNotFoundError:
                    continue
        return sorted(found)

    def _start(self) -> None:
        """Look at the directory once: segments left by an earlier process with our pid on
        this host become our backlog, and our numbering continues after them."""
        if self._seq >= 0:
            return
        existing = self._scan()
        self._seq = existing[-1][0] + 1 if existing else 0
        self._bytes = sum(size for _, _, size in existing)

    def recount(self) -> None:
        """Trust the disk over our sums: a reader of the file destination removes segments."""
        self._recounted_at = time.monotonic()
        self._bytes = sum(size for _, _, size in self._scan())

    @property
    def size(self) -> int:
        """Bytes of this process's segments, as far as this spool knows."""
        return self._bytes

    # --- writing ---------------------------------------------------------------------------

    def append(self, lines: Sequence[str]) -> None:
        """Append events (encoded JSON, no newline) to the open segment, within the limit."""
        if lines:
            self._start()
            self._write(self._keep(lines), None)

    def reserve(self) -> int:
        """A segment number that sorts before every segment written after this call.

        The Kafka sender takes one before a batch goes out, so that a batch the broker
        refused lands on disk ahead of events that callers spilled meanwhile.
        """
        self._start()
        self.seal()
        self._seq += 1
        return self._seq - 1

    def write_reserved(self, seq: int, lines: Sequence[str]) -> None:
        """Write `lines` as the whole of segment `seq` (from `reserve`)."""
        if lines:
            self._write(self._keep(lines), seq)

    def seal(self) -> None:
        """Close the open segment, so the next append starts a new one (and this one can be
        replayed and removed)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def _keep(self, lines: Sequence[str]) -> Sequence[str]:
        need = sum(map(len, lines)) + len(lines)
        if self._bytes + need <= self.max_bytes:
            return lines
        if time.monotonic() - self._recounted_at >= _RECOUNT_EVERY_S:
            self.recount()
        kept: list[str] = []
        room = self.max_bytes - self._bytes
        for line in lines:
            if len(line) + 1 <= room or type(line) is Priority:
                kept.append(line)
                room -= len(line) + 1
            else:
                self._drop(1, f"spool {self.directory} is at its limit of {self.max_bytes} bytes")
        return kept

    def _write(self, lines: Sequence[str], seq: int | None) -> None:
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        try:
            if seq is None:
                if self._fd >= 0 and self._fd_size + len(data) > self.segment_bytes:
                    self.seal()
                if self._fd < 0:
                    self._fd = self._open(self._seq)
                    self._seq += 1
                    self._fd_size = 0
                self._fd_size += _write_all(self._fd, data)
            else:
                fd = self._open(seq)
                try:
                    _write_all(fd, data)
                finally:
                    os.close(fd)
        except OSError as err:
            self._drop(len(lines), f"cannot write to spool {self.directory}: {err}")
            return
        self._bytes += len(data)

    def _open(self, seq: int) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.destination is not None:
            described = self.directory / DESTINATION_FILE
            if not described.exists():  # written whole: beside, then renamed
                tmp = described.with_name(f".{DESTINATION_FILE}.{os.getpid()}")
                tmp.write_text(json.dumps(self.destination, sort_keys=True) + "\n")
                os.replace(tmp, described)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        return os.open(self._path(seq), flags, 0o644)

    def _drop(self, n: int, why: str) -> None:
        self.dropped += n
        now = time.monotonic()
        if now - self._complained_at >= 60.0:
            self._complained_at = now
            log.error("runwatch: dropping events (%d so far): %s", self.dropped, why)

    def adopt_orphans(self) -> int:
        """Take over the segments of exited processes on this host that were going to this
        spool's destination (network destinations only: in a file destination the segments
        are already where they belong).

        A process that exits while its broker is away leaves its backlog on disk; the next
        emitter here that reaches the broker sends it. A rename claims a segment, so two
        emitters never send the same one. Returns how many segments were adopted.
        """
        self._start()
        self.seal()
        host_prefix = self._host_prefix
        orphans: list[tuple[int, int, int, Path]] = []
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return 0
        for entry in entries:
            name = entry.name
            if not (name.startswith(host_prefix) and name.endswith(SEGMENT_SUFFIX)):
                continue
            parts = name[len(host_prefix) : -len(SEGMENT_SUFFIX)].split("-")
            if len(parts) == 3 and all(p.isdigit() for p in parts) and not alive(int(parts[0])):
                orphans.append((int(parts[0]), int(parts[1]), int(parts[2]), Path(entry.path)))
        adopted = 0
        for *_, path in sorted(orphans):
            target = self._path(self._seq)
            try:
                size = path.stat().st_size
                path.rename(target)
            except OSError:
                continue  # another emitter claimed it first
            self._seq += 1
            self._bytes += size
            adopted += 1
        return adopted

    # --- reading back ----------------------------------------------------------------------

    def backlog(self) -> list[Path]:
        """This process's segments, oldest first, the open one sealed so all can be replayed."""
        self._start()
        self.seal()
        return [path for _, path, _ in self._scan()]

    @staticmethod
    def read(path: Path) -> list[str]:
        """The whole lines of a sealed segment (a line cut short by a full disk is skipped)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        text = data.decode(errors="replace")
        return [line for line in text[: text.rfind("\n") + 1].split("\n") if line]

    def expire(self, now: float | None = None) -> int:
        """Drop this process's sealed segments older than `max_age` (counted in `dropped`,
        said in one line); how many events. Nothing without a `max_age`: off by default."""
        if self.max_age is None:
            return 0
        t = time.time() if now is None else now
        open_seq = self._seq - 1 if self._fd >= 0 else None
        events = 0
        for seq, path, _ in self._scan():
            try:
                old = t - path.stat().st_mtime > self.max_age
            except FileNotFoundError:
                continue
            if old and seq != open_seq:
                events += len(self.read(path))
                self.remove(path)
        if events:
            self.dropped += events
            log.warning("runwatch: dropped %d spooled events older than %.0fs (%s) from %s",
                        events, self.max_age, "its maximum age", self.directory)  # fmt: skip
        return events

    def remove(self, path: Path) -> None:
        """Delete a segment whose events were delivered."""
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        self._bytes = max(0, self._bytes - size)

    def close(self) -> None:
        self.seal()

    def forget(self) -> None:
        """In a forked child: let go of the parent's open segment without touching it."""
        if self._fd >= 0:
            try:
                os.close(self._fd)
            finally:
                self._fd = -1


def segment_writer(name: str) -> tuple[str | None, int | None]:
    """(host, pid) of the process that wrote a segment, from its name; Nones when the name
    is not a segment's."""
    if not name.endswith(SEGMENT_SUFFIX):
        return None, None
    parts = name[: -len(SEGMENT_SUFFIX)].split("-", 1)[-1].rsplit("-", 3)
    if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
        return None, None
    return parts[0], int(parts[1])


def alive(pid: int) -> bool:
    """Whether process `pid` (of this host) is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)

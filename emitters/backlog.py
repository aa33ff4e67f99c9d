"""What waits in a spool base, by destination: how much, how old, for where -- and giving a
backlog up when asked.

A destination that never answers again (a Kafka cluster torn down, a `serve` on a laptop
that moved) leaves its backlog under `~/.cache/runwatch/spool/` for good. Nothing here
discards anything by itself: `runwatch spool status` and `runwatch watch` say when a backlog
is older than `WARN_AFTER_S`, naming the destination and how to send or drop it, and
`drop` (`runwatch spool drop DEST`) discards one when a person asks, counted and logged in
`dropped.log` beside the backlogs. (An emitter given a maximum age --
$RUNWATCH_SPOOL_MAX_AGE, off by default -- drops older segments as it would send them:
`SpooledDestination`.)
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from runwatch.emitters.spool import (
    SEGMENT_SUFFIX,
    Spool,
    alive,
    read_destination,
    segment_writer,
    this_host,
)

#: A backlog older than this is worth a warning (s).
WARN_AFTER_S = 600.0
#: Where each drop is recorded, in the spool base.
DROPPED_LOG = "dropped.log"  # JSON Lines, not named like a segment


def segments(directory: Path) -> list[Path]:
    """The segment files in a destination's directory, oldest first (by name: per writer)."""
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(SEGMENT_SUFFIX))
    except OSError:
        return []


def where(directory: Path) -> str:
    """The destination a directory's segments were going to, in words."""
    found = read_destination(directory)
    if found is None:
        return "no destination (send with --url or --kafka)"
    if found.get("kind") == "http":
        return f"runwatch serve at {found.get('url')}"
    if found.get("kind") == "kafka":
        return f"Kafka at {found.get('bootstrap')}, topic {found.get('topic')}"
    return "a spool directory (it is the destination)"


def age_text(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@dataclass(frozen=True)
class Backlog:
    """One destination's waiting events."""

    directory: Path
    events: int
    segments: int
    bytes: int
    oldest: float  # when its oldest segment was last written (epoch seconds)

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.oldest)

    def line(self, now: float | None = None) -> str:
        return (f"{self.directory}: {self.events:,} events in {self.segments} segments "
                f"({self.bytes:,} bytes), the oldest written {age_text(self.age(now))} ago, "
                f"for {where(self.directory)}")  # fmt: skip

    def warning(self, now: float | None = None, after: float = WARN_AFTER_S) -> str | None:
        """What to say of a backlog older than `after`: for where, and how to send or drop
        it; None when it is younger."""
        age = self.age(now)
        if age < after:
            return None
        return (f"{self.events:,} events for {where(self.directory)} have waited "
                f"{age_text(age)}: they are sent when it answers (or `runwatch spool flush "
                f"--dir {self.directory}`); to give them up: `runwatch spool drop "
                f"{self.directory.name}`")  # fmt: skip


def backlog(directory: Path) -> Backlog | None:
    """The backlog of one destination's directory; None when nothing waits there."""
    found = segments(directory)
    stats = []
    for path in found:
        try:
            stats.append((path, path.stat()))
        except FileNotFoundError:  # sent and removed meanwhile
            continue
    if not stats:
        return None
    events = sum(len(Spool.read(path)) for path, _ in stats)
    return Backlog(directory, events, len(stats), sum(st.st_size for _, st in stats),
                   min(st.st_mtime for _, st in stats))  # fmt: skip


@dataclass(frozen=True)
class Dropped:
    events: int
    segments: int
    bytes: int
    kept: int  # segments of processes still running here: they send (or spool) them


def drop(directory: Path, base: Path) -> Dropped:
    """Discard what exited processes left in a destination's directory (a running one's
    segments are its own, and kept); the drop is recorded in `base`/dropped.log."""
    events = count = size = kept = 0
    here, going_to = this_host(), where(directory)
    for path in segments(directory):
        host, pid = segment_writer(path.name)
        if pid is not None and host == here and alive(pid):
            kept += 1
            continue
        try:
            lines, length = len(Spool.read(path)), path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        events, count, size = events + lines, count + 1, size + length
    if not segments(directory) and not kept:
        with contextlib.suppress(OSError):  # its destination.json: nothing is going there
            for leftover in directory.iterdir():
                leftover.unlink()
            directory.rmdir()
    done = Dropped(events, count, size, kept)
    if count:
        record = {"ts": time.time(), "directory": str(directory), "destination": going_to,
                  "events": events, "segments": count, "bytes": size, "by": _who()}  # fmt: skip
        with open(base / DROPPED_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    return done


def _who() -> str:
    try:
        import getpass

        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return socket.gethostname()

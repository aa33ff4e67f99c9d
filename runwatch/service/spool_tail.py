"""Tails a spool directory that emitters write (`RUNWATCH_SPOOL`): new whole lines of each
`events-*.jsonl` segment go through the same path as an HTTP request.

Positions (bytes read per segment) are kept in `spool.positions` beside the event log, saved
after the lines are in the log: a crash in between re-reads some lines, which the rules and
the history drop by event id. A line longer than CHUNK (no event is: the limit is 64 KiB)
is kept as a dead letter (its start) and skipped, and the segment goes on; while the event
log cannot be written, the spool waits where it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runwatch.service.core import Service
from runwatch.stream.refused import Refused

CHUNK = 4 << 20


class SpoolTail:
    def __init__(self, directory: Path, state: Path) -> None:
        self.directory = directory
        self.state = state
        try:
            self.pos: dict[str, int] = json.loads(state.read_text())
        except (OSError, ValueError):
            self.pos = {}

    def poll(self, service: Service) -> int:
        """Read what segments gained since the last poll; returns events accepted."""
        n, moved = 0, False
        try:
            names = sorted(p for p in os.listdir(self.directory) if p.endswith(".jsonl"))
        except OSError:
            return 0
        for name in names:
            path = self.directory / name
            start = self.pos.get(name, 0)
            try:
                with path.open("rb") as f:
                    f.seek(start)
                    data = f.read(CHUNK)
            except OSError:
                continue
            cut = data.rfind(b"\n")  # only up to the last newline: a write may be half done
            if cut < 0 and len(data) < CHUNK:
                continue
            source = f"spool:{name}"
            try:
                if cut < 0:  # no end in sight: one line over the limit
                    cut = self._end_of_line(path, start)
                    why = (
                        f"a line of {cut + 1} bytes or more, over the {CHUNK >> 20} MiB a "
                        "spool line may have (an event has at most 64 KiB); its first KiB kept"
                    )
                    service.refuse(Refused(why, data[:1024], source, kind="too_large"))
                else:
                    n += service.ingest(data[: cut + 1].split(b"\n"), source=source).accepted
            except OSError:
                break  # the event log is full or gone: read it again later (the service says)
            self.pos[name] = start + cut + 1
            moved = True
        if moved:
            tmp = self.state.with_suffix(".tmp")
            try:
                tmp.write_text(json.dumps(self.pos))
                os.replace(tmp, self.state)
            except OSError:
                pass  # the lines are logged; a restart reads some again, dropped by id
        return n

    @staticmethod
    def _end_of_line(path: Path, start: int) -> int:
        """Where the line that starts at `start` ends (its newline), relative to `start`;
        the whole segment when it has none yet."""
        with path.open("rb") as f:
            f.seek(start)
            offset = 0
            while chunk := f.read(CHUNK):
                at = chunk.find(b"\n")
                if at >= 0:
                    return offset + at
                offset += len(chunk)
        return offset - 1

"""Tails a spool directory that emitters write (`RUNWATCH_SPOOL`): new whole lines of each
`events-*.jsonl` segment go through the same path as an HTTP request.

Positions (bytes read per segment) are kept in `spool.positions` beside the event log, saved
after the lines are in the log: a crash in between re-reads some lines, which the rules and
the history drop by event id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runwatch.service.core import Service

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
        """Read what segments gained since the last poll; returns lines ingested."""
        n = 0
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
            if cut < 0:
                continue
            lines = data[: cut + 1].split(b"\n")
            service.ingest(lines, source=f"spool:{name}")
            self.pos[name] = start + cut + 1
            n += len(lines) - 1
        if n:
            tmp = self.state.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.pos))
            os.replace(tmp, self.state)
        return n

"""`runwatch serve`'s checkpoints: one file beside its event log, the file `CheckpointStore`
(`runwatch.stream.checkpointer`; the Kafka worker's is a compacted topic).

Serve has one input, its event log: partition 0. The file is replaced whole or not at all
(written beside it, fsynced, renamed over it), so a crash while it is written leaves the one
before; a torn or foreign file is refused by the format's checks when it is read back
(`stream/checkpoint.py`, `stream/recovery.py`).
"""

from __future__ import annotations

from pathlib import Path

from runwatch.service.wal import replace_file


class FileCheckpoints:
    """The newest checkpoint of serve's event log, at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def read(self, partition: int = 0) -> bytes | None:
        """The checkpoint, None when there is none; raises OSError when it cannot be read."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    async def write(self, partition: int, data: bytes) -> None:
        """Replace the checkpoint with `data`; raises OSError when it cannot be written."""
        replace_file(self.path, data)

"""`HeldHistory`: another process that holds a DuckDB history open read-only, as a person
running `runwatch sql` or a dashboard does -- the tests and bench/serve.py show that no
alert and no acknowledgment waits for it. Stopped by the code that started it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_HOLD = (  # waits for the lock as `runwatch sql` does: the writer holds it for a batch
    "import sys\n"
    "from runwatch.store.connection import connect\n"
    "con = connect(sys.argv[1], read_only=True, wait=60)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


class HeldHistory:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        assert self.proc.stdout is not None
        if self.proc.stdout.readline() != b"held\n":
            self.release()
            raise RuntimeError(f"could not hold {db} open")

    def holding(self) -> bool:
        return self.proc.poll() is None

    def release(self) -> None:
        """Let go of the file (the process ends) and wait for it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> HeldHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

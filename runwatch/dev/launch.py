"""Start `runwatch serve` as a child process on a free loopback port, and stop it by pid.

Used by `make demo`, the benchmarks and the tests: they need a real service (a separate
process they can kill -9) and must leave nothing running behind them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any


class ServeProcess:
    def __init__(
        self,
        db: Path,
        *,
        args: Sequence[str] = (),
        port: int = 0,
        log: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 30.0,
        token: str | None = None,
    ) -> None:
        self.db = Path(db)
        self.token = token  # sent with `get` (the service's --token-file / $RUNWATCH_TOKEN)
        self.log = log or self.db.with_name(self.db.name + ".serve.log")
        port_file = Path(tempfile.mkdtemp(prefix="runwatch-port-")) / "port"
        cmd = [sys.executable, "-m", "runwatch.cli", "serve", "--db", str(self.db),
               "--port", str(port), "--port-file", str(port_file), *args]  # fmt: skip
        self._out: IO[bytes] = self.log.open("ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"runwatch serve did not start: {self.output()[-2000:]}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        port_file.unlink()
        port_file.parent.rmdir()
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def get(self, path: str) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = urllib.request.Request(self.url + path, headers=headers)
        # (generous: a loaded 2-core machine with many consoles playing in may answer slowly)
        with urllib.request.urlopen(request, timeout=60) as resp:
            body = resp.read()
        return body.decode() if path == "/metrics" else json.loads(body)

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the service flushes its history), then SIGKILL if it lingers; the exit
        status (-9: it did not stop when asked)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._out.closed:
            self._out.close()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: what a crash looks like."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._out.close()

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        killed = self.proc.poll() is None
        status = self.stop()
        if killed and status != 0 and kind is None:
            raise RuntimeError(f"runwatch serve did not stop cleanly on SIGTERM (exit {status})")

"""The runwatch roles a bench starts as processes of their own: `runwatch worker` for
bench/worker.py, faults.py, restart.py, fleet.py, fetch_wait.py and worker_profile.py (one
module they all import, so that no bench imports another's script)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from benchinfo import proc_stats

ROOT = Path(__file__).resolve().parent.parent
RUNWATCH = str(ROOT / ".venv" / "bin" / "runwatch")


class Worker:
    """`runwatch worker` as a subprocess; stderr lines are collected."""

    def __init__(
        self, bootstrap: str, prefix: str, app_id: str, cpu: int | None, *extra: str
    ) -> None:
        cmd = [RUNWATCH, "worker", "--kafka", bootstrap, "--topic-prefix", prefix]
        cmd += ["--app-id", app_id, "--partitions", "1", *extra]
        if cpu is not None and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(cpu), *cmd]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.said_at: list[float] = []  # when each line came (time.time())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.said_at.append(time.time())
            self.lines.append(line.rstrip())

    def wait_live(self, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if "live on partitions" in line:
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("worker did not go live:\n" + "\n".join(self.lines[-20:]))

    def cpu_s(self) -> float:
        return proc_stats(self.proc.pid)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

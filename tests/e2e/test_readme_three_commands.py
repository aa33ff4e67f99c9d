"""The README's "Watch your own job in three commands", run as written: `runwatch serve`,
`runwatch watch ... -- python train.py`, `runwatch alerts ... --follow` -- only the port is
a free one instead of 8787, and train.py is a job that fails. The failure reaches the
follower, and the job's output and exit status pass through unchanged."""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
SHOWN_URL = "http://127.0.0.1:8787"


def three_commands() -> list[list[str]]:
    section = README.read_text().split("## Watch your own job in three commands")[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line, comments=True) for line in block[1].strip().splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readmes_three_commands_watch_a_failing_job(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def as_run(words: list[str]) -> list[str]:
        assert words[0] == ".venv/bin/runwatch"
        return [sys.executable, "-m", "runwatch.cli",
                *(w.replace(SHOWN_URL, url) for w in words[1:])]  # fmt: skip

    serve_cmd, watch_cmd, alerts_cmd = map(as_run, three_commands())
    assert serve_cmd[3:] == ["serve"]  # as written; the port is the test's own
    (tmp_path / "train.py").write_text(
        "import sys\nprint('epoch 1: loss 0.5', flush=True)\n"
        "raise SystemExit('CUDA error: an illegal memory access was encountered')\n"
    )
    run = {"cwd": tmp_path, "text": True}
    # as in a checkout: what the commands leave there must be ignored, not committed by the
    # next `git add -A`
    shutil.copy(README.parent / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q"], check=True, **run)  # type: ignore[call-overload]
    serve = subprocess.Popen(
        [*serve_cmd, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **run
    )  # type: ignore[call-overload]
    follower = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert serve.poll() is None, "runwatch serve did not start"
            assert time.monotonic() < deadline, "runwatch serve did not become ready"
            time.sleep(0.1)
        follower = subprocess.Popen(
            alerts_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **run
        )  # type: ignore[call-overload]
        job = subprocess.run(watch_cmd, capture_output=True, timeout=120, check=False, **run)
        assert job.returncode == 1  # the job's own exit status
        assert job.stdout == "epoch 1: loss 0.5\n"  # its output, as it was
        assert "CUDA error: an illegal memory access" in job.stderr
        line = follower.stdout.readline()  # type: ignore[union-attr]
        assert "FIRING   critical component_failed  run=my-job" in line, line
        assert (tmp_path / "runwatch.duckdb.serve").is_dir()  # the history beside it
    finally:
        if follower is not None:
            follower.send_signal(signal.SIGTERM)
            follower.communicate(timeout=30)
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
    assert follower.returncode == 0
    assert serve.returncode == 0
    left = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, check=True, **run).stdout  # type: ignore[call-overload]  # fmt: skip
    assert sorted(left.splitlines()) == ["?? .gitignore", "?? train.py"], left

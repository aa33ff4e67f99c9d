"""`runwatch demo` (live), shortened: the simulated faults raise their alerts, and the guarded
training loop shows a training-dynamics alert and a circuit-breaker pause that `runwatch
resume` lifts, after which the loop goes on to its last step."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_live_demo_shows_a_dynamics_alert_and_a_circuit_breaker_pause(tmp_path: Path) -> None:
    users_cache = tmp_path / "users-cache"  # the ~/.cache of whoever runs the demo
    proc = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "demo", "--dir", str(tmp_path), "--jobs", "3",
         "--duration", "300", "--trainer-steps", "70", "--trainer-step-s", "0.1",
         "--resume-after", "1"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200", "XDG_CACHE_HOME": str(users_cache)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "Training dynamics: kl_spike on demo-guarded" in out
    assert "Circuit breaker: demo-guarded paused after step" in out
    assert "by zero_reward" in out
    assert "resumed (" in out
    assert "the loop went on to step 70" in out
    # it ends with the address of serve's page (not at a terminal: where it was)
    last = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"http://127\.0\.0\.1:\d+/", last), proc.stdout[-500:]
    log = (tmp_path / "trainer.log").read_text()
    assert "PAUSED zero_reward" in log
    assert "finished ok" in log
    assert log.index("PAUSED") < log.index("goes on after step") < log.index("step 70")
    # the demo's emitters spool (if they must) in the demo's directory, not in the user's
    # ~/.cache/runwatch/spool, where a spool for a port gone with the demo would stay for good
    assert not (users_cache / "runwatch").exists(), sorted(users_cache.rglob("*"))

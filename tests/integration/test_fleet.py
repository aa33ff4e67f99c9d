"""A thousand concurrent runs on the Kafka path (issue 30), checked for correctness only:
`bench/fleet.py --quick` plays 1,000 RL-shaped runs (~2,800 events/s) for a minute into the
suite's broker, two `runwatch worker`s in one group and a `runwatch sink` consume them, and a
fault every two seconds -- a NaN loss, a rollout worker that stops beating -- must each alert
exactly once, with nothing else firing and no record left unread at the end. The bench exits
non-zero otherwise and says which; its timings are figures, not asserted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

#: solo: 1,000 runs through two workers take both cores; `make test` runs it alone. The
#: bench bounds each of its phases (PHASE_S) and says which one stuck; this test's own limit
#: sits above the bench's worst case, so a failure shows the bench's words, not a timeout.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.solo,
    pytest.mark.timeout(900),
]
LIMIT_S = 780

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fleet.py"


def test_a_thousand_runs_each_fault_alerts_once_and_nothing_else(kafka_broker: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(BENCH), "--quick", "--kafka", kafka_broker],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the bench stops its workers and producers on SIGTERM
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        pytest.fail(f"bench/fleet.py --quick ran past {LIMIT_S} s:\n{out}")
    assert proc.returncode == 0, out
    faults = [int(n) for n in re.findall(r"(\d+) faults, each alerted once", out)]
    assert len(faults) == 2, out  # both kinds were played...
    assert all(n > 0 for n in faults), out  # ...and each at least once
    assert "false alerts: 0" in out
    assert "records behind at the end: 0" in out

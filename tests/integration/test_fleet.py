"""A thousand concurrent runs on the Kafka path (issue 30), checked for correctness only:
`bench/fleet.py --quick` plays 1,000 RL-shaped runs (~2,800 events/s) for a minute into the
suite's broker, two `runwatch worker`s in one group and a `runwatch sink` consume them, and a
fault every two seconds -- a NaN loss, a rollout worker that stops beating -- must each alert
exactly once, with nothing else firing and no record left unread at the end. The bench exits
non-zero otherwise and says which; its timings are figures, not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

#: solo: 1,000 runs through two workers take both cores; `make test` runs it alone
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.solo]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fleet.py"


def test_a_thousand_runs_each_fault_alerts_once_and_nothing_else(kafka_broker: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--kafka", kafka_broker],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    faults = [int(n) for n in re.findall(r"(\d+) faults, each alerted once", out)]
    assert len(faults) == 2, out  # both kinds were played...
    assert all(n > 0 for n in faults), out  # ...and each at least once
    assert "false alerts: 0" in out
    assert "records behind at the end: 0" in out

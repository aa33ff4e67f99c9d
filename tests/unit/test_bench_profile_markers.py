"""`bench/worker_profile.py` sorts py-spy's samples partly by marked source lines (the id
checks, the forked checkpoint child's line): a marker that no longer matches its module puts
a whole category's samples elsewhere, silently -- as the child's did once `Snapshot` changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

SCRIPT = """
from worker_profile import LINES, marked_lines
marked = marked_lines()
for category, module, _ in LINES:
    short = "/".join(module.split(".")[1:])
    found = [p for p, c in marked.items() if c == category and p.startswith(f"({short}.py:")]
    assert found, ("no line marked", category, module)
"""


def test_every_marked_line_of_the_worker_profile_is_found() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=BENCH, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

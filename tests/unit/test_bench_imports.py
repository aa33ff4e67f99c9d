"""Every bench still imports: benches are not type-checked and `make bench` runs them only on
demand, so a helper renamed or removed elsewhere would otherwise surface there, an hour in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_bench_module_imports() -> None:
    names = sorted(p.stem for p in BENCH.glob("*.py"))
    assert {"replay", "memory"} <= set(names)
    # in a process of its own: a bench's module may install signal handlers
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", script, *names], cwd=BENCH,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

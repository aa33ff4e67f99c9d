"""The README's history block, run as written (only /tmp is the test's own directory): a
bundled scenario written, replayed, ingested into a history and asked a question in SQL.
Each line must work after the ones before it -- a new user pastes them in that order."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def history_block() -> list[list[str]]:
    """The lines of the README's code block that starts with `runwatch scenarios`."""
    blocks: list[list[str]] = []
    inside = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    for block in blocks:
        if block and block[0].startswith(".venv/bin/runwatch scenarios "):
            return [shlex.split(line, comments=True) for line in block]
    raise AssertionError("the README shows no `runwatch scenarios` block")


def test_the_readmes_history_block_runs_as_written(tmp_path: Path) -> None:
    lines = history_block()
    assert [words[1] for words in lines][-1] == "sql"
    for words in lines:
        assert words[0] == ".venv/bin/runwatch"
        args = [w.replace("/tmp", str(tmp_path)) for w in words[1:]]
        done = subprocess.run([sys.executable, "-m", "runwatch.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, (words, done.stderr)
    # the sandbox hang's GPU-idle gaps over ten minutes, steps in order
    rows = [line.split() for line in done.stdout.splitlines()[2:] if line.startswith("grpo")]
    assert [(r[1], r[2]) for r in rows] == [("1", "20"), ("2", "21"), ("3", "26"), ("4", "99")]

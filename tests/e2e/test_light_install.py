"""A trainer's install: `pip install runwatch` with no extras (its base dependencies only,
as pyproject.toml lists them). `runwatch --help` lists every command, and each command that
needs an extra says which one in one line -- no traceback. The environment is a real fresh
venv with the base dependencies; runwatch itself is the source tree (the same editable finder
`make setup` installs), so what is tested is this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from runwatch.cli import COMMANDS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = {**os.environ, "PIP_CACHE_DIR": str(ROOT / ".cache" / "pip"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *base], check=True, timeout=600,
                   env=env)  # fmt: skip
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    for finder in ours.glob("__editable__*runwatch*"):
        shutil.copy(finder, site / finder.name)
    return python


def run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "runwatch.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)  # fmt: skip


def test_the_light_install_really_lacks_the_extras(light: Path) -> None:
    done = subprocess.run([str(light), "-c", "import duckdb"], capture_output=True, check=False)
    assert done.returncode != 0
    done = subprocess.run([str(light), "-c", "import runwatch.emitters; print('ok')"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.stdout == "ok\n", done.stderr


def test_help_lists_every_command(light: Path) -> None:
    done = run(light, "--help")
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout
    assert "needs the 'store' extra" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [["serve", "--port", "0"], ["replay", "x.jsonl"], ["runs"], ["sql", "SELECT 1"],
     ["worker", "--kafka", "127.0.0.1:1"], ["sink", "--kafka", "127.0.0.1:1"],
     ["backtest", "--db", "x.duckdb"], ["notify", "--help"], ["scrape", "--help"]],
)  # fmt: skip
def test_a_command_that_needs_an_extra_says_which_in_one_line(light: Path, argv: list[str]) -> None:
    done = run(light, *argv)
    if argv[-1] == "--help" and done.returncode == 0:
        return  # its help needs no extra: it says which when run
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"runwatch {argv[0]}: needs the '"), lines[0]
    assert "pip install 'runwatch[" in lines[0]
    if argv[0] in ("runs", "sql", "sink", "backtest"):  # one install that makes it work
        assert "needs the 'store' extra" in lines[0], lines[0]

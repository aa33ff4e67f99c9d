"""The container image, as far as it goes without a Docker engine (there is none here).

The Dockerfile's build stage is replayed: exactly the paths it COPYs go into an empty folder, a
wheel is built from them and installed into a fresh virtual environment, and the installed
`runwatch` -- the image's ENTRYPOINT -- runs every role the image is for, from outside the
source tree. A package folder the Dockerfile forgets to COPY, or a role that needs the source
tree, fails here. (The dependencies come from this checkout's environment, not from PyPI: the
extras themselves are checked by the roles' own tests.)
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ROLES = ["worker", "sink", "serve", "scrape", "notify", "alerts", "replay"]


def build_stage() -> tuple[list[tuple[str, str]], str]:
    """The build stage's COPY (source, destination) pairs and its `pip install` line."""
    copies, install = [], ""
    stage = (ROOT / "Dockerfile").read_text().split("\nFROM ", 2)[1]  # up to the runtime FROM
    for line in stage.replace("\\\n", " ").splitlines():  # (a continued line: one)
        words = shlex.split(line) if line and not line.startswith("#") else []
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            *sources, dest = words[1:]
            copies += [(s, dest) for s in sources]
        elif words[:1] == ["RUN"] and "install" in words and "pip" in line:
            install = line
    return copies, install


def ignored(name: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()]
    return any(p and fnmatch.fnmatch(name, p.removeprefix("**/")) for p in patterns)


def test_every_package_folder_is_copied_into_the_build_stage() -> None:
    copies, install = build_stage()
    copied = {Path(src).as_posix().rstrip("/") for src, _ in copies}
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {d.split("/")[0] for d in folders["package-dir"].values()}
    assert roots <= copied, f"the Dockerfile does not COPY {sorted(roots - copied)}"
    assert {"pyproject.toml", "setup.py"} <= copied
    assert '".[kafka,store,slack,metrics]"' in install  # every role's extras, not torch


def test_the_build_stage_installs_a_runwatch_that_runs_every_role(tmp_path: Path) -> None:
    copies, _ = build_stage()
    src = tmp_path / "src"
    src.mkdir()
    for source, dest in copies:
        target = src / (dest.rstrip("/") if dest not in ("./", ".") else Path(source).name)
        if (ROOT / source).is_dir():
            shutil.copytree(
                ROOT / source, target, ignore=lambda d, names: [n for n in names if ignored(n)]
            )
        else:
            shutil.copy(ROOT / source, target)

    def run(*cmd: str | Path, cwd: Path = tmp_path) -> str:
        proc = subprocess.run(
            [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        return proc.stdout

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", src, "-w", tmp_path / "dist")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    # the dependencies the image's pip would fetch: this environment's (no network needed)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next((tmp_path / "dist").glob("runwatch-*.whl"))
    run(*pip, "--python", python, "install", "--no-deps", "--no-index", wheel)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [venv / "bin" / "runwatch", "--help"], cwd=tmp_path, capture_output=True, text=True,
        env=env, timeout=60, check=False,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    for role in ROLES:
        proc = subprocess.run(
            [venv / "bin" / "runwatch", role, "--help"], cwd=tmp_path, capture_output=True,
            text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"runwatch {role} --help: {proc.stderr[-2000:]}"
        assert "usage: runwatch " + role in proc.stdout
    # (the native parts too: the build stage has a compiler, and so has this machine)
    imports = (
        "import runwatch, runwatch.store.sink, runwatch.stream.kafka.worker,"
        " runwatch.stream.timekeeping._skew, runwatch.stream._fetched, runwatch.stream._ids"
    )
    origin = run(python, "-c", f"{imports}; print(runwatch.__file__)")
    assert origin.startswith(str(site)), origin  # the installed copy, not the checkout

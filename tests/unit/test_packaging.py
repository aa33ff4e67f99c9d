"""A trainer's `pip install runwatch` stays light: the emitter side imports no stream parts;
and the wheel ships what users run, never the harness."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "msgspec",
    "orjson",
    "rich",
    "faust",
    "aiokafka",
    "duckdb",
    "pyarrow",
    "torch",
    "slack_sdk",
    "prometheus_client",
    "runwatch.stream",
    "runwatch.store",
)


def test_base_install_needs_only_pydantic_the_kafka_client_and_the_marker_search():
    """What a training job installs: the models, the Kafka client, and the 400 kB wheel
    `runwatch watch` finds its markers with (no torch, no Faust, no DuckDB)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = sorted(dep.split(">")[0].split("=")[0].split("<")[0] for dep in project["dependencies"])
    assert names == ["ahocorasick-rs", "kafka-python", "pydantic"]
    assert {"stream", "kafka", "store", "slack", "torch"} <= set(project["optional-dependencies"])


def test_importing_the_emitters_loads_nothing_heavy():
    code = (
        "import sys, runwatch.emitters; from runwatch.emitters import Emitter; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_top_level_folders_import_under_runwatch():
    import runwatch.emitters
    import runwatch.store
    import runwatch.stream.rules

    assert Path(runwatch.emitters.__file__).parent == ROOT / "emitters"
    assert Path(runwatch.stream.rules.__file__).parent == ROOT / "stream" / "rules"
    assert Path(runwatch.store.__file__).parent == ROOT / "store"


#: what a build from a copy of the checkout leaves out of the copy: caches, environments and
#: an earlier build's output (setuptools puts what it finds in build/ into the wheel)
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", ".cache", ".*_cache", ".hypothesis", "build", "dist", "*.egg-info",
    "__pycache__", "*.duckdb*",
)  # fmt: skip


#: where a top-level folder's modules go in the wheel (pyproject's package-dir), under runwatch/
PACKAGE_DIRS = {"emitters": "emitters/", "stream": "stream/", "store": "store/"}


def wheel_modules(tmp_path: Path) -> list[str]:
    """The Python files of a wheel built from a copy of the checkout (`pip wheel --no-deps .`;
    no build isolation: the venv's setuptools, no network)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCE, symlinks=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "wheel"), str(src)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = (tmp_path / "wheel").glob("runwatch-*.whl")
    with zipfile.ZipFile(wheel) as z:
        return [n for n in z.namelist() if n.endswith(".py")]


def test_the_wheel_holds_no_harness_module(tmp_path: Path) -> None:
    """What only tests, benches and `make docs` run (harness/) is not shipped, neither as its
    own package nor under runwatch/; what users run (runwatch/dev: the demo, the scenarios,
    the simulator, the local broker) is."""
    shipped = wheel_modules(tmp_path)
    harness = {p.stem for p in (ROOT / "harness").rglob("*.py")} - {"__init__"}
    dev = {Path(n).stem for n in shipped if n.startswith("runwatch/dev/")}
    assert [n for n in shipped if not n.startswith("runwatch/")] == []
    assert harness & dev == set()
    users_run = {"runwatch/dev/demo.py", "runwatch/dev/simulate.py", "runwatch/dev/broker.py",
                 "runwatch/emitters/emitter.py", "runwatch/stream/engine.py"}  # fmt: skip
    assert users_run <= set(shipped)
    # and every module of the four packages (a folder missing from pyproject's package list
    # is left out of the wheel, and the image's runwatch fails to import it)
    source = {f"runwatch/{PACKAGE_DIRS.get(p.parts[0], '')}{p.relative_to(p.parts[0])}"
              for top in ("runwatch", "emitters", "stream", "store")
              for p in (q.relative_to(ROOT) for q in (ROOT / top).rglob("*.py"))}  # fmt: skip
    assert sorted(source - set(shipped)) == []

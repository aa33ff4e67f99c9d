"""A trainer's `pip install runwatch` stays light: the emitter side imports no stream parts."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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

"""The Grafana dashboards: committed JSON equals the generator's output, and each one has the
shape Grafana imports without edits (current schema, a datasource variable, no fixed UIDs,
panels on the grid, queries that name metrics the exporter serves)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import decoded
from prometheus_client import CollectorRegistry, generate_latest

from harness.docs import dashboards as gen
from runwatch.dev import scenarios
from runwatch.stream.engine import Engine
from runwatch.stream.metrics.exporter import RunwatchMetrics

ROOT = Path(__file__).resolve().parents[3]
DASH = ROOT / "dashboards"
NAMES = sorted(gen.DASHBOARDS)


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((DASH / name).read_text()))


def test_committed_files_are_what_the_generator_writes() -> None:
    for name, content in gen.render().items():
        assert (DASH / name).read_text() == content, f"{name} is stale: run `make docs`"


def _exported_metric_names() -> set[str]:
    registry = CollectorRegistry()
    metrics = RunwatchMetrics(registry)
    engine = metrics.instrument(Engine())
    for e in scenarios.sandbox_hang()[:40_000]:
        if e["kind"] == "inference.stats":
            e = {**e, "kv_cache_usage": 0.5}
        engine.apply(decoded(e))
    metrics.record_lag(0.1)
    text = generate_latest(registry).decode()
    return {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)} | {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"
    }


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_structure(name: str) -> None:
    board = load(name)
    assert board["schemaVersion"] >= 39
    assert board["uid"].startswith("runwatch-")
    assert board["title"].startswith("runwatch / ")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    if name == "runwatch-run.json":
        assert variables["run"]["type"] == "query"
        assert "runwatch_run_info" in variables["run"]["definition"]
    text = json.dumps(board)
    uids = set(re.findall(r'"uid": "([^"]*)"', text)) - {board["uid"]}
    assert uids <= {"${datasource}", "-- Grafana --"}, f"hard-coded uids: {uids}"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in board["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        g = p["gridPos"]
        assert g["x"] >= 0
        assert g["x"] + g["w"] <= 24
        assert g["h"] > 0
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not (mine & cells), f"panel {p['title']!r} overlaps another"
        cells |= mine
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"], p["title"]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert t["expr"].strip()
        if "$run" in json.dumps(p["targets"]):
            assert "run" in variables, f"{p['title']} uses $run without the variable"


def test_queries_name_only_metrics_the_exporter_serves() -> None:
    served = _exported_metric_names()
    missing = set()
    for name in NAMES:
        for _, expr in gen.queries(load(name)):
            for metric in re.findall(r"\b(runwatch_[a-z_]+)", expr):
                if metric not in served:
                    missing.add(metric)
    assert not missing, f"queried but never exported: {sorted(missing)}"


def test_drilldown_has_the_panels_the_issue_asks_for() -> None:
    titles = " | ".join(p["title"] for p in load("runwatch-run.json")["panels"]).lower()
    for want in (
        "inference queue vs pending trajectories by phase",
        "progress",
        "reward per step",
        "step time by phase",
        "idle gap per step",
    ):
        assert want in titles
    annotations = load("runwatch-run.json")["annotations"]["list"]
    assert any("runwatch_alerts_firing" in a.get("expr", "") for a in annotations)


def test_provisioning_yaml_points_at_a_file_provider() -> None:
    text = (DASH / "provisioning.yaml").read_text()
    for want in ("apiVersion: 1", "type: file", "path:"):
        assert want in text

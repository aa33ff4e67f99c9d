"""A real Prometheus scrapes the exporter of engines fed by replayed scenarios; every query of
every dashboard panel (and annotation) must return data from it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import decoded
from prometheus_client import CollectorRegistry

from harness.docs import dashboards
from runwatch.dev import scenarios
from runwatch.dev.fleet import fleet_cluster
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.metrics.exporter import _SERVICE_WIDE, RunwatchMetrics
from runwatch.stream.metrics.http import MetricsServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_RUN = "grpo-qwen2.5-7b-sandbox"


def _prometheus_binary() -> str:
    explicit = os.environ.get("RUNWATCH_PROMETHEUS")
    if explicit:
        return explicit
    found = shutil.which("prometheus")
    if found is None:
        subprocess.run([str(ROOT / "scripts/ensure_prometheus.sh")], check=False)
        found = shutil.which("prometheus")
    if found is None:
        reason = "prometheus not installed (scripts/ensure_prometheus.sh says how)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must run every integration test")
        pytest.skip(reason)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _feed(engine: Engine, events: list[dict[str, Any]]) -> None:
    for e in events:
        engine.apply(decoded(e))


@pytest.fixture(scope="module")
def exporter() -> Iterator[tuple[MetricsServer, RunwatchMetrics]]:
    registry = CollectorRegistry()
    metrics = RunwatchMetrics(registry)
    engines = []
    for engine in [Engine(), Engine(), Engine()]:
        metrics.instrument(engine)
        engines.append(engine)
    sandbox = scenarios.sandbox_hang()
    cut = sandbox[-1]["ts"] - 40 * 60
    events = []
    for e in sandbox:
        if e["ts"] >= cut:
            break
        if e["kind"] == "inference.stats":
            e = {**e, "kv_cache_usage": round(min(1.0, e["running"] / 512), 4)}
        events.append(e)
    zero = scenarios.zero_reward(last_step=260)
    ranks = scenarios.rank_hang("divergent")
    _feed(engines[0], events)
    _feed(engines[1], [e for e in zero if e["ts"] < zero[-1]["ts"] - 600])
    _feed(engines[2], ranks[: len(ranks) * 2 // 3])
    # a fleet whose reward server hangs and whose rollout node died 5 minutes ago: fleet
    # incidents open (shared_cause)
    cluster, _ = fleet_cluster(runs=12, node_runs=3, coincident=0, duration=1500.0)
    fleet = Engine()
    stage = FleetStage(fleet)
    metrics.instrument(fleet)
    metrics.add_fleet(lambda: stage)
    t0 = time.time() - 1260.0  # the node died at 960 s
    for e in cluster.events(t0):
        if e["ts"] > t0 + 1260.0:
            break
        stage.transitions(fleet.apply(decoded(e)))
    assert stage.state.fleets
    metrics.record_invalid(2)
    metrics.record_lag(0.25)
    server = metrics.serve(0, "127.0.0.1")
    try:
        yield server, metrics
    finally:
        server.close()


@pytest.fixture(scope="module")
def prometheus(
    exporter: tuple[MetricsServer, RunwatchMetrics], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    binary = _prometheus_binary()
    server, _ = exporter
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: runwatch\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{server.port}']\n"
    )
    port = _free_port()
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                got = _instant(url, 'count(up{job="runwatch"} == 1)')
                if got and _instant(url, "count_over_time(runwatch_runs[1m]) >= 3"):
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(work / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.5)
        else:
            pytest.fail("prometheus did not scrape the exporter within 60 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    """`expr` evaluated at the time of the newest scrape that succeeded: a later scrape that
    timed out (a loaded machine; the timeout is the 1 s interval) marks every series stale,
    and a query at that moment would see none of them."""
    deadline = time.monotonic() + 60
    while not (scraped := _instant(url, 'timestamp(up{job="runwatch"} == 1)')):
        assert time.monotonic() < deadline, "no scrape of the exporter succeeded for 60 s"
        time.sleep(0.5)
    return _instant(url, expr, at=scraped[0]["value"][1])


def _instant(url: str, expr: str, at: str | None = None) -> list[dict[str, Any]]:
    qs = urllib.parse.urlencode({"query": expr, **({"time": at} if at else {})})
    with urllib.request.urlopen(f"{url}/api/v1/query?{qs}", timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _expand(expr: str) -> str:
    return expr.replace("$run", SANDBOX_RUN).replace("$__rate_interval", "1m")


BOARDS = dashboards.DASHBOARDS


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_panel_query_returns_data(prometheus: str, name: str) -> None:
    board = BOARDS[name]()
    empty = []
    for title, expr in dashboards.queries(board):
        if not _query(prometheus, _expand(expr)):
            empty.append(f"{title}: {expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_run_variable_lists_the_live_runs(prometheus: str) -> None:
    runs = {r["metric"]["run"] for r in _query(prometheus, "runwatch_run_info")}
    fleet = {f"fleet-{k:03d}" for k in range(12)}
    assert runs == {SANDBOX_RUN, "ppo-llama3-8b-math", "verl-dapo-32b-divergent", *fleet}


def test_the_open_fleet_incident(prometheus: str) -> None:
    """The overview's panel and the boards' annotation: the reward server that hangs, its 4
    runs; the node that died, its 3."""
    rows = _query(prometheus, "max by (cause, kind) (runwatch_fleet_incident_runs) > 0")
    assert sorted((r["metric"]["cause"], r["metric"]["kind"], r["value"][1]) for r in rows) == [
        ("dep:reward@rm-1:8000", "dep", "4"), ("host:rollout-node-7", "host", "3")]  # fmt: skip


def test_the_sandbox_picture(prometheus: str) -> None:
    """The drill-down's headline: one trajectory waits in sandbox while vLLM is idle."""
    pending = _query(prometheus, f'runwatch_trajectories_pending{{run="{SANDBOX_RUN}"}} > 0')
    assert [(r["metric"]["phase"], r["value"][1]) for r in pending] == [("sandbox", "1")]
    running = _query(prometheus, f'sum(runwatch_inference_running{{run="{SANDBOX_RUN}"}})')
    assert running[0]["value"][1] == "0"
    firing = _query(prometheus, f'runwatch_alerts_firing{{run="{SANDBOX_RUN}"}}')
    assert "inference_idle_with_pending" in {r["metric"]["rule"] for r in firing}


def _samples(body: bytes, names: set[str]) -> list[str]:
    return [
        line for line in body.decode().splitlines()
        if line and not line.startswith("#") and line.split("{")[0].split(" ")[0] in names
    ]  # fmt: skip


def test_a_service_wide_family_asked_alone_is_its_part_of_the_whole_scrape(
    exporter: tuple[MetricsServer, RunwatchMetrics],
) -> None:
    """`_SERVICE_WIDE` is a hand-kept list of the families a scrape may fill without visiting
    a run: a family listed there by mistake (one that needs the runs) would answer a
    `name[]` scrape wrongly (0, or nothing). Each, asked alone, must equal its lines in the
    whole scrape, and the fixture fills every one of them."""
    _, metrics = exporter
    whole = metrics.exposition()
    for name in sorted(_SERVICE_WIDE):
        base = name.removesuffix("_total")
        names = {base, f"{base}_total"}
        expected = _samples(whole, names)
        assert expected, f"{name}: the fixture fills no sample of it (a typo in _SERVICE_WIDE?)"
        assert _samples(metrics.exposition([name]), names) == expected, name

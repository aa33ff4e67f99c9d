"""The Helm chart (helm/runwatch), checked with the real `helm` and the Kubernetes schemas.

helm is built by scripts/ensure_helm.sh (a pinned `go install`, once, into .cache/bin);
if it cannot be built these tests fail rather than skip. Rendered manifests are validated
offline with `kubernetes-validate` (it ships the schemas).
"""

from __future__ import annotations

import asyncio
import filecmp
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from runwatch.stream.exporter_http import AsyncMetricsServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "runwatch"
K8S_VERSION = "1.30.0"
SECRET_TOKEN = "xoxb-not-a-real-token-0123456789"

EVERYTHING_ON = """
kafka: {bootstrap: "kafka-0.kafka:9092,kafka-1.kafka:9092", topicPrefix: "prod."}
rules: |
  [rules.stalled]
  after = "5m"
worker: {replicas: 3, partitions: 6}
sink:
  enabled: true
  persistence: {storageClass: fast-ssd, size: 50Gi}
notify:
  enabled: true
  channel: "#training-alerts"
  grafanaUrl: https://grafana.example.com
  config: |
    [slack]
    channel = "#training-alerts"
  slackToken: {existingSecret: runwatch-slack, key: token}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
dashboards: {enabled: true, labels: {team: ml-infra}}
"""


@pytest.fixture(scope="session")
def helm() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "ensure_helm.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"scripts/ensure_helm.sh failed:\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1]


def _run(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False, timeout=60)


def render(helm: str, tmp_path: Path, values: str | None = None, *sets: str) -> list[Any]:
    args = ["template", "rw", str(CHART), "--namespace", "ml"]
    if values is not None:
        path = tmp_path / "values.yaml"
        path.write_text(values)
        args += ["-f", str(path)]
    for s in sets:
        args += ["--set", s]
    done = _run(helm, *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def failure(helm: str, *sets: str) -> str:
    args = ["template", "rw", str(CHART)]
    for s in sets:
        args += ["--set", s]
    done = _run(helm, *args)
    assert done.returncode != 0, "helm template accepted bad values"
    return done.stderr


def by_kind(docs: list[Any], kind: str) -> dict[str, Any]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def validate(docs: list[Any]) -> None:
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no schema in the Kubernetes set (checked below by hand)
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_lint_strict(helm: str) -> None:
    done = _run(helm, "lint", "--strict", str(CHART), "--set", "kafka.bootstrap=kafka:9092")
    assert done.returncode == 0, done.stdout + done.stderr


def test_lint_strict_everything_on(helm: str, tmp_path: Path) -> None:
    path = tmp_path / "on.yaml"
    path.write_text(EVERYTHING_ON)
    done = _run(helm, "lint", "--strict", str(CHART), "-f", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_defaults_render_valid_manifests(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, None, "kafka.bootstrap=kafka:9092")
    validate(docs)
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == [
        "ConfigMap", "Deployment", "PersistentVolumeClaim", "PodDisruptionBudget", "Service",
    ]  # fmt: skip
    deployments = by_kind(docs, "Deployment")
    assert set(deployments) == {"rw-runwatch-worker", "rw-runwatch-sink"}  # notify is off
    worker = deployments["rw-runwatch-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert "--kafka=kafka:9092" in worker["args"]
    assert not any(a.startswith("--config") for a in worker["args"])  # built-in rules


def test_everything_on_renders_valid_manifests(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, EVERYTHING_ON)
    validate(docs)
    deployments = by_kind(docs, "Deployment")
    assert set(deployments) == {"rw-runwatch-worker", "rw-runwatch-sink", "rw-runwatch-notify"}
    worker = deployments["rw-runwatch-worker"]["spec"]
    assert worker["replicas"] == 3
    args = worker["template"]["spec"]["containers"][0]["args"]
    assert "--partitions=6" in args
    assert "--topic-prefix=prod." in args
    assert "--config=/etc/runwatch/rules.toml" in args
    assert "rw-runwatch-rules" in by_kind(docs, "ConfigMap")
    (monitor,) = (d for d in docs if d["kind"] == "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert "rw-runwatch-worker" in by_kind(docs, "PodDisruptionBudget")


def test_the_sink_is_a_single_writer(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, EVERYTHING_ON)
    sink = by_kind(docs, "Deployment")["rw-runwatch-sink"]["spec"]
    assert sink["replicas"] == 1
    assert sink["strategy"] == {"type": "Recreate"}
    (claim,) = (
        v["persistentVolumeClaim"]["claimName"]
        for v in sink["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    )
    pvc = by_kind(docs, "PersistentVolumeClaim")[claim]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert pvc["spec"]["storageClassName"] == "fast-ssd"
    args = sink["template"]["spec"]["containers"][0]["args"]
    assert "--db=/data/runwatch.duckdb" in args
    assert "--events-topic=prod.runwatch.events" in args


def test_no_secret_value_is_inlined(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, EVERYTHING_ON)
    assert not by_kind(docs, "Secret")
    notify = by_kind(docs, "Deployment")["rw-runwatch-notify"]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in notify["containers"][0]["env"]}
    assert env["SLACK_BOT_TOKEN_FILE"]["value"] == "/var/run/secrets/slack/token"
    assert "SLACK_BOT_TOKEN" not in env
    (secret,) = (v["secret"] for v in notify["volumes"] if "secret" in v)
    assert secret["secretName"] == "runwatch-slack"
    # a token given as a value is refused by the schema, not rendered
    err = failure(
        helm, "kafka.bootstrap=kafka:9092", "notify.enabled=true",
        "notify.slackToken.existingSecret=s", f"notify.slackToken.token={SECRET_TOKEN}",
    )  # fmt: skip
    assert "token" in err


def test_dashboards_are_sidecar_configmaps_in_sync(helm: str, tmp_path: Path) -> None:
    sources = sorted((ROOT / "dashboards").glob("*.json"))
    copies = sorted((CHART / "dashboards").glob("*.json"))
    assert [p.name for p in copies] == [p.name for p in sources], (
        "helm/runwatch/dashboards/ must hold copies of dashboards/*.json: "
        "cp dashboards/*.json helm/runwatch/dashboards/"
    )
    for src, copy in zip(sources, copies, strict=True):
        assert filecmp.cmp(src, copy, shallow=False), f"{copy} is stale: cp {src} {copy}"
    docs = render(helm, tmp_path, None, "kafka.bootstrap=kafka:9092")
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    dashboards = {k: v for d in maps if d["metadata"]["labels"].get("grafana_dashboard") == "1"
                  for k, v in d["data"].items()}  # fmt: skip
    assert sorted(dashboards) == [p.name for p in sources]
    for src in sources:
        assert dashboards[src.name] == src.read_text().rstrip("\n")


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_probes_point_at_paths_the_worker_serves(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, EVERYTHING_ON)
    for name, deployment in by_kind(docs, "Deployment").items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            probes = [container[k] for k in container if k.endswith("Probe")]
            if name != "rw-runwatch-worker":
                assert not probes, f"{name}: the process serves no HTTP endpoint"
                continue
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            paths = set()
            for probe in probes:
                assert probe["httpGet"]["port"] == "metrics"
                paths.add(probe["httpGet"]["path"])
            assert "--metrics-port=" + str(ports["metrics"]) in container["args"]
            assert paths == {"/healthz", "/readyz"}

    async def served() -> dict[str, int]:
        server = AsyncMetricsServer(lambda: b"", 0, "127.0.0.1", ready=lambda: (True, "ok"))
        await server.start()
        try:
            return {p: await asyncio.to_thread(_status, server.port, p) for p in paths}
        finally:
            await server.close()

    assert asyncio.run(served()) == dict.fromkeys(paths, 200)


def test_missing_kafka_bootstrap_fails_readably(helm: str) -> None:
    err = failure(helm)
    assert "kafka.bootstrap" in err, err


def test_two_sink_replicas_fail_readably(helm: str) -> None:
    err = failure(helm, "kafka.bootstrap=kafka:9092", "sink.replicas=2")
    assert "sink" in err, err
    assert "replicas" in err, err


def test_notify_without_a_token_secret_fails_readably(helm: str) -> None:
    err = failure(helm, "kafka.bootstrap=kafka:9092", "notify.enabled=true")
    assert "existingSecret" in err, err

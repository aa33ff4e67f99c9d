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
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from test_live_surfaces import Proc, free_port, wait_for

from harness.slack_server import FakeSlack
from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.metrics.http import AsyncMetricsServer

#: The first test may wait for helm's build (scripts/ensure_helm.sh: ten minutes or more on a
#: fresh, loaded 2-core machine) where `make test` did not make it first.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "runwatch"
K8S_VERSION = "1.30.0"
SECRET_TOKEN = "xoxb-not-a-real-token-0123456789"

EVERYTHING_ON = """
kafka:
  bootstrap: "kafka-0.kafka:9092,kafka-1.kafka:9092"
  topicPrefix: "prod."
  tls:
    enabled: true
    caSecret: {name: kafka-ca, key: ca.crt}
    clientCertSecret: {name: kafka-client, certKey: tls.crt, keyKey: tls.key}
    checkHostname: false
  sasl:
    enabled: true
    mechanism: SCRAM-SHA-512
    existingSecret: {name: kafka-sasl, usernameKey: user, passwordKey: pass}
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
    monitors = by_kind(docs, "ServiceMonitor")
    services = by_kind(docs, "Service")
    assert set(monitors) == set(services) == set(deployments)  # one per role
    for name, monitor in monitors.items():
        assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
        assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert services[name]["spec"]["selector"] == selector
        pod = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod.items(), name
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


#: flags whose file a role writes and must find again after a restart
WRITES = ("--db=", "--state=")


def test_what_a_role_writes_lives_on_a_volume_that_outlives_its_pod(
    helm: str, tmp_path: Path
) -> None:
    """The root file system is read-only: every file a role writes (the sink's history, the
    notifier's ledger of what it posted) must be named by a flag and lie on a claim, or a
    restarted notifier posts again what Slack already shows."""
    docs = render(helm, tmp_path, EVERYTHING_ON)
    claims = by_kind(docs, "PersistentVolumeClaim")
    written = {}
    for name in ("rw-runwatch-sink", "rw-runwatch-notify"):
        container, volumes = _container_and_volumes(docs, name)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        files = [a.split("=", 1)[1] for a in container["args"] if a.startswith(WRITES)]
        assert files, (name, container["args"])  # nothing left to the working directory
        for path in files:
            (mount,) = [m for m in container["volumeMounts"]
                        if path.startswith(m["mountPath"].rstrip("/") + "/")]  # fmt: skip
            assert not mount.get("readOnly"), (name, path)
            claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
            assert claim in claims, (name, claim)
            written[name] = path
    assert written["rw-runwatch-notify"] == "/data/notify.sqlite"


def test_no_secret_value_is_inlined(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, EVERYTHING_ON)
    assert not by_kind(docs, "Secret")
    notify = by_kind(docs, "Deployment")["rw-runwatch-notify"]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in notify["containers"][0]["env"]}
    assert env["SLACK_BOT_TOKEN_FILE"]["value"] == "/var/run/secrets/slack/token"
    assert "SLACK_BOT_TOKEN" not in env
    secrets = {v["name"]: v["secret"]["secretName"] for v in notify["volumes"] if "secret" in v}
    assert secrets == {"slack-token": "runwatch-slack", "kafka-sasl": "kafka-sasl",
                       "kafka-ca": "kafka-ca", "kafka-client": "kafka-client"}  # fmt: skip
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
    """The status of a GET; 0 while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except urllib.error.URLError:
        return 0


#: the flag that sets each role's HTTP port
PORT_FLAG = {"rw-runwatch-worker": "--metrics-port=", "rw-runwatch-sink": "--health-port=",
             "rw-runwatch-notify": "--health-port="}  # fmt: skip


def _probed(docs: list[Any]) -> dict[str, tuple[list[str], set[str]]]:
    """Per Deployment: its args and the paths its probes ask, checked to be on the port
    its args serve."""
    out = {}
    for name, deployment in by_kind(docs, "Deployment").items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        probes = [container[k] for k in ("livenessProbe", "readinessProbe", "startupProbe")]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert all(probe["httpGet"]["port"] == "metrics" for probe in probes), name
        assert PORT_FLAG[name] + str(ports["metrics"]) in container["args"], name
        out[name] = (container["args"], {probe["httpGet"]["path"] for probe in probes})
    return out


def test_probes_point_at_paths_the_worker_serves(helm: str, tmp_path: Path) -> None:
    probed = _probed(render(helm, tmp_path, EVERYTHING_ON))
    assert set(probed) == set(PORT_FLAG)  # every role is probed
    _, paths = probed["rw-runwatch-worker"]
    assert paths == {"/healthz", "/readyz"}

    async def served() -> dict[str, int]:
        server = AsyncMetricsServer(lambda: b"", 0, "127.0.0.1", ready=lambda: (True, "ok"))
        await server.start()
        try:
            return {p: await asyncio.to_thread(_status, server.port, p) for p in paths}
        finally:
            await server.close()

    assert asyncio.run(served()) == dict.fromkeys(paths, 200)


def test_sink_and_notify_serve_what_their_probes_ask(
    helm: str, tmp_path: Path, kafka_broker: str
) -> None:
    """`runwatch sink` and `runwatch notify` run with the rendered args (Kafka, files and
    the port made local) and answer every probed path with 200 once caught up."""
    docs = render(helm, tmp_path, EVERYTHING_ON)
    probed = _probed(docs)
    notify_toml = by_kind(docs, "ConfigMap")["rw-runwatch-notify"]["data"]["notify.toml"]
    (tmp_path / "notify.toml").write_text(notify_toml)
    (tmp_path / "token").write_text(SECRET_TOKEN)
    asyncio.run(ensure_topics(kafka_broker, Topics(prefix="prod."), 1))
    slack = FakeSlack(token=SECRET_TOKEN, channels=("#training-alerts",))
    local = {"--kafka=": kafka_broker, "--db=": str(tmp_path / "h.duckdb"),
             "--config=": str(tmp_path / "notify.toml"),
             "--state=": str(tmp_path / "state.sqlite")}  # fmt: skip
    procs: dict[str, tuple[Proc, int]] = {}
    try:
        for name in ("rw-runwatch-sink", "rw-runwatch-notify"):
            args, paths = probed[name]
            assert paths == {"/healthz", "/readyz"}, name
            port = free_port()
            local["--health-port="] = str(port)
            args = [next((f + v for f, v in local.items() if a.startswith(f)), a) for a in args]
            if name.endswith("notify"):
                args += ["--slack-url", slack.url]
            env = {"SLACK_BOT_TOKEN_FILE": str(tmp_path / "token")}
            procs[name] = (Proc(args, env), port)
        for name, (proc, port) in procs.items():
            for path in sorted(probed[name][1]):
                ok = partial(lambda port, path: _status(port, path) == 200, port, path)
                wait_for(ok, f"{name} {path}", proc)
    finally:
        for proc, _ in procs.values():
            proc.stop()
        slack.close()
    for name, (proc, _) in procs.items():
        assert proc.proc.returncode == 0, (name, proc.lines[-20:])


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


# -- Kafka TLS / SASL --------------------------------------------------------------------------

KAFKA_ROLES = ("rw-runwatch-worker", "rw-runwatch-sink", "rw-runwatch-notify")


def _container_and_volumes(docs: list[Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = by_kind(docs, "Deployment")[name]["spec"]["template"]["spec"]
    return pod["containers"][0], {v["name"]: v for v in pod["volumes"]}


def _file_of(container: dict[str, Any], volumes: dict[str, Any], path: str) -> tuple[str, str]:
    """(Secret name, key) behind a file path in the container."""
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix):
            assert mount.get("readOnly") is True
            secret = volumes[mount["name"]]["secret"]
            item = path[len(prefix) :]
            keys = {i["path"]: i["key"] for i in secret.get("items", [])} or {item: item}
            return secret["secretName"], keys[item]
    raise AssertionError(f"{path} is on no mounted volume")


def test_kafka_security_reaches_every_role_from_secrets_only(helm: str, tmp_path: Path) -> None:
    from runwatch.emitters import env as variables

    docs = render(helm, tmp_path, EVERYTHING_ON)
    for name in KAFKA_ROLES:
        container, volumes = _container_and_volumes(docs, name)
        env = {e["name"]: e for e in container["env"] if e["name"].startswith("RUNWATCH_KAFKA")}
        known = {v for n, v in vars(variables).items() if n.startswith("KAFKA_")}
        assert set(env) <= known, f"{name}: variables runwatch does not read"
        value = {k: e.get("value") for k, e in env.items()}
        assert value["RUNWATCH_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", name
        assert value["RUNWATCH_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
        assert value["RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME"] == "false"
        ref = env["RUNWATCH_KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "kafka-sasl", "key": "user"}
        assert "RUNWATCH_KAFKA_SASL_PASSWORD" not in env  # a file, never a value
        files = {
            "RUNWATCH_KAFKA_SASL_PASSWORD_FILE": ("kafka-sasl", "pass"),
            "RUNWATCH_KAFKA_SSL_CAFILE": ("kafka-ca", "ca.crt"),
            "RUNWATCH_KAFKA_SSL_CERTFILE": ("kafka-client", "tls.crt"),
            "RUNWATCH_KAFKA_SSL_KEYFILE": ("kafka-client", "tls.key"),
        }
        for variable, secret_and_key in files.items():
            assert _file_of(container, volumes, value[variable]) == secret_and_key, variable


def test_the_rendered_settings_are_what_runwatch_accepts(helm: str, tmp_path: Path) -> None:
    """The worker's rendered variables, with the mounted files made real, pass the same
    validation the roles do at start."""
    from runwatch.dev.tls import make_certificates
    from runwatch.emitters.kafka_security import KafkaSecurity

    make_certificates(tmp_path / "pem")
    made = {"pass": "secret-from-the-secret", "ca.crt": (tmp_path / "pem/ca.pem").read_text(),
            "tls.crt": (tmp_path / "pem/client.pem").read_text(),
            "tls.key": (tmp_path / "pem/client.key").read_text()}  # fmt: skip
    container, _ = _container_and_volumes(render(helm, tmp_path, EVERYTHING_ON), KAFKA_ROLES[0])
    environ = {"RUNWATCH_KAFKA_SASL_USERNAME": "alice"}  # what the secretKeyRef gives
    for e in container["env"]:
        if "value" in e and e["name"].startswith("RUNWATCH_KAFKA"):
            value = e["value"]
            if value.startswith("/var/run/secrets/"):
                local = tmp_path / "secrets" / value.lstrip("/")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(made[local.name])
                value = str(local)
            environ[e["name"]] = value
    security = KafkaSecurity.from_env(environ)
    assert security.describe().startswith("SASL_SSL, SCRAM-SHA-512 as alice")
    assert security.password == "secret-from-the-secret"
    assert security.certfile is not None


def test_a_plaintext_kafka_renders_no_security_settings(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, None, "kafka.bootstrap=kafka:9092", "notify.enabled=true",
                  "notify.slackToken.existingSecret=s")  # fmt: skip
    for name in KAFKA_ROLES:
        container, volumes = _container_and_volumes(docs, name)
        assert not [e for e in container.get("env", []) if "KAFKA" in e["name"]]
        assert not [v for v in volumes if v.startswith("kafka-")]
    validate(docs)


def test_tls_only_and_sasl_only_pick_their_protocols(helm: str, tmp_path: Path) -> None:
    base = ["kafka.bootstrap=kafka:9092"]
    cases = {
        "SSL": ["kafka.tls.enabled=true", "kafka.tls.useSystemCAs=true"],
        "SASL_PLAINTEXT": ["kafka.sasl.enabled=true", "kafka.sasl.mechanism=PLAIN",
                           "kafka.sasl.existingSecret.name=kafka-sasl"],
    }  # fmt: skip
    for protocol, sets in cases.items():
        docs = render(helm, tmp_path, None, *base, *sets)
        validate(docs)
        container, _ = _container_and_volumes(docs, "rw-runwatch-sink")
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["RUNWATCH_KAFKA_SECURITY_PROTOCOL"] == protocol
        if protocol == "SSL":  # publicly trusted brokers: the image's CAs, no CA file
            assert "RUNWATCH_KAFKA_SSL_CAFILE" not in env


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (["kafka.sasl.enabled=true"], ["kafka.sasl.existingSecret.name"]),
        (["kafka.tls.enabled=true"], ["kafka.tls.caSecret.name"]),
        (["kafka.sasl.enabled=true", "kafka.sasl.existingSecret.name=s",
          "kafka.sasl.mechanism=GSSAPI"], ["kafka.sasl.mechanism", "SCRAM-SHA-512"]),
        ([f"kafka.sasl.password={SECRET_TOKEN}"], ["kafka.sasl", "password"]),
        ([f"kafka.sasl.existingSecret.password={SECRET_TOKEN}"], ["password"]),
        (["kafka.tls.clientCertSecret.name=c"],
         ["kafka.tls.clientCertSecret", "kafka.tls.enabled"]),
    ],
)  # fmt: skip
def test_bad_kafka_security_values_fail_readably(
    helm: str, sets: list[str], words: list[str]
) -> None:
    err = failure(helm, "kafka.bootstrap=kafka:9092", *sets)
    for word in words:
        assert word in err, err


def test_every_role_knows_the_node_it_runs_on(helm: str, tmp_path: Path) -> None:
    """Contract section 8: `src.host` names the node; in a pod the host name is the pod's,
    so the chart hands each role the downward API's spec.nodeName as RUNWATCH_NODE."""
    node = {"name": "RUNWATCH_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    kafka = render(helm, tmp_path, EVERYTHING_ON)
    alone = render(helm, tmp_path, None, "mode=serve")
    pods = [d for d in [*kafka, *alone] if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(pods) == 4, [d["metadata"]["name"] for d in pods]  # worker, sink, notify, serve
    for pod in pods:
        for container in pod["spec"]["template"]["spec"]["containers"]:
            assert node in container["env"], pod["metadata"]["name"]

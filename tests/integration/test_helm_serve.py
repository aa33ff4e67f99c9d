"""The Helm chart's serve-only mode (`mode: serve`): `runwatch serve` alone in a StatefulSet
with a volume for its history, Slack's token from a Secret, Prometheus scrape annotations --
no Kafka. Rendered with the real `helm`, validated against the Kubernetes schemas, run with
the rendered arguments, and its NOTES.txt's commands checked against the command line and
run against it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_helm import CHART, _status, by_kind, failure, render, validate
from test_live_surfaces import Proc, free_port, wait_for

from harness.slack_server import FakeSlack
from runwatch import cli

pytestmark = pytest.mark.integration

TOKEN = "xoxb-serve-mode-0123456789"
SERVE_ONLY = """
mode: serve
rules: |
  [rules.zero_reward]
  steps = 3
serve:
  persistence: {size: 30Gi, storageClass: fast-ssd}
  tokenSecret: {existingSecret: runwatch-api, key: token}
notify:
  enabled: true
  channel: "#training-alerts"
  slackToken: {existingSecret: runwatch-slack, key: token}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
"""


def serve_docs(helm: str, tmp_path: Path, values: str = SERVE_ONLY) -> list[Any]:
    docs = render(helm, tmp_path, values)
    validate(docs)
    return docs


def test_serve_mode_is_one_statefulset_with_its_volume_and_no_kafka(
    helm: str, tmp_path: Path
) -> None:
    docs = serve_docs(helm, tmp_path)
    assert not by_kind(docs, "Deployment")  # no worker, sink or notifier
    assert not by_kind(docs, "PodDisruptionBudget")
    (name,) = by_kind(docs, "StatefulSet")
    assert name == "rw-runwatch-serve"
    spec = by_kind(docs, "StatefulSet")[name]["spec"]
    assert spec["replicas"] == 1
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "30Gi"
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    pod = spec["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8787"
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    (container,) = pod["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/data"] == "data"
    args = container["args"]
    assert "--db=/data/runwatch.duckdb" in args
    assert "--slack-config=/etc/runwatch/slack.toml" in args
    assert "--config=/etc/runwatch/rules.toml" in args
    parsed = cli.build_parser("serve").parse_args(args)  # runwatch serve takes them
    assert parsed.token_file == "/var/run/secrets/runwatch/token/token"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SLACK_BOT_TOKEN_FILE"] == "/var/run/secrets/slack/token"
    assert env["RUNWATCH_NOTIFY_DB"].startswith("/data/")  # the ledger survives restarts
    secrets = {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    assert secrets == {"runwatch-slack", "runwatch-api"}
    assert not by_kind(docs, "Secret")  # no secret value is inlined
    service = by_kind(docs, "Service")["rw-runwatch-serve"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    monitor = by_kind(docs, "ServiceMonitor")["rw-runwatch-serve"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["bearerTokenSecret"] == {"name": "runwatch-api", "key": "token"}


def test_serve_mode_needs_nothing_but_its_value(helm: str, tmp_path: Path) -> None:
    docs = serve_docs(helm, tmp_path, "mode: serve\n")
    assert set(by_kind(docs, "StatefulSet")) == {"rw-runwatch-serve"}
    done = subprocess.run([helm, "lint", "--strict", str(CHART), "--set", "mode=serve"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (["mode=serv"], ["mode", "serve"]),
        (["mode=serve", "notify.enabled=true"], ["notify.slackToken.existingSecret"]),
        (["mode=serve", "notify.enabled=true", "notify.slackToken.existingSecret=s"],
         ["notify.channel"]),
        (["mode=serve", f"serve.tokenSecret.token={TOKEN}"], ["serve.tokenSecret", "token"]),
    ],
)  # fmt: skip
def test_bad_serve_values_fail_readably(helm: str, sets: list[str], words: list[str]) -> None:
    err = failure(helm, *sets)
    for word in words:
        assert word in err, err


def notes(helm: str, tmp_path: Path, values: str) -> str:
    """NOTES.txt as helm renders it (helm template leaves it out: rendered from a copy)."""
    chart = Path(tempfile.mkdtemp(dir=tmp_path)) / "chart"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "NOTES.txt").rename(chart / "notes.src")
    (chart / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n"
        '{{ tpl (.Files.Get "notes.src") . | indent 4 }}\n'
    )
    path = tmp_path / "v.yaml"
    path.write_text(values)
    done = subprocess.run([helm, "template", "rw", str(chart), "--namespace", "ml", "-f",
                           str(path), "--show-only", "templates/notes.yaml"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(yaml.safe_load(done.stdout)["data"]["notes"])


def commands(text: str) -> list[list[str]]:
    """The `runwatch ...` command lines a text shows (after `--`, nothing: the job's)."""
    out = []
    for line in text.splitlines():
        found = re.search(r"(?:^|\s)(runwatch\s+[a-z].*)$", line.strip())
        if found and not found.group(1).startswith("runwatch {"):
            words = shlex.split(found.group(1))[1:]
            out.append(words[: words.index("--")] if "--" in words else words)
    return out


def test_notes_say_how_to_reach_it_and_query_the_history(helm: str, tmp_path: Path) -> None:
    said = notes(helm, tmp_path, SERVE_ONLY)
    assert "RUNWATCH_URL=http://rw-runwatch-serve.ml.svc:8787" in said
    assert "kubectl -n ml port-forward svc/rw-runwatch-serve 8787:8787" in said
    shown = commands(said)
    assert {c[0] for c in shown} >= {"alerts", "runs", "show", "sql", "watch", "notify"}
    for words in shown:  # each parses: the command and its flags exist
        try:
            cli.build_parser(words[0]).parse_args(words)
        except SystemExit as err:
            raise AssertionError(f"NOTES.txt shows a command runwatch refuses: {words}") from err
    kafka = notes(helm, tmp_path, "kafka: {bootstrap: 'k:9092'}\n")
    assert "running against Kafka at k:9092" in kafka


#: what Kubernetes puts in a pod's env from its downward API (`valueFrom.fieldRef`)
POD_FIELDS = {"spec.nodeName": "gpu-node-7", "metadata.name": "rw-runwatch-serve-0",
              "metadata.namespace": "ml"}  # fmt: skip


def from_the_pod(source: dict[str, Any]) -> str:
    """A `valueFrom` as the kubelet resolves it; any other kind of source fails the test."""
    return POD_FIELDS[source["fieldRef"]["fieldPath"]]


def test_serve_runs_with_the_rendered_args_and_answers_its_notes(helm: str, tmp_path: Path) -> None:
    """`runwatch serve` with the rendered arguments (its volume, config and secrets made
    local) is ready on the probed paths, and the history commands NOTES.txt shows work."""
    docs = serve_docs(helm, tmp_path)
    (container,) = by_kind(docs, "StatefulSet")["rw-runwatch-serve"]["spec"]["template"][
        "spec"]["containers"]  # fmt: skip
    maps = {k: v for d in by_kind(docs, "ConfigMap").values() for k, v in d["data"].items()}
    slack = FakeSlack(token=TOKEN, channels=("#training-alerts",))
    etc, data, port = tmp_path / "etc", tmp_path / "data", free_port()
    etc.mkdir()
    data.mkdir()
    (etc / "rules.toml").write_text(maps["rules.toml"])
    (etc / "slack.toml").write_text(maps["slack.toml"] + f'base_url = "{slack.url}"\n')
    (tmp_path / "slack-token").write_text(TOKEN)
    (tmp_path / "api-token").write_text("api-secret")
    local = {"/data/": f"{data}/", "/etc/runwatch/": f"{etc}/",
             "/var/run/secrets/runwatch/token/token": str(tmp_path / "api-token")}  # fmt: skip

    def here(value: str) -> str:
        for far, near in local.items():
            value = value.replace(far, near)
        return value

    args = [here(a) for a in container["args"] if not a.startswith("--port=")]
    args += [f"--port={port}", "--host=127.0.0.1"]
    serve: Proc | None = None
    try:  # the fake Slack is closed whatever fails from here on
        env = {e["name"]: here(e["value"]) if "value" in e else from_the_pod(e["valueFrom"])
               for e in container["env"]}  # fmt: skip
        env["SLACK_BOT_TOKEN_FILE"] = str(tmp_path / "slack-token")
        serve = Proc(args, env)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            path = container[probe]["httpGet"]["path"]
            wait_for(lambda path=path: _status(port, path) == 200, path, serve)
        event = {"v": 1, "id": "e1", "ts": time.time(), "run": "job-1", "kind": "run.started",
                 "src": {"component": "trainer"}}  # fmt: skip
        auth = {"Authorization": "Bearer api-secret"}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/events",
                                         json.dumps(event).encode(), headers=auth)  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
        said = notes(helm, tmp_path, SERVE_ONLY)
        env = {"RUNWATCH_URL": f"http://127.0.0.1:{port}", "RUNWATCH_TOKEN": "api-secret"}

        def runwatch(words: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "runwatch.cli", *map(here, words)],
                                  capture_output=True, text=True, timeout=60, check=False,
                                  env=env)  # fmt: skip

        wait_for(lambda: "job-1" in runwatch(["runs"]).stdout, "the event in the history", serve)
        # by URL as through the port-forward, and in the pod (the file serve writes)
        queries = [c for c in commands(said) if c[0] in ("runs", "sql")]
        assert any("--db" in c for c in queries)
        for words in queries:
            done = runwatch(words)
            assert done.returncode == 0, (words, done.stderr)
            if words[0] == "runs" or "runs" in words[1]:
                assert "job-1" in done.stdout, (words, done.stdout)
    finally:
        if serve is not None:
            serve.stop()
        slack.close()
    assert serve is not None
    assert serve.proc.returncode == 0, serve.lines[-20:]

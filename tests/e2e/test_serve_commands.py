"""A `serve` user's commands, by URL: `alerts` (and `--follow`), `runs`, `show`, `sql`,
`silence` and `resume` work against `runwatch serve` by its URL (`--url`, or $RUNWATCH_URL,
the address the emitters send to) and print what they print from a file or Kafka."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.slack_server import FakeSlack
from runwatch.dev import envelope
from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

RUNWATCH = [sys.executable, "-m", "runwatch.cli"]
TOKEN = "xoxb-test-token"


def runwatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUNWATCH_", "SLACK_"))}
    return subprocess.run([*RUNWATCH, *args], capture_output=True, text=True, timeout=60,
                          check=False, env={**clean, **(env or {})})  # fmt: skip


def event(kind: str, run: str = "grpo-7b", **fields: Any) -> dict[str, Any]:
    src = {"component": "trainer", "host": "node-1", "pid": 7}
    return envelope.event(kind, time.time(), run, src, **fields)


def send(serve: ServeProcess, *events: dict[str, Any]) -> None:
    import urllib.request

    body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    with urllib.request.urlopen(urllib.request.Request(serve.url + "/v1/events", body),
                                timeout=30) as resp:  # fmt: skip
        assert resp.status == 200


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def serve(tmp_path: Path, slack: FakeSlack) -> Iterator[ServeProcess]:
    config = tmp_path / "slack.toml"
    config.write_text(f'[slack]\nchannel = "C-ALERTS"\nstate = "{tmp_path / "notify.sqlite"}"\n'
                      f'base_url = "{slack.url}"\n')  # fmt: skip
    with ServeProcess(tmp_path / "h.duckdb", args=["--slack-config", str(config)],
                      env={"SLACK_BOT_TOKEN": TOKEN}) as running:  # fmt: skip
        yield running


def until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 60
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_alerts_by_url_and_follow_through_a_restart_of_nothing(serve: ServeProcess) -> None:
    follow = subprocess.Popen([*RUNWATCH, "alerts", "--follow"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RUNWATCH_URL": serve.url})  # fmt: skip
    try:
        send(serve, event("run.started"), event("component.failed", error="boom", how="exception"))
        first = follow.stdout.readline()  # type: ignore[union-attr]
        assert "FIRING   critical component_failed  run=grpo-7b" in first
        send(serve, event("run.finished", status="ok"))
        second = follow.stdout.readline()  # type: ignore[union-attr]
        assert "resolved" in second
        assert "component_failed" in second
    finally:
        follow.send_signal(signal.SIGTERM)
        _out, err = follow.communicate(timeout=30)
    assert follow.returncode == 0, err
    printed = runwatch("alerts", "--url", serve.url).stdout.splitlines()
    assert printed == [first.rstrip("\n"), second.rstrip("\n")]
    as_json = runwatch("alerts", "--url", serve.url, "--json", "--run", "grpo-7b").stdout
    assert [json.loads(line)["state"] for line in as_json.splitlines()] == ["firing", "resolved"]


def test_runs_show_and_sql_by_url_print_what_the_file_prints(serve: ServeProcess) -> None:
    send(serve, event("run.started", total_steps=10), event("step.started", step=1),
         event("step.done", step=1, duration_s=2.0), event("reward", step=1, mean=0.5))  # fmt: skip
    env = {"RUNWATCH_URL": serve.url}
    runs = until(lambda: "grpo-7b" in (r := runwatch("runs", env=env)).stdout and r,
                 "the run in serve's history")  # fmt: skip
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.splitlines()[2].split()[:3] == ["grpo-7b", "running", "1/10"]
    shown = runwatch("show", "grpo-7b", "--url", serve.url)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("run grpo-7b  status running")
    assert "0.5" in shown.stdout
    missing = runwatch("show", "grpo-7", "--url", serve.url)
    assert missing.returncode == 2
    assert "no run 'grpo-7' in the history (closest: grpo-7b)" in missing.stderr
    sql = runwatch("sql", "SELECT run, step FROM steps", "--url", serve.url, "--format", "csv")
    assert sql.stdout == "run,step\ngrpo-7b,1\n", sql.stderr
    refused = runwatch("sql", "DELETE FROM events", "--url", serve.url)
    assert refused.returncode == 2
    assert "refused: DELETE" in refused.stderr
    # --db still reads the file (serve holds it only while it writes a batch)
    from_file = runwatch("runs", "--db", str(serve.db), env=env)
    assert from_file.stdout == runs.stdout


def test_silence_and_resume_by_url(serve: ServeProcess) -> None:
    added = runwatch("silence", "grpo-7b", "zero_reward", "--for", "2h", "--comment", "known",
                     "--url", serve.url)  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("silence 1: zero_reward of grpo-7b until ")
    listed = runwatch("silence", "--list", env={"RUNWATCH_URL": serve.url}).stdout
    assert "grpo-7b zero_reward" in listed
    assert "# known" in listed
    assert runwatch("silence", "--remove", "1", "--url", serve.url).stdout == "removed silence 1\n"
    gone = runwatch("silence", "--remove", "1", "--url", serve.url)
    assert gone.returncode != 0
    assert "no silence with id 1" in gone.stderr
    send(serve, event("run.started", config={"component_failed": {"action": "pause"}}),
         event("component.failed", error="boom", how="exception"))  # fmt: skip
    done = runwatch("resume", "grpo-7b", "--url", serve.url, "--reason", "fixed")
    assert done.returncode == 0, done.stderr
    assert "run grpo-7b: resumed (1 firing alert lifted)" in done.stderr


def test_a_serve_that_is_not_there_is_named(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"  # discard: nothing answers HTTP there
    for args in (["alerts"], ["runs"], ["show", "r"], ["silence", "--list"]):
        gone = runwatch(*args, "--url", url)
        assert gone.returncode == 1, (args, gone.stderr)
        assert f"runwatch serve at {url}: " in gone.stderr
    nowhere = runwatch("alerts")
    assert nowhere.returncode == 2
    assert "give --url (runwatch serve) or --kafka" in nowhere.stderr


def test_a_quick_fire_and_resolve_reaches_slack_as_one_message(
    serve: ServeProcess, slack: FakeSlack
) -> None:
    """The issue's own: a watched command prints an uncaught exception and exits 0 a moment
    later -- the run ends ok, and serve's notifier edits the firing's message to the resolved
    state instead of posting twice (a crash that ended the run is both: test_crash_to_slack)."""
    send(serve, event("run.started"),
         event("component.failed", error="RuntimeError: CUDA error", how="exception"),
         event("run.finished", status="ok"))  # fmt: skip

    def folded() -> Any:
        roots = slack.roots()
        if not roots:
            return None
        root = roots[0]
        shows_both = "[RESOLVED]" in root.text and "after it fired" in root.text
        return root.metadata and root.updates and shows_both and root

    root = until(folded, "the resolve folded into the firing's message")
    assert slack.replies(root) == []
    assert slack.count("chat.postMessage") == 1
    assert "component_failed" in root.text

"""`runwatch silence` and `runwatch notify` as a user types them: add, list, remove; and
the notifier refusing to start with one clear line when something is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RUNWATCH = str(Path(sys.executable).parent / "runwatch")


def runwatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    return subprocess.run(
        [RUNWATCH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**base, **(env or {})},
    )


def test_silence_add_list_remove(tmp_path: Path) -> None:
    state = str(tmp_path / "notify.sqlite")
    added = runwatch(
        "silence", "grpo-run", "zero_reward", "--for", "2h", "--comment", "known", "--state", state
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("silence 1: zero_reward of grpo-run until ")
    assert runwatch("silence", "grpo-run", "--for", "1h30m", "--state", state).returncode == 0
    listed = runwatch("silence", "--list", "--state", state).stdout.splitlines()
    assert len(listed) == 2
    assert "grpo-run zero_reward" in listed[0]
    assert "# known" in listed[0]
    assert "(all rules)" in listed[1]
    assert runwatch("silence", "--remove", "1", "--state", state).stdout == "removed silence 1\n"
    gone = runwatch("silence", "--remove", "1", "--state", state)
    assert gone.returncode == 1
    assert "no silence with id 1" in gone.stderr
    assert len(runwatch("silence", "--list", "--state", state).stdout.splitlines()) == 1


def test_silence_refuses_bad_input(tmp_path: Path) -> None:
    state = str(tmp_path / "notify.sqlite")
    bad = runwatch("silence", "run", "--for", "2x", "--state", state)
    assert bad.returncode == 2
    assert "'2x' is not a duration" in bad.stderr
    missing = runwatch("silence", "run", "--state", state)
    assert missing.returncode == 2
    assert "--for DURATION" in missing.stderr


def test_notify_says_what_is_missing(tmp_path: Path) -> None:
    no_channel = runwatch("notify", "--kafka", "127.0.0.1:1")
    assert no_channel.returncode == 2
    assert "no Slack channel" in no_channel.stderr
    no_token = runwatch("notify", "--kafka", "127.0.0.1:1", "--channel", "#a")
    assert no_token.returncode == 2
    assert "SLACK_BOT_TOKEN" in no_token.stderr
    secret = "xoxb-e2e-SECRET"
    no_kafka = runwatch(
        "notify",
        "--kafka",
        "127.0.0.1:1",
        "--channel",
        "#a",
        "--state",
        str(tmp_path / "s.sqlite"),
        env={"SLACK_BOT_TOKEN": secret},
    )
    assert no_kafka.returncode == 1
    assert "no Kafka broker at 127.0.0.1:1" in no_kafka.stderr
    assert secret not in no_kafka.stderr + no_kafka.stdout

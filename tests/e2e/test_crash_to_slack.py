"""A crash reaches Slack as both of its messages, through `runwatch serve` (issue 46; contract
section 8): a job under `runwatch watch` fails -- `component_failed` fires -- and its run
ends, which resolves what is still firing with `details.reason: "run_finished"`. The strict
Slack gets the firing as a thread's root and the resolution as a reply in that thread: never
folded into one edited message, however soon after the firing it came. docs/slack.md's
first alert ("With `runwatch serve`"), as written there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from harness.slack_server import FakeSlack, Message
from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

TOKEN = "xoxb-test-token"
RUN = "first-job"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=())
    fake.add_channel("#rl-alerts", "C-ALERTS")
    try:
        yield fake
    finally:
        fake.close()


def showing(slack: FakeSlack, alert_id: str) -> list[Message]:
    """The messages whose metadata carries `alert_id` (posted with it, or edited in)."""
    return [m for m in list(slack.messages) if alert_id in m.shown]


def component_failed(serve: ServeProcess) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The run's `component_failed` firing and its resolution, once serve has both."""
    alerts = [a for a in serve.get("/v1/alerts")["alerts"]
              if a["run"] == RUN and a["rule"] == "component_failed"]  # fmt: skip
    fired = [a for a in alerts if a["state"] == "firing"]
    resolved = [a for a in alerts if a["state"] == "resolved"]
    return (fired[0], resolved[0]) if fired and resolved else None


def test_a_crash_that_ends_its_run_is_a_root_and_a_reply_in_slack(
    tmp_path: Path, slack: FakeSlack
) -> None:
    config = tmp_path / "slack.toml"
    config.write_text(
        f'[slack]\nchannel = "#rl-alerts"\nstate = "{tmp_path / "notify.sqlite"}"\n'
        f'base_url = "{slack.url}"\n'
        "fold_within = 60\n"  # on (the default): a quick resolve would be folded, but not this
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUNWATCH_", "SLACK_"))}
    with ServeProcess(tmp_path / "h.duckdb", args=["--slack-config", str(config)],
                      env={"SLACK_BOT_TOKEN": TOKEN}) as serve:  # fmt: skip
        job = subprocess.run(
            [sys.executable, "-m", "runwatch.cli", "watch", "--run", RUN, "--url", serve.url,
             "--", sys.executable, "-c", "import sys; sys.exit(3)"],
            capture_output=True, text=True, timeout=120, env=clean,
        )  # fmt: skip
        assert job.returncode == 3, job.stderr  # the job's own status, passed through
        fired, resolved = wait_for(lambda: component_failed(serve), "the crash never resolved")
        assert resolved["details"]["reason"] == "run_finished", resolved
        assert resolved["details"]["status"] == "failed", resolved
        wait_for(lambda: showing(slack, resolved["id"]), "the resolution never reached Slack")

    (root,) = showing(slack, fired["id"])
    assert root.thread_ts is None, "the firing is a thread's root"
    for said in ("component_failed", RUN, "exited with status 3"):
        assert said in root.text, root.text
    # the resolution: a reply in the firing's thread, not an edit of the firing's message
    (reply,) = showing(slack, resolved["id"])
    assert reply is not root, f"the resolve was folded into the firing: {root.text!r}"
    assert reply.thread_ts == root.ts
    for said in ("Resolved", "the run finished (failed)"):
        assert said in reply.text, reply.text
    assert slack.replies(root) == [reply]
    assert slack.count("chat.postMessage") == 2  # both messages, and nothing more

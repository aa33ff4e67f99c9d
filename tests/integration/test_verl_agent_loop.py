"""verl's agent loop seen per trajectory (`runwatch.emitters.verl.patch_agent_loop`), against
verl 0.9.1's real module: its `AgentLoopWorker` runs its `ToolAgentLoop` over 8 samples of
one step in the verl venv (scripts/verl_env.sh), through a real `runwatch serve`. The last
sample's tool call (a code sandbox) never returns while the inference server is idle:
`inference_idle_with_pending` fires and says the trajectory sits in its tool call -- from
verl itself, with no progress bar named in a config.

What could not be verl's here: the LLM server (no GPU, and verl's vLLM server needs Ray
placement on GPUs: a stand-in answers with token ids), the reward loop (a Ray actor pool:
off, so `trajectory.done` has no reward), and the worker's Ray-side `__init__` (it loads a
model's config and the tools from files: the attributes its methods read are set by
tests/integration/verl/agent_loop_job.py, which says exactly which).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import tiny_model_in, wait_for

from runwatch.dev.launch import ServeProcess

#: pytest-timeout counts a test's fixtures: the first test here also builds .cache/verl-env
#: (first use on a machine: minutes of downloads), so the bound is the build's and a run's
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".cache" / "verl-env" / "bin" / "python"
JOB = ROOT / "tests" / "integration" / "verl" / "agent_loop_job.py"
RULES = """
[rules.inference_idle_with_pending]
idle_for = 3
"""


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verl venv (built once per machine) and a tiny tokenizer of this module's own."""
    return tiny_model_in("verl-env", tmp_path_factory.mktemp("tiny-llama"))


def test_a_tool_call_that_never_returns_is_named_by_the_idle_alert(
    tmp_path: Path, tokenizer: Path
) -> None:
    config = tmp_path / "rules.toml"
    config.write_text(RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    env["RUNWATCH_SPOOL"] = str(tmp_path / "spool")
    env["RUNWATCH_NODE"] = "gpu-node-3"  # as the Helm chart's downward API sets it
    lines: list[str] = []
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        job = subprocess.Popen([str(PYTHON), str(JOB), serve.url, "r-verl", str(tokenizer)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)  # fmt: skip
        assert job.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(job.stdout or ()), daemon=True)
        reader.start()
        try:

            def idle() -> dict[str, Any] | None:
                alerts = serve.get("/v1/alerts?state=firing")["alerts"]
                return next((a for a in alerts if a["rule"] == "inference_idle_with_pending"
                             and a["run"] == "r-verl"), None)  # fmt: skip

            alert = wait_for(idle, "the idle alert", timeout=240)
            done = [x for x in lines if x.startswith("sample ")]
        finally:
            job.kill()
            job.wait()
            reader.join(30)
            job.stdout.close()
    assert len(done) == 7, "".join(lines[-30:])
    assert all(" done: _InternalAgentLoopOutput" in x for x in done), done
    summary = alert["summary"]
    assert summary.startswith("7 of 8 trajectories done, the last one (s3-i7-n0) has sat in "
                              "tool for "), summary  # fmt: skip
    assert "while inference is idle (vllm-0)" in summary
    # the tool's config names its endpoint, a sandbox on the job's own machine: the alert
    # names the service it waits on by that machine's host name (a pod's on Kubernetes,
    # whatever RUNWATCH_NODE says: emitters/deps.py), never `localhost`
    machine = socket.gethostname().lower()
    assert alert["details"]["dep"] == f"tool@{machine}:8080", alert["details"]

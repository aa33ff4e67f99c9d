"""The verl integration against verl's real `Tracking` (verl 0.9.1 from PyPI, its
tracking.py loaded by path: harness.verl_wheel): `patch_tracking` gives every tracker
the runwatch backend, the metrics verl logs reach `runwatch serve` as step events, and with
`RUNWATCH_GUARD=zero_reward` alone the training loop pauses inside `Tracking.log` once the
rule fires, and goes on after `runwatch resume`."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from harness.verl_wheel import MODULE, VERL_VERSION, load_tracking
from runwatch.dev.launch import ServeProcess
from runwatch.emitters import Emitter, verl
from runwatch.emitters.guard import Decision

pytestmark = pytest.mark.slow

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "verl"
DEADLINE_S = 60.0


def verl_step(score: float) -> dict[str, float]:
    """A step's metrics as verl's trainer hands them to Tracking.log (key names of verl's
    metric_utils / dp_actor)."""
    return {"critic/score/mean": score, "actor/entropy": 0.6, "actor/pg_loss": 0.1,
            "response_length/mean": 400.0, "timing_s/gen": 10.0, "timing_s/step": 15.0}  # fmt: skip


def test_the_real_verl_tracking_carries_the_backend_and_the_circuit_breaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracking = load_tracking(CACHE)
    assert tracking.__file__.endswith(f"verl-{VERL_VERSION}/verl/utils/tracking.py")
    config = tmp_path / "rules.toml"
    config.write_text("[rules.zero_reward]\nsteps = 3\n")
    run = "verl-real-tracking"
    monkeypatch.setenv("RUNWATCH_GUARD", "zero_reward")
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        em = Emitter(run, "trainer", url=serve.url, heartbeat=False, spool=tmp_path / "spool")
        original = verl.patch_tracking(em, module=MODULE)
        try:
            tracker = tracking.Tracking("proj", "exp", default_backend=[])
            backend = tracker.logger[verl.BACKEND]
            assert backend.guard is not None  # by configuration alone
            paused: list[Decision] = []
            backend.on_pause = paused.append
            go, logged = threading.Semaphore(0), []

            def train() -> None:
                for step in range(1, 7):
                    go.acquire()
                    tracker.log(data=verl_step(0.0), step=step)  # the reward is gone
                    logged.append(step)

            loop = threading.Thread(target=train)
            loop.start()
            for step in (1, 2, 3):
                go.release()
                wait_for(lambda s=step: s in logged, f"step {step} logged")
            assert em.flush(timeout=30)

            def firing() -> list[dict[str, Any]]:
                alerts = serve.get("/v1/alerts?state=firing")["alerts"]
                return [a for a in alerts if a["rule"] == "zero_reward"]

            alerts = wait_for(firing, "zero_reward fires")
            assert alerts[0]["run"] == run
            assert backend.guard.refresh().action == "pause"
            go.release()  # step 4: logged, then held in Tracking.log
            wait_for(lambda: paused, "the loop pauses in Tracking.log")
            assert 4 not in logged
            done = subprocess.run(
                [sys.executable, "-m", "runwatch.cli", "resume", run, "--url", serve.url],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            wait_for(lambda: 4 in logged, "resumed: step 4 returns")
            go.release()
            go.release()
            loop.join(DEADLINE_S)
            assert logged == [1, 2, 3, 4, 5, 6]
            assert em.flush(timeout=30)
            steps = serve.get(f"/v1/runs/{run}")
            assert steps["step"] == 6  # verl's timing_s keys made step.done events
        finally:
            tracking.Tracking.__init__ = original
            em.close(timeout=5)

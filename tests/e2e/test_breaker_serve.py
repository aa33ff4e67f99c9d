"""The circuit breaker against a real `runwatch serve`: a training loop that guards on its own
run pauses at the first check after `zero_reward` fires, resumes on `runwatch resume`, pauses
again on a new firing, stops on a `stop` policy, and runs on untouched when the service is
down (fail open, said once)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import wait_for

from runwatch.dev.launch import ServeProcess
from runwatch.emitters import Emitter
from runwatch.emitters.guard import Decision

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0


def resume(url: str, run: str, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "resume", run, "--url", url, *more],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


class Trainer:
    """A training loop's steps as events, with the guard's answer after each step."""

    def __init__(self, em: Emitter, serve: ServeProcess) -> None:
        self.em, self.serve, self.step = em, serve, 0

    def firing(self, rule: str) -> int:
        alerts = self.serve.get(f"/v1/runs/{self.em.run}")["transitions"]
        return sum(a["rule"] == rule and a["state"] == "firing" for a in alerts)

    def run_step(self, reward: float, **metrics: float) -> None:
        em, step = self.em, self.step
        em.emit("step.started", step=step)
        em.emit("reward", step=step, mean=reward)
        if metrics:
            em.emit("step.metrics", step=step, metrics=metrics)
        em.emit("step.done", step=step, duration_s=1.0)
        assert em.flush(timeout=30)
        self.step += 1


def test_a_guarded_training_loop_pauses_resumes_and_fails_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "rules.toml"
    config.write_text(
        '[rules.zero_reward]\nsteps = 3\n\n[rules.non_finite_metric]\naction = "stop"\n'
    )
    run = "breaker-serve"
    changes: list[Decision] = []
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        em = Emitter(run, "trainer", url=serve.url, heartbeat=False, spool=tmp_path / "spool")
        try:
            guard = em.guard(rules={"zero_reward"}, poll_interval=0.1, on_change=changes.append)
            trainer = Trainer(em, serve)
            em.emit("run.started", labels={"team": "rl"})
            for reward in (1.0, 1.0, 0.0, 0.0):
                trainer.run_step(reward)
                assert guard.refresh().action == "run"
                assert not em.should_pause()
            trainer.run_step(0.0)  # the third zero step: zero_reward fires
            wait_for(lambda: trainer.firing("zero_reward") == 1, "zero_reward fires")
            decision = guard.refresh()
            assert decision.action == "pause"
            assert em.should_pause()
            assert not guard.should_stop()
            assert [a.rule for a in decision.alerts] == ["zero_reward"]
            assert "zero_reward firing since" in decision.reason

            # paused: the loop waits in guard.wait() until a person resumes the run
            waited: list[Decision] = []
            waiter = threading.Thread(target=lambda: waited.append(guard.wait()))
            waiter.start()
            done = resume(serve.url, run, "--reason", "checked the sandbox")
            assert done.returncode == 0, done.stderr
            assert "resumed (1 firing alert lifted)" in done.stderr
            waiter.join(DEADLINE_S)
            assert not waiter.is_alive()
            assert waited[0].action == "run"
            assert waited[0].resumed is not None
            assert waited[0].resumed.by

            # the lifted alert goes on firing, and no longer pauses
            trainer.run_step(0.0)
            assert guard.refresh().action == "run"
            # it resolves, fires again: a new alert, which pauses again
            trainer.run_step(1.0)
            for _ in range(3):
                trainer.run_step(0.0)
            wait_for(lambda: trainer.firing("zero_reward") == 2, "zero_reward fires again")
            wait_for(em.should_pause, "the guard's own thread sees the new firing")

            # the config's policy: a NaN metric stops the run (stop outranks pause)
            trainer.run_step(0.0, **{"actor/pg_loss": float("nan")})
            wait_for(guard.should_stop, "non_finite_metric's stop reaches the guard")
            assert {a.rule for a in guard.decision.alerts} == {
                "zero_reward", "non_finite_metric",
            }  # fmt: skip
            assert [c.action for c in changes][:3] == ["pause", "run", "pause"]

            # runwatch goes away: the loop runs on untouched, said once
            caplog.set_level(logging.WARNING, logger="runwatch.emitters")
            serve.stop()
            wait_for(lambda: not guard.decision.reachable, "the guard fails open")
            assert guard.decision.action == "run"
            assert not em.should_pause()
            assert guard.wait(timeout=5).action == "run"  # nothing to wait for
            for _ in range(3):
                trainer.em.emit("reward", step=trainer.step, mean=0.0)
                trainer.step += 1
            failures = guard.failures
            wait_for(lambda: guard.failures > failures + 2, "the guard keeps looking")
            said = [r for r in caplog.records if "cannot read run" in r.getMessage()]
            assert len(said) == 1, said
        finally:
            em.close(timeout=1)

"""The TRL callback, driven as transformers' Trainer drives it (the event methods with its
`TrainingArguments`, `TrainerState` and `TrainerControl`, here as plain namespaces): the
steps and logs it turns into events, TRL's unscorable reward, the summary it skips, and the
circuit breaker's stop as `control.should_training_stop`. The real GRPOTrainer runs it in
tests/integration/test_trl_grpo.py."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import read_events

from runwatch.emitters import Emitter
from runwatch.emitters.follower import RunViewFollower
from runwatch.emitters.guard import Guard
from runwatch.emitters.trl import Callback

from .test_guard import Scripted, view, wait_for

#: one logging step of TRL 1.16's GRPOTrainer (keys from trl/trainer/grpo_trainer.py)
LOGS = {"loss": 0.0, "grad_norm": 0.51, "learning_rate": 1e-4, "num_tokens": 1536.0,
        "completions/mean_length": 12.0, "completions/clipped_ratio": 1.0,
        "rewards/distinct_words/mean": 0.74, "reward": 0.74, "reward_std": 0.11,
        "frac_reward_zero_std": 0.0, "kl": 0.0, "entropy": 6.2, "step_time": 0.4,
        "epoch": 0.03}  # fmt: skip


@pytest.fixture
def em(tmp_path: Path) -> Iterator[Emitter]:
    emitter = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False)
    yield emitter
    emitter.close()


def train(cb: Callback, logs: list[dict[str, Any]], main: bool = True) -> SimpleNamespace:
    """What Trainer.train calls, one optimizer step and one log per entry of `logs`."""
    args = SimpleNamespace()
    state = SimpleNamespace(global_step=0, max_steps=len(logs), is_world_process_zero=main)
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control)
    for data in logs:
        cb.on_step_begin(args, state, control)
        state.global_step += 1
        cb.on_step_end(args, state, control)
        cb.on_log(args, state, control, logs=dict(data))
        if control.should_training_stop:
            break
    summary = {"train_runtime": 9.1, "train_samples_per_second": 3.0,
               "train_steps_per_second": 0.4, "train_loss": 0.0}  # fmt: skip
    cb.on_log(args, state, control, logs=summary)
    cb.on_train_end(args, state, control)
    return control


def test_steps_and_logs_become_the_events_the_rules_read(em: Emitter, tmp_path: Path) -> None:
    train(Callback(em, guard=False), [LOGS, {**LOGS, "reward": None}])
    events = read_events(tmp_path)
    kinds = [(e["kind"], e.get("step", e.get("n"))) for e in events]
    step = ["step.started", "step.done", "progress", "step.metrics", "reward"]
    assert kinds == [  # the final summary is no step
        ("run.started", None),
        *[(kind, 1) for kind in step],
        *[(kind, 2) for kind in step],
        ("run.finished", None),
    ]
    assert events[0]["total_steps"] == 2
    assert events[2]["duration_s"] >= 0
    assert (events[3]["n"], events[3]["total"]) == (1, 2)
    assert events[4]["metrics"]["entropy"] == 6.2
    assert events[5]["mean"] == 0.74
    # every reward function returned None: reported as a non-finite reward, not skipped
    assert math.isnan(events[10]["mean"])
    assert events[11]["status"] == "ok"


def test_an_exception_that_ends_training_is_reported_before_it_is_printed(
    em: Emitter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: printed.append(kind))
    cb = Callback(em, guard=False)
    state = SimpleNamespace(global_step=0, max_steps=3, is_world_process_zero=True)
    cb.on_train_begin(None, state, None)
    try:
        raise RuntimeError("the reward service answered 500 at step 1")
    except RuntimeError as err:
        sys.excepthook(type(err), err, err.__traceback__)  # what Python does at the end
    assert printed == [RuntimeError]
    failed = [e for e in read_events(tmp_path) if e["kind"] == "component.failed"]
    assert failed[0]["error"] == "RuntimeError: the reward service answered 500 at step 1"
    assert read_events(tmp_path)[-1]["status"] == "failed"


def test_only_the_main_process_reports_steps(em: Emitter, tmp_path: Path) -> None:
    train(Callback(em, guard=False), [LOGS], main=False)
    em.flush(timeout=5)
    assert read_events(tmp_path) == []


def test_without_an_emitter_in_the_environment_it_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runwatch.emitters import default

    monkeypatch.delenv("RUNWATCH_RUN", raising=False)
    monkeypatch.setattr(default, "_DEFAULT", None)
    monkeypatch.setattr(default, "_TRIED", False)
    cb = Callback()
    assert cb.emitter is None
    assert train(cb, [LOGS]).should_training_stop is False


def test_a_stop_from_the_breaker_ends_training_at_the_step(em: Emitter, tmp_path: Path) -> None:
    follower = RunViewFollower(Scripted(view(("zero_reward", "stop"))), name="rw-test-view")
    follower.start()
    guard = Guard(follower, "r", {"zero_reward"}, poll_interval=0.01)
    try:
        wait_for(guard.should_stop, "stop")
        stopped: list[Any] = []
        cb = Callback(em, guard=guard, on_stop=stopped.append)
        control = train(cb, [LOGS, LOGS, LOGS])
    finally:
        guard.close()
        follower.close()
    assert control.should_training_stop is True
    assert len(stopped) == 1
    events = read_events(tmp_path)
    assert [e["step"] for e in events if e["kind"] == "step.done"] == [1]
    assert events[-1] == {**events[-1], "kind": "run.finished", "status": "killed"}


def test_a_reward_function_says_the_service_it_waits_on(em: Emitter, tmp_path: Path) -> None:
    """TRL calls reward functions with `trainer_state` (trl/trainer/grpo_trainer.py,
    `_calculate_rewards`), names their metrics by `__name__` and awaits the async ones
    (`is_async_callable`): the wrapped function keeps both."""
    import asyncio
    import inspect

    from runwatch.emitters.trl import waiting_on

    def score(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [1.0 for _ in completions]

    async def judge(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        raise TimeoutError("the judge did not answer")

    scored = waiting_on(score, endpoint="http://rm-1:8000/score", emitter=em)
    judged = waiting_on(judge, dep="judge@llm-judge:443", emitter=em)
    assert (scored.__name__, judged.__name__) == ("score", "judge")
    assert inspect.iscoroutinefunction(judged)
    state = SimpleNamespace(global_step=6)
    assert scored(prompts=["p"], completions=["c", "d"], trainer_state=state) == [1.0, 1.0]
    with pytest.raises(TimeoutError):
        asyncio.run(judged(prompts=["p"], completions=["c"], trainer_state=state))
    em.flush()
    events = read_events(tmp_path)
    phases = [(e["traj"].split("-")[1], e["dep"]) for e in events
              if e["kind"] == "trajectory.phase"]  # fmt: skip
    assert phases == [("score", "reward@rm-1:8000"), ("judge", "judge@llm-judge:443")]
    started = [e["step"] for e in events if e["kind"] == "trajectory.started"]
    assert started == [7, 7]  # the step being computed
    done = [e["status"] for e in events if e["kind"] == "trajectory.done"]
    assert done == ["ok", "timeout"]


def test_a_reward_server_on_loopback_is_named_by_the_emitter_s_node(tmp_path: Path) -> None:
    """A reward server per node, reached at localhost: the phase names the node its
    emitter's `src.host` names."""
    from runwatch.emitters.trl import waiting_on

    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False, host="node-3")
    scored = waiting_on(lambda completions, **kw: [1.0] * len(completions),
                        endpoint="http://localhost:8000/score", emitter=em)  # fmt: skip
    scored(completions=["c"], trainer_state=SimpleNamespace(global_step=0))
    em.close()
    events = read_events(tmp_path)
    assert [e["dep"] for e in events if e["kind"] == "trajectory.phase"] == [
        "reward@node-3:8000"]  # fmt: skip


def test_without_an_emitter_a_wrapped_reward_function_is_the_function(tmp_path: Path) -> None:
    from runwatch.emitters.trl import waiting_on

    wrapped = waiting_on(lambda completions, **kw: [0.5] * len(completions), dep="reward@x:1")
    assert wrapped(completions=["a"]) == [0.5]
    assert list(tmp_path.iterdir()) == []

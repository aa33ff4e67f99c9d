"""In-process helpers: tqdm, the trainer logger / verl backend, trajectory and request blocks.

Events go to a spool directory and are checked against the contract models; the trainer's
events are also replayed through the rules to see they say what a rule needs.
"""

from __future__ import annotations

import io
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_events

from runwatch.emitters import Emitter
from runwatch.emitters.default import set_default_emitter
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.trainer import TrainerLogger, step_events


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


@pytest.fixture(autouse=True)
def _no_tqdm_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm's monitor thread outlives the bar; the leak guard would rightly complain."""
    import tqdm

    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)


@pytest.fixture
def em(tmp_path: Path) -> Iterator[Emitter]:
    emitter = Emitter(run="run-1", component="trainer", path=tmp_path, heartbeat=False)
    yield emitter
    emitter.close()


# --- tqdm -------------------------------------------------------------------------------


def test_tqdm_emits_progress_at_a_bounded_rate_and_the_final_count(
    em: Emitter, tmp_path: Path
) -> None:
    from runwatch.emitters.tqdm import tqdm

    out = io.StringIO()
    for _ in tqdm(range(5000), desc="Training Progress", file=out, emitter=em, mininterval=0):
        pass
    em.flush()
    progress = of(read_events(tmp_path), "progress")
    assert progress[0]["n"] == 0
    assert progress[0]["total"] == 5000
    assert progress[-1]["n"] == 5000
    assert {p["name"] for p in progress} == {"Training Progress"}
    assert len(progress) <= 5  # 5000 refreshes, a handful of events
    assert "Training Progress" in out.getvalue()  # the bar itself still draws


def test_tqdm_without_total_manual_updates_reset_and_name(em: Emitter, tmp_path: Path) -> None:
    from runwatch.emitters.tqdm import tqdm

    bar = tqdm(file=io.StringIO(), emitter=em, emit_interval=0, name="rollouts")
    bar.update(3)
    bar.update(4)
    bar.reset(total=10)
    bar.update(10)
    bar.close()
    em.flush()
    got = [(p["n"], p.get("total")) for p in of(read_events(tmp_path), "progress")]
    assert got == [(0, None), (3, None), (7, None), (0, 10), (10, 10)]


def test_tqdm_without_an_emitter_is_plain_tqdm() -> None:
    from runwatch.emitters.tqdm import tqdm, trange

    set_default_emitter(None)
    try:
        assert sum(trange(3, file=io.StringIO())) == 3
        assert list(tqdm([1, 2], disable=True)) == [1, 2]
    finally:
        import runwatch.emitters.default as default

        default._TRIED = False


# --- trainer logger ----------------------------------------------------------------------


def verl_metrics(step: int, reward: float) -> dict[str, Any]:
    return {
        "critic/score/mean": reward,
        "actor/entropy": 0.5,
        "actor/pg_loss": float("nan"),
        "timing_s/gen": 12.5,
        "timing_s/update_actor": 3.0,
        "timing_s/step": 17.25,
        "training/global_step": step,
        "val/generations": "a table",  # not a number: skipped
    }


def test_step_events_from_a_verl_metrics_dict() -> None:
    events = dict(step_events(verl_metrics(7, 0.25), 7))
    assert events["step.metrics"]["metrics"]["actor/entropy"] == 0.5
    assert "val/generations" not in events["step.metrics"]["metrics"]
    assert events["reward"] == {"step": 7, "mean": 0.25}
    assert events["step.done"] == {
        "step": 7,
        "duration_s": 17.25,
        "timing": {"gen": 12.5, "update_actor": 3.0},
    }
    assert events["step.started"] == {"step": 8}


def test_no_step_done_without_timing_unless_asked() -> None:
    assert [k for k, _ in step_events({"loss": 1.0}, 1)] == ["step.metrics"]
    assert [k for k, _ in step_events({"loss": 1.0}, 1, done=True)][-2:] == [
        "step.done",
        "step.started",
    ]


def test_reward_keys_are_the_rules_defaults() -> None:
    from runwatch.stream.rules.zero_reward import ZeroRewardParams

    assert ZeroRewardParams().reward_keys == list(DEFAULT_REWARD_KEYS)


def test_trainer_logger_replayed_fires_zero_reward(em: Emitter, tmp_path: Path) -> None:
    from helpers import make_engine

    from runwatch.stream.decode import decode

    class Scalar:  # what numpy / torch hand over
        def __init__(self, v: float) -> None:
            self.v = v

        def item(self) -> float:
            return self.v

    logger = TrainerLogger(em)
    for step in range(1, 8):
        logger.log(data={**verl_metrics(step, 0.0), "critic/score/mean": Scalar(0.0)}, step=step)
    logger.finish()
    engine = make_engine()
    alerts = []
    for event in read_events(tmp_path):
        alerts += engine.apply(decode(json.dumps(event).encode()))
    rules = {(a.rule, a.state) for a in alerts}
    assert ("zero_reward", "firing") in rules
    assert ("non_finite_metric", "firing") in rules  # actor/pg_loss is NaN


def test_verl_backend_attaches_to_tracking_without_verl(
    em: Emitter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runwatch.emitters import verl

    class Tracking:  # verl.utils.tracking.Tracking's shape
        def __init__(self, project_name: str, experiment_name: str) -> None:
            self.logger: dict[str, Any] = {}

        def log(self, data: dict[str, Any], step: int, backend: Any = None) -> None:
            for logger in self.logger.values():
                logger.log(data=data, step=step)

    module = types.ModuleType("fake_verl_tracking")
    module.Tracking = Tracking  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_verl_tracking", module)
    verl.patch_tracking(em, module="fake_verl_tracking")
    tracker = Tracking("p", "e")
    assert verl.BACKEND in tracker.logger
    tracker.log(data=verl_metrics(3, 1.0), step=3)
    em.flush()
    assert [e["kind"] for e in read_events(tmp_path)] == [
        "step.metrics",
        "reward",
        "step.done",
        "step.started",
    ]


# --- trajectories and requests ------------------------------------------------------------


def fail() -> None:
    raise RuntimeError("sandbox died")


def test_trajectory_block(em: Emitter, tmp_path: Path) -> None:
    with em.trajectory("s1-t0", step=1) as t:
        t.phase("generate")
        t.phase("sandbox")
        t.reward = 1.0
    with pytest.raises(RuntimeError), em.trajectory("s1-t1", step=1) as t:
        t.phase("sandbox") or fail()
    with pytest.raises(TimeoutError), em.trajectory("s1-t2"):
        raise TimeoutError
    em.flush()
    events = read_events(tmp_path)
    assert [(e["kind"], e.get("phase")) for e in events[:4]] == [
        ("trajectory.started", None),
        ("trajectory.phase", "generate"),
        ("trajectory.phase", "sandbox"),
        ("trajectory.done", None),
    ]
    done = {e["traj"]: e for e in of(events, "trajectory.done")}
    assert done["s1-t0"]["status"] == "ok"
    assert done["s1-t0"]["reward"] == 1.0
    assert done["s1-t1"]["status"] == "error"
    assert done["s1-t1"]["error"] == "RuntimeError"
    assert done["s1-t2"]["status"] == "timeout"
    assert of(events, "trajectory.started")[0]["step"] == 1


def test_async_trajectory_and_request_blocks(em: Emitter, tmp_path: Path) -> None:
    import asyncio

    async def rollout() -> None:
        async with em.trajectory("t-a") as t:
            with em.request("q-1", server="vllm-0") as r:
                r.tokens(prompt=10, completion=20)
            t.phase("reward")

    asyncio.run(rollout())
    with pytest.raises(KeyboardInterrupt), em.request("q-2"):
        raise KeyboardInterrupt
    em.flush()
    events = read_events(tmp_path)
    done = {e["req"]: e for e in of(events, "request.done")}
    assert done["q-1"]["status"] == "ok"
    assert done["q-1"]["completion_tokens"] == 20
    assert done["q-1"]["server"] == "vllm-0"
    assert done["q-2"]["status"] == "aborted"
    assert of(events, "request.queued")[0]["req"] == "q-1"
    assert of(events, "trajectory.done")[0]["status"] == "ok"


def test_areal_stats_logger_commit_also_emits(
    em: Emitter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AReaL's StatsLogger.commit(epoch, step, global_step, data) shape (4aef98d): the
    wrapped commit still does its own work, and each dict becomes the step's events."""
    from runwatch.emitters import areal

    committed: list[Any] = []

    class StatsLogger:
        def commit(self, epoch: int, step: int, global_step: int, data: Any) -> None:
            committed.append((global_step, data))

    module = types.ModuleType("fake_areal_stats_logger")
    module.StatsLogger = StatsLogger  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_areal_stats_logger", module)
    monkeypatch.delenv("RUNWATCH_GUARD", raising=False)
    areal.patch_stats_logger(em, module="fake_areal_stats_logger")
    stats = {"ppo_actor/task_reward/avg": 0.0, "ppo_actor/update/entropy/avg": 0.5,
             "ppo_actor/update/grad_norm__count": 4}  # fmt: skip
    StatsLogger().commit(0, 2, 7, stats)
    em.flush()
    assert committed == [(7, stats)]
    (metrics,) = of(read_events(tmp_path), "step.metrics")
    assert metrics["step"] == 7
    assert metrics["metrics"] == {"ppo_actor/task_reward/avg": 0.0,
                                  "ppo_actor/update/entropy/avg": 0.5}  # fmt: skip
    assert [(e["step"], e["mean"]) for e in of(read_events(tmp_path), "reward")] == [(7, 0.0)]

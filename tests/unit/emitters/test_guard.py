"""The guard, trainer side: the decision from a run view and the trainer's rule list, the
background look that fails open (counted, said once), `wait`, and the TrainerLogger / verl
backend obeying it by configuration (`RUNWATCH_GUARD`)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import types
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for as wait_until

from runwatch.emitters import Emitter
from runwatch.emitters.follower import RunViewFollower
from runwatch.emitters.guard import (
    Decision,
    Guard,
    StopTraining,
    decide,
    policy_of,
    rules_from_env,
)
from runwatch.emitters.runview import Resumed, RunView
from runwatch.emitters.trainer import TrainerLogger

DEADLINE_S = 30.0


def view(*alerts: tuple[str, str | None], resumed: dict[str, Any] | None = None) -> bytes:
    """A run view's record, as serve answers it and the worker publishes it."""
    return json.dumps({
        "v": 1, "run": "r", "ts": 0.0, "lifted": 0, "resumed": resumed,
        "alerts": [{"id": f"{rule}-1", "rule": rule, "key": rule, "subject": None,
                    "severity": "critical", "action": action, "since": 0.0}
                   for rule, action in alerts],
    }).encode()  # fmt: skip


def parsed(*alerts: tuple[str, str | None]) -> RunView:
    return RunView.parse(view(*alerts))


wait_for = partial(wait_until, timeout=DEADLINE_S, every=0.01)


class Scripted:
    """A source that answers what the test sets: a record, None, or an exception to raise."""

    name = "the scripted service"

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.closed = False

    def fetch(self) -> bytes | None:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def close(self) -> None:
        self.closed = True


# --- the decision ------------------------------------------------------------------------


def test_the_config_action_wins_and_the_trainer_list_fills_in() -> None:
    trainer = policy_of({"zero_reward", "heartbeat_lost"})
    assert decide(parsed(("zero_reward", None)), trainer).action == "pause"
    assert decide(parsed(("zero_reward", None)), {}).action == "run"  # nobody asked
    assert decide(parsed(("zero_reward", "notify")), trainer).action == "run"  # config: never
    assert decide(parsed(("kl_spike", "pause")), {}).action == "pause"  # config: always
    both = decide(parsed(("zero_reward", None), ("non_finite_metric", "stop")), trainer)
    assert both.action == "stop"  # stop outranks pause
    assert [a.rule for a in both.alerts] == ["zero_reward", "non_finite_metric"]
    stop = policy_of({"zero_reward": "stop"})
    assert decide(parsed(("zero_reward", None)), stop).action == "stop"
    assert decide(None, trainer).action == "run"  # a run the service does not know yet
    with pytest.raises(ValueError, match="not a run view: alerts"):
        RunView.parse(
            b'{"v": 1, "run": "r", "ts": 0, "lifted": 0, "resumed": null, "alerts": "no"}'
        )


def test_rule_lists_from_the_environment() -> None:
    assert rules_from_env(None) is None
    assert rules_from_env("off") is None
    assert rules_from_env("on") == {}
    assert rules_from_env("zero_reward, non_finite_metric:stop") == {
        "zero_reward": "pause", "non_finite_metric": "stop",
    }  # fmt: skip
    with pytest.raises(ValueError, match="pause, stop or notify"):
        rules_from_env("zero_reward:explode")
    with pytest.raises(ValueError, match="not one string"):
        policy_of("zero_reward")


# --- the guard ---------------------------------------------------------------------------


@pytest.fixture
def source() -> Scripted:
    return Scripted()


@pytest.fixture
def follower(source: Scripted) -> Iterator[RunViewFollower]:
    f = RunViewFollower(source, name="rw-test-view")
    f.start()
    yield f
    f.close()


@pytest.fixture
def guard(follower: RunViewFollower) -> Iterator[Guard]:
    g = Guard(follower, "r", {"zero_reward"}, poll_interval=0.01)
    yield g
    g.close()


def test_the_guard_follows_the_view_and_wait_blocks_only_while_paused(
    source: Scripted, guard: Guard
) -> None:
    assert guard.wait(timeout=0).action == "run"
    source.answer = view(("zero_reward", None))
    wait_for(guard.should_pause, "the guard sees the firing")
    assert guard.wait(timeout=0.05).action == "pause"  # still paused when the time is up
    got: list[Decision] = []
    waiter = threading.Thread(target=lambda: got.append(guard.wait()))
    waiter.start()
    source.answer = view(resumed={"ts": 1.0, "by": "alice", "rule": None})
    waiter.join(DEADLINE_S)
    assert not waiter.is_alive()
    assert got[0].action == "run"
    assert got[0].resumed == Resumed(ts=1.0, by="alice", rule=None)


def test_an_unreachable_or_confused_service_fails_open_said_once(
    source: Scripted, guard: Guard, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runwatch.emitters")
    source.answer = view(("zero_reward", None))
    wait_for(guard.should_pause, "paused")
    source.answer = ConnectionRefusedError(111, "Connection refused")
    wait_for(lambda: not guard.should_pause(), "fails open")
    assert not guard.decision.reachable
    failures = guard.failures
    wait_for(lambda: guard.failures > failures + 3, "keeps looking")
    source.answer = b'{"alerts": 7}'  # nonsense is an outage too
    failures = guard.failures
    wait_for(lambda: guard.failures > failures + 3, "nonsense counted")
    assert not guard.should_pause()
    said = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    assert len(said) == 1
    assert "Connection refused" in said[0]
    source.answer = view(("zero_reward", None))
    wait_for(guard.should_pause, "back: paused again")
    assert any("again" in r.getMessage() for r in caplog.records)


def test_on_change_is_called_per_change_and_its_failure_is_contained(
    source: Scripted, follower: RunViewFollower
) -> None:
    seen: list[str] = []

    def hook(decision: Decision) -> None:
        seen.append(decision.action)
        raise RuntimeError("the user's hook broke")

    g = Guard(follower, "r", {"zero_reward"}, poll_interval=0.01, on_change=hook)
    try:
        source.answer = view(("zero_reward", None))
        wait_for(lambda: seen == ["pause"], "pause seen")
        source.answer = view()
        wait_for(lambda: seen == ["pause", "run"], "run seen")
        wait_for(lambda: g.looks > 2, "keeps looking")
    finally:
        g.close()
    follower.close()
    assert source.closed


# --- the trainer obeys it ----------------------------------------------------------------


@pytest.fixture
def em(tmp_path: Path) -> Iterator[Emitter]:
    emitter = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False)
    yield emitter
    emitter.close()


METRICS = {"critic/score/mean": 0.0}


def test_the_trainer_logger_pauses_in_log_until_resumed(
    em: Emitter, source: Scripted, guard: Guard
) -> None:
    paused: list[Decision] = []
    logger = TrainerLogger(em, guard=guard, on_pause=paused.append)
    logger.log(METRICS, step=1)  # nothing firing: returns at once
    source.answer = view(("zero_reward", None))
    wait_for(guard.should_pause, "paused")
    stepped = threading.Event()

    def train() -> None:
        logger.log(METRICS, step=2)
        stepped.set()

    loop = threading.Thread(target=train)
    loop.start()
    wait_for(lambda: paused, "on_pause called (a checkpoint saved)")
    assert not stepped.is_set()  # held in log() while paused
    source.answer = view()
    loop.join(DEADLINE_S)
    assert stepped.is_set()
    assert [d.action for d in paused] == ["pause"]


def test_the_trainer_logger_stops_on_a_stop_policy(
    em: Emitter, source: Scripted, guard: Guard
) -> None:
    stopped: list[Decision] = []
    logger = TrainerLogger(em, guard=guard, on_stop=stopped.append)
    source.answer = view(("non_finite_metric", "stop"))
    wait_for(guard.should_stop, "stop")
    with pytest.raises(StopTraining, match="stopped by its alerts after step 4"):
        logger.log(METRICS, step=4)
    assert len(stopped) == 1


def test_runwatch_guard_in_the_environment_gives_a_verl_user_the_breaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from runwatch.emitters import verl

    class Tracking:  # verl.utils.tracking.Tracking's shape
        def __init__(self) -> None:
            self.logger: dict[str, Any] = {}

    module = types.ModuleType("fake_verl_tracking_guard")
    module.Tracking = Tracking  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_verl_tracking_guard", module)
    monkeypatch.setenv("RUNWATCH_GUARD", "zero_reward,non_finite_metric:stop")
    caplog.set_level(logging.WARNING, logger="runwatch.emitters")
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False)
    try:
        verl.patch_tracking(em, module="fake_verl_tracking_guard")
        backend = Tracking().logger[verl.BACKEND]
        assert backend.guard is not None
        assert backend.guard.policy == {"zero_reward": "pause", "non_finite_metric": "stop"}
        assert backend.guard.follower is None  # a directory: no service, never pauses
        assert any("will not be paused" in r.getMessage() for r in caplog.records)
        monkeypatch.setenv("RUNWATCH_GUARD", "off")
        assert TrainerLogger(em).guard is None
    finally:
        em.close()


def test_a_guard_on_an_unreachable_kafka_or_service_never_stops_the_loop(tmp_path: Path) -> None:
    from runwatch.dev.broker import free_port

    for where in (
        {"kafka": f"127.0.0.1:{free_port()}"},
        {"url": f"http://127.0.0.1:{free_port()}"},
    ):
        em = Emitter(run="r", component="trainer", heartbeat=False, spool=tmp_path, **where)
        try:
            guard = em.guard(rules={"zero_reward"}, poll_interval=0.01)
            logger = TrainerLogger(em, guard=guard)
            wait_for(lambda g=guard: g.failures >= 2, f"{where}: the guard keeps looking")
            for step in range(20):
                logger.log(METRICS, step=step)  # zero reward, nobody to hear it: goes on
            assert not guard.decision.reachable
            assert not em.should_pause()
        finally:
            em.close(timeout=0.5)

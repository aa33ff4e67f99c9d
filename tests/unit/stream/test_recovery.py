"""One recovery for the worker and serve: a checkpoint is taken over only when it decodes and
its position fits the input; otherwise nothing of it is kept and the reason is given."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runwatch.dev.scenarios import sandbox_hang
from runwatch.stream import checkpoint
from runwatch.stream.config import RulesConfig
from runwatch.stream.exceptions import CheckpointError
from runwatch.stream.live import LiveDriver
from runwatch.stream.recovery import restore

CONFIG = RulesConfig.default()


def fresh() -> LiveDriver:
    return LiveDriver(CONFIG, topic="runwatch.events", partition=0)


def accept(position: Any) -> None:
    assert position["offset"] >= 0


@pytest.fixture(scope="module")
def data() -> bytes:
    """A checkpoint of a driver that applied the sandbox incident, at offset 100."""
    driver = fresh()
    for i, event in enumerate(sandbox_hang()[:100]):
        driver.feed([(orjson.dumps(event), event["ts"] + 0.05, i)])
    assert driver.engine.runs
    return checkpoint.dump(driver, {"offset": 100})


def test_a_fitting_checkpoint_is_taken_over(data: bytes) -> None:
    restored = restore(data, fresh, accept)
    assert restored.position == {"offset": 100}
    assert restored.refused is None
    assert "grpo-qwen2.5-7b-sandbox" in restored.driver.engine.runs


def test_a_position_that_does_not_fit_keeps_nothing_and_says_why(data: bytes) -> None:
    def beyond_the_end(position: Any) -> None:
        raise CheckpointError(f"it covers up to offset {position['offset']}; the topic ends at 7")

    restored = restore(data, fresh, beyond_the_end)
    assert restored.position is None
    assert restored.refused == "it covers up to offset 100; the topic ends at 7"
    assert not restored.driver.engine.runs  # not the half-loaded driver


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda d: d[:-7] + b"garbage", "checksum does not match"),
        (lambda d: b"XXXX" + d[4:], "not a runwatch checkpoint"),
    ],
)
def test_a_damaged_checkpoint_keeps_nothing(data: bytes, damage: Any, said: str) -> None:
    restored = restore(damage(data), fresh, accept)
    assert restored.position is None
    assert restored.refused is not None
    assert said.lower() in restored.refused.lower()
    assert not restored.driver.engine.runs


def test_a_position_without_its_keys_is_refused(data: bytes) -> None:
    def serve_fits(position: Any) -> None:  # serve's positions name a generation
        position["generation"]

    restored = restore(data, fresh, serve_fits)
    assert restored.position is None
    assert restored.refused is not None
    assert "unreadable" in restored.refused

"""A configuration printed to a console is no step's metrics (issue 41): its `inf` is a
limit's "none" (`max_norm`, `grad_clip`, a timeout), its values settings. The printouts are
rendered by the code that prints them: argparse's `Namespace.__repr__`, a dataclass's repr,
transformers' `TrainingArguments.__str__` (its format, `f"{k}={v},\\n"` under
`f"{self.__class__.__name__}(\\n"`: transformers/training_args.py, 4.x), pprint's dict
(verl's `main_ppo.py`: `pprint(OmegaConf.to_container(config, resolve=True))`), a logged
`config: {...}`; and a metric record beside each still raises."""

from __future__ import annotations

import argparse
import dataclasses
import math
import pprint
from typing import Any

import pytest
from helpers import non_finite as bad
from helpers import read_all, scanned

from runwatch.emitters.metric_settings import limit, settings


@dataclasses.dataclass
class GRPOConfig:  # the shape of TRL's: a dataclass named for settings
    learning_rate: float = 1e-6
    max_grad_norm: float = math.inf
    delta: float = math.inf
    epsilon: float = 0.2
    beta: float = 0.04


@dataclasses.dataclass
class TrainingArguments:
    adam_beta1: float = 0.9
    max_grad_norm: float = math.inf
    eval_delay: float = 0
    seed: int = 42

    def __str__(self) -> str:  # transformers' TrainingArguments.__str__, as it is
        attrs = [f"{k}={v},\n" for k, v in sorted(dataclasses.asdict(self).items())]
        return f"{self.__class__.__name__}(\n{''.join(attrs)})"


def _printouts() -> list[list[str]]:
    verl: dict[str, Any] = {
        "actor_rollout_ref": {"actor": {"grad_clip": math.inf, "clip_ratio": 0.2,
                                        "ppo_epochs": 1, "strategy": "fsdp"}},
        "algorithm": {"kl_ctrl": {"kl_coef": 0.001, "type": "fixed"}},
        "trainer": {"total_epochs": 15, "nccl_timeout": math.inf, "max_norm": math.inf},
    }  # fmt: skip
    numbers = {"max_norm": math.inf, "lr": 1e-05, "seed": 42, "warmup_ratio": 0.03}
    return [
        [repr(argparse.Namespace(lr=1e-6, grad_clip=math.inf, seed=42, save_steps=100))],
        [repr(argparse.Namespace(actor_learning_rate=1e-6, max_norm=math.inf, seed=42))],
        [repr(GRPOConfig())],
        [f"Training/evaluation parameters {GRPOConfig()!r}"],
        str(TrainingArguments()).splitlines(),
        pprint.pformat(verl, width=80).splitlines(),
        [str(numbers)],  # a dict of settings that are all numbers
        [f"INFO - config: {numbers}"],
        [f"args: {dict(numbers, gradient_clipping=math.inf)}"],
        [str({"actor": {"grad_clip": math.inf, "clip_ratio": 0.2}, "lr": 0.1})],
    ]


@pytest.mark.parametrize("lines", _printouts())
def test_a_printed_configuration_is_no_step_s_metrics(lines: list[str]) -> None:
    assert bad(read_all(lines)) == []
    assert bad(scanned(lines)) == []


def test_a_metric_record_beside_a_configuration_still_raises() -> None:
    config = [str({"max_norm": math.inf, "lr": 1e-05, "seed": 42})]
    record = ["{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.1}",
              "step: 7 | loss: nan | grad_clip_frac: 0.1 | critic/score/max: inf"]  # fmt: skip
    assert bad(read_all(config + record)) == [(1, ["grad_norm", "loss"]),
                                             (7, ["critic/score/max", "loss"])]  # fmt: skip
    assert bad(scanned(config + record)) == bad(read_all(config + record))
    # a dict of metrics whose name holds no settings' word is read as ever
    assert bad(read_all(["metrics: {'loss': nan, 'reward': 0.5}"])) == [(1, ["loss"])]


@pytest.mark.parametrize(
    ("key", "is_limit"),
    [("max_norm", True), ("max_grad_norm", True), ("actor.optim.max_grad_norm", True),
     ("grad_clip", True), ("gradient_clipping", True), ("clip_grad", True),
     ("nccl_timeout", True), ("early_stop_patience", True), ("kl_threshold", True),
     ("critic/score/max", False), ("response_length/min", False), ("reward_max", False),
     ("grad_norm", False), ("loss", False), ("actor/pg_clipfrac", False)],
)  # fmt: skip
def test_a_limit_s_key(key: str, is_limit: bool) -> None:
    assert limit(key) is is_limit


def test_what_prints_settings() -> None:
    assert settings("Namespace(lr=0.1, max_norm=inf)")
    assert settings("GRPOConfig(learning_rate=1e-06, delta=inf)")
    assert settings("hparams = {'lr': 0.1}")
    assert not settings("TrainOutput(global_step=10, training_loss=nan)")
    assert not settings("step 40: {'loss': nan}")
    assert not settings("Epoch(train) [1][240/735]  loss: nan")

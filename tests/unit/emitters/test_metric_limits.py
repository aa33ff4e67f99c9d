"""A limit's key excuses its `inf` only (issue 41): `max_grad_norm: inf` is no limit, but a
NaN is no setting's value whatever its key's words -- `clip_fraction`, `clip_ratio`,
`max_reward` are measurements. The lines are the shapes the reader takes one metric at a time
from (a wandb run summary, a dict printed an item a line, a row under a header), holding the
keys of the trainers that log them: stable-baselines3's PPO
(`self.logger.record("train/clip_fraction", np.mean(clip_fractions))`,
stable_baselines3/ppo/ppo.py), TRL's GRPO (`clip_ratio/region_mean`, trl/trainer/
grpo_trainer.py, as in https://github.com/Chi-Shan0707/TinyLoRA-GRPO-Coder/issues/4's
console), and a `max_reward` statistic."""

from __future__ import annotations

import json
import math

import pytest
from helpers import non_finite as bad
from helpers import read_all, scanned

from runwatch.emitters.metric_settings import no_limit

KEYS = ["train/clip_fraction", "clip_ratio/region_mean", "max_reward"]


def _shapes(key: str, value: float) -> list[list[str]]:
    """One non-finite value under `key` in each one-metric-a-line shape."""
    return [
        # wandb's run summary (wandb/sdk/internal: `wandb: {key:>w} {value}`)
        ["wandb: Run summary:", f"wandb: {key:>24} {value}", "wandb:      train/lr 0.0003"],
        # json.dumps(metrics, indent=2): an item a line, its brace alone
        json.dumps({key: value, "learning_rate": 3e-4}, indent=2).splitlines(),
        # a header naming the step, then `key : value` lines (the shape of `Epoch : 8` /
        # `LOSS : nan` callbacks)
        ["Epoch 3", f"{key} : {value}"],
    ]


@pytest.mark.parametrize("key", KEYS)
def test_a_nan_under_a_limit_s_words_is_a_measurement(key: str) -> None:
    for lines in _shapes(key, math.nan):
        got = bad(read_all(lines))
        assert [keys for _, keys in got] == [[key]], lines
        assert bad(scanned(lines)) == got, lines


@pytest.mark.parametrize(
    "key", ["max_grad_norm", "actor.optim.clip_grad", "nccl_timeout", "steps_per_print",
            "logging_steps", "save_interval"],
)  # fmt: skip
def test_a_limit_s_inf_is_still_no_measurement(key: str) -> None:
    for lines in _shapes(key, math.inf):
        assert bad(read_all(lines)) == [], lines
        assert bad(scanned(lines)) == [], lines


def test_no_limit() -> None:
    assert no_limit("max_grad_norm", math.inf)
    assert no_limit("steps_per_print", math.inf)  # a cadence: never
    assert no_limit("eval_interval", math.inf)
    assert not no_limit("eval_loss", math.inf)  # what it evaluates is a measurement
    assert not no_limit("log_ppl", math.inf)
    assert not no_limit("steps_per_print", math.nan)
    assert not no_limit("steps_per_print", -math.inf)  # a cadence is never -inf
    # metrics named after the step they were logged at, per token, per second, a step's time
    measured = [
        "eval_loss_step", "log_prob_step", "actor/log_prob_per_token",
        "eval_steps_per_second", "eval/step_time", "checkpoint/save_time_per_step",
    ]  # fmt: skip
    for key in measured:
        assert not no_limit(key, math.inf), key
        assert not no_limit(key, -math.inf), key
    for key in ("logging_steps", "save_every_n_steps", "trainer.save_interval", "eval_freq"):
        assert no_limit(key, math.inf), key
    assert no_limit("grad_clip", -math.inf)
    assert not no_limit("max_grad_norm", math.nan)
    assert not no_limit("clip_fraction", math.nan)
    assert not no_limit("loss", math.inf)


def test_a_benchmark_s_request_rate_of_inf_is_its_load() -> None:
    """https://github.com/sgl-project/sglang/issues/2805 (corpus18/dev), as posted: SGLang's
    bench_serving result prints its `--request-rate` (`inf`: every request at once) among its
    measurements; a rate of requests is a load, no measurement gone wrong. A learning rate's
    inf is still one."""
    lines = [
        "============ Serving Benchmark Result ============",
        "Backend:                                 sglang    ",
        "Traffic request rate:                    inf       ",
        "Max reqeuest concurrency:                not set   ",
        "Successful requests:                     1648      ",
        "Benchmark duration (s):                  170.41    ",
        "Request throughput (req/s):              9.67      ",
    ]
    assert bad(read_all(lines)) == []
    assert bad(scanned(lines)) == []
    assert no_limit("Traffic request rate", math.inf)
    assert not no_limit("learning rate", math.inf)

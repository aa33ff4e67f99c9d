"""A trainer's metrics printed as a dict or in a progress bar's postfix.

- transformers' `Trainer.log` (so TRL's GRPOTrainer, PPOTrainer, ...) prints one `str(dict)`
  per logging step: `{'loss': 0.0, 'grad_norm': 0.0866, ..., 'reward': 1.71, 'epoch': 0.31}`
  (transformers 4.x: floats), `{'loss': '0', 'reward': '0', 'entropy': '5.593', ...}`
  (transformers 5 with TRL 1.16: every float a string with 4 significant digits), NaN as
  `nan` / `'nan'`, an unscorable reward as `None`, and a last summary dict
  (`train_runtime`, `train_loss`, ...) that is no step. The dict carries no step number: the
  k-th dict of a source is logging step k (placed in order).
- ms-swift prints the same as JSON, with `"global_step/max_steps": "300/1296"`.
- OpenRLHF's actor puts its status in the postfix of its `Train epoch [e/E]` bar
  (openrlhf/trainer/ray/ppo_actor.py): `act_loss=, reward=, return=, gen_len=, tot_len=,
  kl=, act_lr=, grad_norm=, ent_loss=` (0.8 on; `pg=, rm=, ret=, glen=, tlen=, kl=, act_lr=`
  and `cri=, vals=` before), each formatted by tqdm as `{:.3g}`. They are OpenRLHF's own
  `train/...` metrics; the bar ends one training step (the last epoch's bar), so its last
  postfix is the step's metrics -- sooner if a value is not finite.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from runwatch.emitters.trainer import SUMMARY_KEYS, metric_value, step_events

Found = tuple[str, dict[str, Any]]

#: keys that make a printed dict a training step's metrics (transformers, TRL, ms-swift)
STEP_KEYS = frozenset({"loss", "grad_norm", "reward", "learning_rate", "kl", "entropy"})
#: keys of the end-of-training summary, which is no step
_DICT = re.compile(r"\{['\"][^{}]*\}")
_STEP_OF = re.compile(r"^(\d+)/\d+$")

#: OpenRLHF's postfix names -> its own metric names (what it logs to wandb under `train/`)
OPENRLHF_KEYS = {
    "act_loss": "train/policy_loss", "pg": "train/policy_loss", "reward": "train/reward",
    "rm": "train/reward", "return": "train/return", "ret": "train/return",
    "gen_len": "train/response_length", "glen": "train/response_length",
    "tot_len": "train/total_length", "tlen": "train/total_length", "kl": "train/kl",
    "act_lr": "train/actor_lr", "grad_norm": "train/actor_grad_norm",
    "ent_loss": "train/entropy_loss", "cri": "train/critic_loss", "vals": "train/values",
}  # fmt: skip
OPENRLHF_REWARD = "train/reward"
OPENRLHF_BAR = re.compile(r"^Train epoch \[(\d+)/(\d+)\]")
_POSTFIX_ITEM = re.compile(r"(\w+)=([-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf))\b")


def value_of(raw: Any) -> float | bool | None:
    """A printed value as a metric: what `metric_value` takes, and numbers printed as strings
    (transformers 5); False for anything else."""
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return False
    return metric_value(raw)


def _literal(text: str) -> Any:
    """The dict a line prints: Python's repr (nan and inf as bare names) or JSON."""
    if text.startswith('{"'):
        try:
            return json.loads(text)
        except ValueError:
            return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(tree.body, ast.Dict):
        return None
    out: dict[Any, Any] = {}
    for key, value in zip(tree.body.keys, tree.body.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return None
        if isinstance(value, ast.Name) and value.id in ("nan", "inf"):
            out[key.value] = float(value.id)
        elif isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Name):
            out[key.value] = -float(value.operand.id) if value.operand.id == "inf" else None
        else:
            try:
                out[key.value] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                out[key.value] = None
    return out


def metrics_dict(line: str) -> tuple[dict[str, float | None], int | None] | None:
    """(a training step's metrics, its step when the dict says it) from a printed dict;
    None when the line prints no such dict."""
    m = _DICT.search(line)
    if m is None or len(m.group(0)) > 20_000:
        return None
    data = _literal(m.group(0))
    if not isinstance(data, dict) or not STEP_KEYS & data.keys() or SUMMARY_KEYS & data.keys():
        return None
    step: int | None = None
    metrics: dict[str, float | None] = {}
    for key, raw in data.items():
        if key in ("global_step/max_steps", "global_step", "step") and step is None:
            found = _STEP_OF.match(str(raw)) if isinstance(raw, str) else None
            if found is not None:
                step = int(found.group(1))
            elif isinstance(raw, int) and not isinstance(raw, bool):
                step = raw
            continue
        value = value_of(raw)
        if value is not False:
            assert not isinstance(value, bool)
            metrics[key] = value
    return (metrics, step) if metrics else None


def openrlhf_postfix(postfix: str) -> dict[str, float]:
    """OpenRLHF's postfix items under its own metric names."""
    out: dict[str, float] = {}
    for key, raw in _POSTFIX_ITEM.findall(postfix):
        name = OPENRLHF_KEYS.get(key)
        if name is not None:
            out[name] = float(raw)
    return out


class MetricLines:
    """Numbers the steps of printed dicts and OpenRLHF's training bars, per source."""

    def __init__(self, reward_keys: Sequence[str]) -> None:
        self.reward_keys = tuple(reward_keys)
        self._dicts: dict[Any, int] = {}  # source -> dicts read (the last one's step)
        self._bars: dict[Any, int] = {}  # source -> training steps OpenRLHF's bar ended

    def dict_line(self, source: Any, line: str) -> list[Found]:
        got = metrics_dict(line)
        if got is None:
            return []
        metrics, step = got
        if step is None:
            step = self._dicts.get(source, 0) + 1
        self._dicts[source] = step
        return step_events(metrics, step, self.reward_keys, done=False)

    def bar(self, source: Any, name: str, n: int, total: int | None, rest: str) -> list[Found]:
        """A refresh of OpenRLHF's training bar: its postfix as the step's metrics when the
        bar ends the step, or at once when a value is not finite."""
        m = OPENRLHF_BAR.match(name)
        if m is None:
            return []
        metrics = openrlhf_postfix(rest)
        last_epoch = m.group(1) == m.group(2)
        ended = last_epoch and total is not None and n >= total
        bad = any(not math.isfinite(v) for v in metrics.values())
        if not metrics or not (ended or bad):
            return []
        step = self._bars.get(source, 0) + 1
        if ended:
            self._bars[source] = step
        keys = (OPENRLHF_REWARD, *self.reward_keys)
        return step_events(dict(metrics), step, keys, done=ended)

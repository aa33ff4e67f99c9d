"""A progress bar's postfix as a step's metrics (issue 41).

- OpenRLHF's actor puts its status in the postfix of its `Train epoch [e/E]` bar
  (openrlhf/trainer/ray/ppo_actor.py): `act_loss=, reward=, return=, gen_len=, tot_len=,
  kl=, act_lr=, grad_norm=, ent_loss=` (0.8 on; `pg=, rm=, ret=, glen=, tlen=, kl=, act_lr=`
  and `cri=, vals=` before), each formatted by tqdm as `{:.3g}`. They are OpenRLHF's own
  `train/...` metrics; the bar ends one training step (the last epoch's bar), so its last
  postfix is the step's metrics -- sooner if a value is not finite.
- Any other bar's postfix is the metrics of the step its count names; a bar's new count
  names the step of a dict printed after it (`StepNumbers`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from runwatch.emitters.metric_records import Found, MetricRecords
from runwatch.emitters.metric_shape import EVALUATION, read_line
from runwatch.emitters.trainer import step_events

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
#: Lightning 1.x's bar puts its running training loss first in the postfix as `loss`, and
#: `loss=nan` when it has none (`get_standard_metrics`: no running loss under automatic
#: optimization gives `float("NaN")`) -- NeMo Megatron's bars show it beside the loss they
#: log (`reduced_train_loss=3.910`). A `loss` that is NaN beside another loss that is finite is
#: that placeholder: a real divergence makes the logged loss NaN too
LIGHTNING_LOSS = "loss"
_POSTFIX_ITEM = re.compile(r"(\w+)=([-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf))\b")


def openrlhf_postfix(postfix: str) -> dict[str, float]:
    """OpenRLHF's postfix items under its own metric names, and any other item (a fork's, a
    later version's) under its own: empty where none is OpenRLHF's."""
    out: dict[str, float] = {}
    known = False
    for key, raw in _POSTFIX_ITEM.findall(postfix):
        name = OPENRLHF_KEYS.get(key)
        known |= name is not None
        out[name or key] = float(raw)
    return out if known else {}


class BarPostfixes(MetricRecords):
    """Bars' counts and postfixes, per source and bar."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bars: dict[Any, int] = {}  # source -> training steps OpenRLHF's bar ended
        self._postfixes: dict[tuple[Any, str], int] = {}  # (source, bar) -> count last read
        self._counts: dict[tuple[Any, str], int] = {}  # (source, bar) -> highest count shown

    def refreshed(self, source: Any, bar: str, n: int) -> None:
        """A bar's refresh: a count it had not shown names the step of a dict printed next
        (a repaint at the count it showed does not: tqdm redraws a bar after each line
        written under it, and a bar refreshed less often than the trainer logs shows an
        older count). An evaluation's bar (`evaluating Epoch: ... 200/200`) counts its
        batches, no training step."""
        if EVALUATION.search(bar):
            return
        key = (source, bar)
        if n > self._counts.get(key, -1):
            self._counts[key] = n
            self.steps.named(source, n)

    def postfix(self, source: Any, bar: str, n: int, postfix: str) -> list[Found]:
        """The pairs of a progress bar's description and postfix (`lr=0, noise_step_loss=nan`;
        torchtune's `1|31|Loss: nan` description) as the metrics of the step its count names,
        two of them or one that is not finite: once per count, at once when a value is not
        finite. No reward: a rollout's bar counts trajectories, not steps, and its postfix
        reward is a running mean."""
        record = read_line(f"{bar}, {postfix}" if ":" in bar else postfix, step=n)
        if record is None:
            return []
        _lightning_placeholder(record.metrics)
        bad = any(not math.isfinite(v) for v in record.metrics.values())
        if len(record.metrics) < 2 and not bad:
            return []
        if EVALUATION.search(bar):  # an evaluation's bar: its postfix is no step's
            record.metrics = {f"eval/{k}": v for k, v in record.metrics.items()}
        key = (source, bar)
        if self._postfixes.get(key) == n and not bad:
            return []
        self._postfixes[key] = n
        return self._record(source, n, dict(record.metrics), record.skipped, rewards=False)

    def bar(
        self, source: Any, name: str, n: int, total: int | None, rest: str
    ) -> list[Found] | None:
        """A refresh of OpenRLHF's training bar: its postfix as the step's metrics when the
        bar ends the step, or at once when a value is not finite. None where the bar is not
        OpenRLHF's or its postfix holds none of OpenRLHF's keys (a fork's, another trainer's
        `Train epoch` bar): the generic postfix reader's (`postfix`)."""
        m = OPENRLHF_BAR.match(name)
        if m is None:
            return None
        metrics = openrlhf_postfix(rest)
        if not metrics:
            return None
        last_epoch = m.group(1) == m.group(2)
        ended = last_epoch and total is not None and n >= total
        bad = any(not math.isfinite(v) for v in metrics.values())
        if not (ended or bad):
            return []
        step = self._bars.get(source, 0) + 1
        if ended:
            self._bars[source] = step
        keys = (OPENRLHF_REWARD, *self.reward_keys)
        return step_events(dict(metrics), step, keys, done=ended)


def _lightning_placeholder(metrics: dict[str, float]) -> None:
    """Drop a bar postfix's `loss=nan` that is Lightning's placeholder for no running loss
    (`LIGHTNING_LOSS`): another key of the postfix names a loss, and it is finite."""
    value = metrics.get(LIGHTNING_LOSS)
    if value is None or not math.isnan(value):
        return
    others = (v for k, v in metrics.items() if k != LIGHTNING_LOSS and "loss" in k.lower())
    if any(math.isfinite(v) for v in others):
        del metrics[LIGHTNING_LOSS]

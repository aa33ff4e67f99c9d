"""Where trainers put a step's reward: the metric keys, in the order they are looked for.

The contract's default of `zero_reward.reward_keys` (section 4): the rule and the emitters
(`trainer.py`, the console readers) read the same tuple, so they agree on the default. A
module of its own, so that the rules import a tuple, not a trainer's helpers.
"""

from __future__ import annotations

DEFAULT_REWARD_KEYS: tuple[str, ...] = (
    "critic/score/mean",
    "critic/rewards/mean",
    "task_reward/avg",
    "reward/mean",
    "reward",
)

"""A configuration printed to a console is no step's metrics (issue 41): its values are
settings -- a clip threshold or a max norm of `inf` means no limit -- not a run going wrong.
A limit's key excuses its `inf` alone (`no_limit`): a NaN is no setting's value.
Nor is a statistic's NaN that is 0/0 (`undefined`): one sample, no variance.

Told from a metric record by its shape:

- the key names a limit (`limit`): a word of it is `clip`, `clipping`, `limit`, `threshold`,
  `patience`, `timeout`; it is a rate of requests, a benchmark's load (vLLM's and SGLang's
  `bench_serving` print `Traffic request rate: inf` for `--request-rate inf`, every request
  at once); or `max` / `min` qualifies another word (`max_norm`,
  `optim.max_grad_norm`, `grad_clip`, `gradient_clipping`, `nccl_timeout`); a statistic
  named after its reduction (verl's `critic/score/max`, `response_length/min`) is a metric;
  or it names how often the trainer prints, logs, saves or evaluates (`_CADENCE`: DeepSpeed's
  `steps_per_print`, transformers' `logging_steps` / `save_steps` / `eval_steps`, a
  `log_interval`, a `checkpoint_freq`), whose `+inf` means never;
- the record is a settings object's repr (`settings_repr`): argparse's
  `Namespace(lr=0.1, ...)` (argparse.Namespace.__repr__ writes its type's name), a dataclass's
  or a pydantic model's `GRPOConfig(...)`, `TrainingArguments(...)`, `ModelArgs(...)`,
  `OptimizerParams(...)` -- a class named for settings, by the naming every framework uses
  (transformers' and TRL's `*Arguments` / `*Config`, Megatron's `TransformerConfig`, verl's
  and NeMo's `*Config`, DeepSpeed's `DeepSpeed*Config`);
- the dict or the repr follows a label that names settings on its line (`config: {...}`,
  `Training/evaluation parameters TrainingArguments(...)`, `hparams = {...}`,
  `generation_kwargs: {...}`).
"""

from __future__ import annotations

import math
import re

#: words of a key that make its value a limit (module docstring)
_LIMIT_WORDS = frozenset(
    {"clip", "clipping", "limit", "threshold", "thresh", "patience", "timeout"}
)
_WORDS = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])")
#: a cadence's key (module docstring), its last part: what is done every so often, then how
#: often (`logging_steps`, `eval_interval`, `save_every_n_steps`), or DeepSpeed's
#: `steps_per_print`; not a metric named after the step it was logged at (Lightning's
#: `eval_loss_step`), per token or per second (`log_prob_per_token`, `eval_steps_per_second`)
_CADENCE = re.compile(
    r"(?i)(?:^|[/.])(?:(?:print|log|logging|save|eval|evaluation|checkpoint|ckpt)_?"
    r"(?:steps|interval|every(?:_n)?(?:_steps)?|freq|frequency|period)"
    r"|steps_per_(?:print|log|save|eval|checkpoint))$"
)
#: the older, stricter form: a key that starts with a limit's word (`clipfrac`, `maxnorm`)
_LIMIT_PREFIX = re.compile(r"(?i)^(?:max|min|limit|clip|threshold|patience)")


def limit(key: str) -> bool:
    """Whether a key names a setting whose `inf` means no limit (module docstring)."""
    if _LIMIT_PREFIX.match(key):
        return True
    words = [w.lower() for w in _WORDS.findall(key)]
    if any(w in _LIMIT_WORDS for w in words):
        return True
    if "rate" in words and ("request" in words or "requests" in words):
        return True  # a benchmark's load: `Traffic request rate: inf`, all requests at once
    # `max_norm`, `actor.max_grad_norm`: a bound on what follows; `score/max`: a reduction
    return any(w in ("max", "min") for w in words[:-1]) and not _REDUCTION.search(key)


def no_limit(key: str, value: float) -> bool:
    """Whether a value is a limit's setting: `inf` (no limit) under a key that names a limit
    (`limit`), or `+inf` (never) under a cadence's (`_CADENCE`). A NaN is none -- no setting
    means it -- but a measurement gone wrong, whatever its key's words (`clip_fraction: nan`,
    `max_reward: nan`, a `clip_ratio` row)."""
    if value == math.inf and _CADENCE.search(key) is not None:
        return True
    return math.isinf(value) and limit(key)


#: `max` / `min` as a reduction of a metric, its key's last part (`score/max`, `reward_max`,
#: `max/reward`): a statistic, no setting
_REDUCTION = re.compile(r"(?i)(?:[/.]|^)(?:max|min)(?:[/.]|$)|[_/.](?:max|min)$")

#: a settings object's repr, whatever holds it (`settings_repr`)
_REPR = re.compile(
    r"(?<![\w.])(?:Namespace|[A-Z]\w*(?:Arguments|Args|Config|Configuration|Params|Parameters|"
    r"Options|Settings|Hparams|HParams))\(\s*(?:\n|\w+=)"
)
#: a label that names settings, right before a dict or a repr on its line
_LABEL = re.compile(
    r"(?i)(?:^|[^\w])\w*(?:config|configuration|conf|cfg|args|arguments|argv|hparams|"
    r"hyper-?parameters|parameters|params|settings|options|kwargs)\b[\s:=]*$"
)


def settings_repr(text: str) -> bool:
    """Whether a line prints a settings object's repr (`Namespace(lr=0.1, max_norm=inf)`,
    `GRPOConfig(learning_rate=1e-06, ...)`): its values are settings."""
    return "(" in text and "=" in text and _REPR.search(text) is not None


def labelled(before: str) -> bool:
    """Whether the text before a printed dict labels it as settings (`config: `, `Training
    with args `, `hparams = `)."""
    return bool(before) and _LABEL.search(before[-120:]) is not None


def settings(text: str) -> bool:
    """Whether a line prints settings (`settings_repr`, or a dict after a settings label)."""
    if settings_repr(text):
        return True
    brace = text.find("{")
    return brace > 0 and labelled(text[:brace])


#: a statistic that is NaN when it is 0/0: the explained variance of constant returns
#: (stable-baselines3's and baselines' `explained_variance`: `np.nan if var_y == 0`), and a
#: standard deviation beside its own finite mean -- of one sample (torch's and numpy's
#: unbiased `std`): no measurement of a run going wrong. A std alone may be a policy's own
#: (SB3's `train/std`, exp of its log-std) and a variance a parameter (baselines' `var_mean`):
#: those stay
_EXPLAINED = re.compile(r"(?i)(?:^|[/_.\s])explained_var(?:iance)?$")
_STD = re.compile(r"(?i)[/_.\s](?:std|stddev|stdev)$")
_MEAN = ("", "mean", "average", "avg")
#: a count of what a line's averages are over (darknet's `Region 94 Avg IOU: -nan, Class:
#: -nan, ... count: 0` for a scale with no object in the batch): at 0 every mean beside it
#: is 0/0 -- the key itself, not a counter of something else (a loss scaler's `incr_count`)
_COUNT = re.compile(r"(?i)^\s*(?:count|cnt)$")


def undefined(key: str, value: float | None, metrics: dict[str, float | None]) -> bool:
    """Whether a value is 0/0 (`_EXPLAINED`, `_STD` beside its finite mean, a NaN beside a
    count of 0): no measurement."""
    if value is None or value == value:
        return False
    if _EXPLAINED.search(key):
        return True
    if any(v == 0 and _COUNT.search(k) for k, v in metrics.items()):
        return True
    if (m := _STD.search(key)) is None:
        return False
    base = key[: m.start()].lower()
    return any(
        other != key
        and v is not None
        and math.isfinite(v)
        and other.lower().startswith(base)
        and other.lower()[len(base) :].lstrip("/_. ") in _MEAN
        for other, v in metrics.items()
    )

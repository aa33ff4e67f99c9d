"""Metric lines that name no step: how `metric_shape.read_line` tells them from prose.

A line that names no step is a step's metrics when it holds two pairs or more with a
separator, one of them not finite (`unnumbered`), or when it is one metric that is not finite
and nothing else (`lone`); a two-column table's row is one pair (`single_pair`).
"""

from __future__ import annotations

import math
import re

from runwatch.emitters.metric_pairs import PAIR, SOURCE_FILE, Pair, pairs, step_key
from runwatch.emitters.metric_settings import no_limit
from runwatch.emitters.prefixes import GLOG_YEAR

#: a `key=` or `key: ` item of a line, whatever its value
_ITEM = re.compile(r"(?<![\w.@-])[A-Za-z_][\w./@-]*\s*(?:=|:\s)")
#: a value wrapped with its own keyword arguments (`tensor(nan, device='cuda:0')`): one value,
#: whose `device=` is no item of the line's
_WRAPPED = re.compile(r"\b(?:tensor|(?:np|numpy|torch)\.\w+)\([^()\n]{0,120}\)")


def unnumbered(text: str, found: list[Pair], metrics: dict[str, float]) -> bool:
    """Whether a line that names no step is still a step's metrics: two pairs or more with a
    separator, one not finite and no limit's setting, and no more than one `key=`/`key: `
    item that is not a number (a configuration printed as `Namespace(model='x', ...)` is
    mostly words); a wrapped value's arguments (`tensor(nan, device='cuda:0')`) are none."""
    spaced = sum(not p.separated and " " not in p.key for p in found)  # `loss inf lr 0.1`
    if sum(p.separated for p in found) < 2 and spaced < 3:
        return False
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    if not bad or all(no_limit(k, metrics[k]) for k in bad):
        return False
    if "(" in text:
        text = _WRAPPED.sub("0", text)
    return len(_ITEM.findall(text)) - len(found) <= 1


#: what may stand before a lone pair: a timestamp, a quote's `>`, a list's mark, an INFO
#: or DEBUG record's level and logger (`INFO:root:`, `- INFO - train - `, Python logging's
#: `%(asctime)s - %(name)s - %(levelname)s - `, glog's and absl's `I0101 10:00:00.000 123
#: train.py:88] `), or a program's
#: name as a tool prefixes its lines (wandb's run summary, `wandb:          train/loss nan`;
#: wandb/sdk/internal's summary printer), not a warning's or an error's
_LONE_BEFORE = re.compile(
    r"^(?:\[\d\d/\d\d/\d{2,4} [\d:.]+\]\s*)?(?:[\d>#*\[][\s>#*\-\d:,.\[\]T]*)?"
    r"(?:(?!(?:WARN|WARNING|ERROR|CRITICAL|FATAL)\b)[\w.]+\s+-\s+)?"
    r"(?:(?:INFO|DEBUG)\b[\s\-:|\]]*(?:[\w.]+\s*[:\-|]\s*)?"
    rf"|I{GLOG_YEAR}\d{{4}} [\d:.]+\s+\d+ [\w./-]+:\d+\]\s+"
    r"|(?!(?i:warn|warning|error|fatal|critical)\b)[a-z][\w.-]{1,30}:\s+)?$"
)
#: after a lone pair: punctuation, the source location rich's log handler writes at the
#: line's right (`[01/01/24 10:00:00] INFO     loss: nan        train.py:42`), or a count of
#: the samples done (PyTorch's tutorials' training loop, copied into countless scripts:
#: `print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")`, pytorch/tutorials
#: beginner_source/basics/optimization_tutorial.py)
_LONE_AFTER = re.compile(r"^[\s.,;|)\]}]*(?:\s+[\w./-]+\.py:\d+\s*|\s+\[\s*\d+/\s*\d+\]\s*)?$")


def _key(m: re.Match[str]) -> str:
    """The key a match of `PAIR` names, whichever way it is written."""
    return next((g for g in m.group("qk", "dk", "bk", "k", "pk") if g), "").strip()


def lone(text: str, found: list[Pair], metrics: dict[str, float]) -> bool:
    """Whether a line is one metric that is not finite and nothing else (a callback's
    `LOSS     :  nan`, `Mean Training loss : nan`, a quoted `> Mean Reward: nan`, YAML's
    `episode_reward_mean: .nan`, `discrim_loss nan`): a timestamp or a level before it at most;
    spaces alone separate a one-word key only; a setting (`max_grad_norm: inf`, an indented
    `  warmup: inf` of a configuration, a warning's `WARNING grad_norm=nan`) is none."""
    if len(found) != 1 or len(metrics) != 1 or math.isfinite(found[0].value):
        return False
    pair = found[0]
    if no_limit(pair.key, pair.value) or step_key(pair.key):
        return False
    if not pair.separated and " " in pair.key:
        return False
    # a source location (glog's `train.py:88]`, rich's `train.py:42`) is no pair
    matches = [m for m in PAIR.finditer(text) if not SOURCE_FILE.search(_key(m))]
    if len(matches) != 1:
        return False
    m = matches[0]
    said = m.group(0).lstrip("'\"[")
    if not (
        said.startswith(pair.key) or said.startswith((f"INFO {pair.key}", f"DEBUG {pair.key}"))
    ):
        return False  # words before its key (`WARNING grad_norm=nan`)
    return bool(_LONE_BEFORE.match(text[: m.start()]) and _LONE_AFTER.match(text[m.end() :]))


#: one item of a dict printed an item a line, as JSON (`json.dumps(metrics, indent=2)`:
#: `  "loss": NaN,`) or rich's pretty printer draws it (`│   'loss': nan,`, its indent guide
#: a `|` here): a quoted key, its value, a comma at most
_DICT_ITEM = re.compile(r"""^[\s|]*(?:'[^'\n]{1,100}'|"[^"\n]{1,100}")\s*:\s*\S+?,?\s*$""")


def dict_item(text: str, found: list[Pair], metrics: dict[str, float]) -> bool:
    """Whether a line is one item of a dict printed an item a line (`_DICT_ITEM`) whose value
    is not finite and no limit's: the metric of the step the console is at (a dict of
    settings printed so holds words: its `inf` is a limit's, `limit`)."""
    if len(found) != 1 or len(metrics) != 1 or not found[0].quoted:
        return False
    pair = found[0]
    return (
        not math.isfinite(pair.value)
        and not no_limit(pair.key, pair.value)
        and step_key(pair.key) is None
        and _DICT_ITEM.match(text) is not None
    )


_ROW_BEFORE = re.compile(r"^[^A-Za-z]*$")  # a timestamp, a rule, nothing
#: the marks a pretty printer puts before each `key: value` line of a list of results, as a
#: table's `|` before a row: NeMo-RL's `  • Loss: 0.0123` lines under `📊 Training Results:`
#: (nemo_rl/algorithms/grpo.py, sft.py, dpo.py, ppo.py, distillation.py, v0.2.1-0.7.0).
#: Display marks only -- a configuration's list is `- ` (YAML), never one of these
BULLETS = ("•", "◦", "▪", "‣")
_ROW_AFTER = re.compile(r"^[\s|]*$")


def single_pair(text: str, bare: bool = False) -> Pair | None:
    """The one pair of a two-column table's row (rlpyt's `2020-12-08 21:40:50.116 | loss/
    Average   nan`, baselines' `| eprewmean | -2.5e+03 |`) or of a list's (`  • Loss: nan`,
    `BULLETS`): the line holds that pair, a `|` or a bullet and no words besides; None for
    any other line (a frame's `File "x.py", line 463, in f`, a configuration's
    `max_grad_norm: inf`). `bare`: the `|` may be missing (a `key: value` line under a
    header)."""
    found = _row_pair(text, bare)
    return found if found is not None and step_key(found.key) is None else None


def step_row(text: str) -> int | None:
    """The step a two-column table's row names (`| step | 10 |` among a table's metrics,
    rich's `│ global_step │ 12 │`); None for any other line."""
    named = table_step(text)
    return named[1] if named is not None else None


def table_step(text: str) -> tuple[str, int] | None:
    """(the kind, the step) a two-column table's row names (`step_row`; Spinning Up's
    `|             Epoch |               3 |`: an epoch)."""
    found = _row_pair(text, False)
    if found is None or (kind := step_key(found.key)) is None:
        return None
    value = found.value
    if not (math.isfinite(value) and value.is_integer() and value >= 0):
        return None
    return kind, int(value)


#: a number a row writes with thousands separators (OLMo's `train/Perplexity=195,153`,
#: `throughput/total_tokens=1,048,576`; stable-baselines' `| total_timesteps | 24,960 |`)
_GROUPED = re.compile(r"(?<=[\s=:|])([-+]?\d{1,3}(?:,\d{3})+)(?=\s*\|?\s*$)")


def _row_pair(text: str, bare: bool) -> Pair | None:
    """A line's one pair, with a `|` and no words besides (single_pair's, step_row's); its
    number may have thousands separators (`_GROUPED`)."""
    if "|" not in text and not bare and not text.lstrip().startswith(BULLETS):
        return None
    if "," in text:
        text = _GROUPED.sub(lambda m: m.group(1).replace(",", ""), text)
    matches = list(PAIR.finditer(text))
    if len(matches) != 1:
        return None
    m = matches[0]
    if not _ROW_BEFORE.match(text[: m.start()]) or not _ROW_AFTER.match(text[m.end() :]):
        return None
    found = pairs(m.group(0))
    return found[0] if len(found) == 1 else None


#: a scalar tensor a script printed (`print(loss)`), as torch writes it (torch/_tensor_str.py
#: `_str_intern`: "tensor(" the value, then its suffixes -- `device='cuda:0'`, a dtype,
#: `grad_fn=<NllLossBackward0>`): the autograd node that made it says it was computed, its
#: name what (a loss's node, `...LossBackward0`, or the reduction after one)
_PRINTED_TENSOR = re.compile(
    r"^[\s>]*tensor\((?P<v>nan|-?inf)(?:, (?:device|dtype)=[^,()]+)*, grad_fn=<(?P<fn>[A-Za-z]+?)"
    r"(?:Backward\d*)?>\)\s*$"
)


def printed_tensor(text: str) -> tuple[str, float] | None:
    """(its node's name, its value) of a printed scalar tensor a computation made that is not
    finite, alone on its line (`tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)`); None
    for any other line (a tensor of several values, one nothing computed, a finite one)."""
    m = _PRINTED_TENSOR.match(text)
    if m is None:
        return None
    return m.group("fn"), float(m.group("v"))


#: a value a sentence says a step had (TensorFlow's tutorials and the scripts that copy them:
#: `print('Minibatch loss at step %d: %f' % (step, l))`, word2vec's `print('Average loss at
#: step ', step, ': ', average_loss)`): `KEY at step N: VALUE`, `at iteration N`, `at epoch N`
_AT_STEP = re.compile(
    r"^[\s>]*(?!(?:warn|warning|error|critical|fatal)\b)"
    r"(?P<key>[A-Za-z][\w./-]*(?: [A-Za-z][\w./-]*){0,3}) at "
    r"(?P<kind>step|iteration|iter|epoch|batch) +(?P<n>\d{1,12}) *[:=] *"
    r"(?P<v>[-+]?\.?(?:nan|inf(?:inity)?))\s*$",
    re.I,
)


def at_step(text: str) -> tuple[str, int, float] | None:
    """(key, step, value) of a sentence that gives a step's value that is not finite (`Minibatch
    loss at step 500: nan`); None for any other line (a finite value, more after it)."""
    m = _AT_STEP.match(text)
    if m is None:
        return None
    return m.group("key"), int(m.group("n")), float(m.group("v"))


#: a trainer's own sentence that it stops because a value is not finite (torchvision's
#: detection and classification references, and the DeiT / MAE / timm-style loops copied from
#: them: `print(f"Loss is {loss_value}, stopping training"); sys.exit(1)`; `Loss is not finite.
#: Terminate training.`): the value is the step's, and the run ends on it. A sentence that
#: the step was skipped instead (`metric_shape.skip_report`) is none; so is one with no stop
#: after the value (TensorFlow's `Model diverged with loss = NaN.`, the NaN hook's error)
_STOPS_ON = re.compile(
    r"^[\s>]*(?!(?:warn|warning|error|critical|fatal)\b)"
    r"(?P<key>[A-Za-z][\w./-]*?(?: [A-Za-z][\w./-]*){0,2}?)(?: [a-z]{1,3} | ?[:=] ?| )"
    r"(?P<v>[-+]?(?:nan|inf(?:inity)?)|not finite|non-?finite)\b[\s.,;:!]*"
    r"(?:\w+ ){0,2}(?:stop(?:ping|s)?|terminat(?:e|es|ing)|abort(?:ing|s)?|exit(?:ing|s)?|"
    r"halt(?:ing|s)?)\b(?: (?:the )?(?:training|train|run|job))?[.!]?\s*$",
    re.I,
)


#: ... the same sentence with the value first (ultralytics' yolov3 and yolov5 train.py: `if not
#: torch.isfinite(loss): print('WARNING: non-finite loss, ending training ', loss_items);
#: return results`), under its level's word, or glued after the progress bar the trainer was
#: drawing (`...1.66it/s]WARNING: non-finite loss, ending training  tensor([nan, ...])`): what
#: follows the stop is the values it printed
_STOPS_ON_FIRST = re.compile(
    r"[\s>]*(?:(?:warn|warning|error|critical|fatal)\b:?\s*)?"
    r"(?P<v>non-?finite|not finite|nan|inf(?:inity)?) "
    r"(?P<key>[A-Za-z][\w./-]*?(?: [A-Za-z][\w./-]*)?)[,.;:!]? (?:\w+ )?"
    r"(?:stop(?:ping|s)?|end(?:ing|s)?|terminat(?:e|es|ing)|abort(?:ing|s)?|exit(?:ing|s)?|"
    r"halt(?:ing|s)?) (?:the )?(?:training|train|run|job)\b",
    re.I,
)


def _value_word(text: str) -> bool:
    """Whether `_STOPS_ON_FIRST` can match in `text`: what it stops and its value word (a few
    substring tests, the first failing on most lines: the scanner asks every metric line)."""
    return ("train" in text or " run" in text or " job" in text) and (
        "finite" in text or "nan " in text or "NaN " in text or "inf " in text
        or "Inf " in text or "NAN " in text or "INF " in text or "nity " in text
    )  # fmt: skip


#: a word that makes the sentence a condition, not a report (`If loss is nan, stop training`:
#: a trainer's or a launcher's words for what it would do, printed by a healthy run)
_CONDITION = re.compile(r"(?i)\b(?:if|when|whenever|unless|once|should)\b")


def stops_on(text: str) -> tuple[str, float] | None:
    """(key, value) of a trainer's sentence that it stops on a value that is not finite (`Loss
    is nan, stopping training`, `non-finite loss, ending training`; `not finite` reads as
    nan); None for any other line, a condition among them (`If loss is nan, stop training`)."""
    m = _STOPS_ON.match(text)
    if m is None and _value_word(text):  # (anchored at a line's start or after its first `]`,
        # a bar's end: no condition can come before it)
        m = _STOPS_ON_FIRST.match(text)
        if m is None and (bracket := text.find("]")) >= 0:
            m = _STOPS_ON_FIRST.match(text, bracket + 1)
    if m is None or _CONDITION.search(m.group("key")):
        return None
    said = m.group("v").lower()
    return m.group("key"), float("nan") if "finite" in said else float(said)


#: what may stand before a sentence a trainer logs: a logging record's head -- timestamps,
#: bracketed or parenthesised fields (`[host:0/8]`, `(trainer:617)`), a logger's name before
#: ` - `, a level's word, `root:` after it (possessive: a head of digits fails fast)
_SENTENCE_LEAD = (
    r"^(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?|[\s>\d:.,/-]++|\[[^\]\n]{0,80}\]|\([^)\n]{0,80}\))*+"
    r"(?:[\w.]+\s+-\s+)?(?:(?:warn|warning|error|critical|fatal|info)\b[\s:|-]*)?"
    r"(?:[\w.]+:\s*(?=[A-Za-z]))?"
)
#: a value a sentence says a metric has: not finite in words, or NaN or inf -- a word of its
#: own (`NaN-free`, `nan-safe` are no value)
_SAID_VALUE = r"(?P<v>not finite|non-?finite|[-+]?nan|[-+]?inf(?:inite|inity)?)(?![\w-])"
#: a sentence whose subject is a metric and whose predicate is that it is not finite, with no
#: stop after it (verl's SFT trainer and critic, `print(f"WARN: grad_norm is not finite:
#: {grad_norm}")`, its actor `WARN: rank {rank} grad_norm ...`, verl/trainer/fsdp_sft_trainer.py,
#: workers/critic/dp_critic.py, workers/actor/dp_actor.py, v0.2-0.6; `Loss is NaN.`): the peer
#: that says it first at most; its value after a `:` where it gives one, bare or as a tensor
_SAYS_KEY_FIRST = re.compile(
    _SENTENCE_LEAD + r"(?:(?:rank|worker|gpu|device|process|node) ?#?\d+:?,? )?(?:the )?"
    r"(?P<key>[A-Za-z][\w./-]*?(?: [A-Za-z][\w./-]*){0,2}?) "
    r"(?:is|are|was|were|became|becomes|has become|turned|turns|went|got|gets) "
    + _SAID_VALUE
    + r"(?:\s*[:=]\s*(?:tensor\()?(?P<given>[-+]?(?:nan|inf(?:inity)?))(?![\w-]))?",
    re.I,
)
#: ... the value first (CosyVoice's executor, `logging.warning('get infinite grad_norm, check
#: your code/data if it appears frequently')`, cosyvoice/utils/train_utils.py; `NaN loss
#: detected`, `NaN detected in loss`): the metric's name ends the clause -- `non-finite loss
#: values are ...` is prose, and so are values of nothing named (`Detected nan values.`)
_SAYS_VALUE_FIRST = re.compile(
    _SENTENCE_LEAD
    + r"(?:(?:get|gets|got|found|detected|encountered|an?) )?"
    + _SAID_VALUE
    + r" (?:(?:detected|found|encountered) )?(?:in (?:the )?)?"
    r"(?!(?:values?|entries|elements|numbers|items|or|and|found|detected|nan|inf\w*)\b)"
    r"(?P<key>[A-Za-z][\w/-]*(?:\.[\w/-]+)*"
    r"(?: (?!(?:detected|encountered|found|occurred)\b)[A-Za-z][\w/-]*)?)"
    r"(?=\s*[,.;!]|\s*$|\s*:(?!\s*[-+]?\d)| (?:detected|encountered|found|occurred)\b)",
    re.I,
)
#: what a metric's name is made of: an identifier's `_`, `/` or `.`, or a word of training's
#: metrics -- a sentence that the dataset, a sampler or a loop is infinite names none
_METRIC_WORD = re.compile(
    r"(?i)[_/.]|loss|norm|grad|reward|return|score|\bkl\b|entropy|advantage|perplexity|\bppl\b"
    r"|logit|logprob"
)
#: words no metric's name holds: a clause's (`Steps where grad_norm was nan: 0`, `rewards that
#: are nan`), a count's (`times loss was nan`), a note's (`Note that loss is NaN`)
_NOT_IN_KEY = re.compile(
    r"(?i)\b(?:that|which|where|whose|when|if|note|check|times?|steps?|number|count|of|for"
    r"|with|how|why|what|whether)\b"
)
#: what after the value makes the sentence no report of one: a condition or a cause (`the loss
#: is nan if the batch is empty`, `AUC is nan because ...`, `loss is nan for padded tokens`), a
#: question, a count (`Loss was infinite in 0 of 100 steps`, `nan loss: 0`)
_NO_REPORT_AFTER = re.compile(
    r"(?i)[\s,]*(?:if|when|whenever|unless|because|since|for|in \d)\b|\s*\?|\s*[:=]\s*[-+]?\d"
)
#: a value the sentence says was put in its place (a reward function's `reward is nan, setting
#: it to 0`, `replacing with 0.0`, `clamped to 0`, `-> 0`): handled, as a skip is
_PUT_RIGHT = re.compile(
    r"(?i)\b(?:replac\w*|clamp\w*|clip\w*|default\w*|return\w*|assign\w*|zero\w*|using|use"
    r"|set|setting|reset\w*|fall\w* back)\b|->|=>"
)


def says_not_finite(text: str) -> tuple[str, float] | None:
    """(key, value) of a sentence that says a metric is not finite, stopping or not (`WARN:
    grad_norm is not finite: nan`, `get infinite grad_norm, check your code/data ...`; `not
    finite` reads as nan unless a value follows); None for any other line: a subject that is
    no metric (`The dataset is infinite.`), a condition, a cause, a question or a count around
    the value, a value put right in its place, a skip (`metric_shape.skip_report`, asked by
    the caller)."""
    m = _SAYS_KEY_FIRST.match(text) or _SAYS_VALUE_FIRST.match(text)
    if m is None:
        return None
    key = m.group("key")
    if not _METRIC_WORD.search(key) or _NOT_IN_KEY.search(key) or _CONDITION.search(key):
        return None
    if _NO_REPORT_AFTER.match(text, m.end()) or _PUT_RIGHT.search(text, m.end(), m.end() + 80):
        return None
    said = (m.groupdict().get("given") or m.group("v")).lower()
    if not said.lstrip("+-").startswith("inf"):
        return key, math.nan
    negative = said.startswith("-") or text[m.start("v") - 1 : m.start("v")] == "-"
    return key, -math.inf if negative else math.inf


#: a hook's or a callback's sentence that the loss went NaN or inf, as it stops the run:
#: Keras' `TerminateOnNaN` (keras/src/callbacks/terminate_on_nan.py, tf.keras' before it)
#: prints `Batch {batch}: Invalid loss, terminating training` (the value unsaid) and training
#: ends quietly; TensorFlow's `NanTensorHook` (tensorflow/python/training/
#: basic_session_run_hooks.py) logs `Model diverged with loss = NaN.` before it raises
#: `NanLossDuringTrainingError` -- or goes on, with `fail_on_nan_loss=False`
_INVALID = re.compile(
    r"\bInvalid (?P<key>loss), (?:terminating|stopping) training\b"
    r"|\bModel diverged with (?P<tf>loss) = NaN\b"
)


def invalid_stop(text: str) -> str | None:
    """The key of a callback's `Invalid loss, terminating training` or TensorFlow's `Model
    diverged with loss = NaN.` (its value NaN or inf: read as nan; Keras' `Batch N` counts
    from 0 the batch the bar just showed from 1: the console's step is the record's); None
    for any other line."""
    if ("nvalid " not in text and "diverged" not in text) or (m := _INVALID.search(text)) is None:
        return None
    return m.group("key") or m.group("tf")

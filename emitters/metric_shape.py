"""A metric line by its shape, whatever trainer printed it: key/value pairs and a step.

The grammar (issue 41): a pair is a key, a separator and a number --

- keys: a word or a few (`loss`, `grad norm`, `elapsed time per iteration (ms)`, `loss/Average`,
  `#queue-req`), quoted (`'loss'`, `"loss"`) or bracketed (`[Loss]`);
- separators: `:`, `=`, `|`, or spaces alone (`Train iter 16 loss 49.3`, `loss/Average   nan`);
  a value may stand in brackets (`iter[ 14/ 15]`, `Epoch(train) [1]`);
- numbers in any notation -- `3`, `-0.5`, `2.999E-04`, `nan`, `NaN`, `inf`, `-inf`,
  `Infinity` -- bare, quoted, or wrapped (`tensor(nan)`, `np.float64(nan)`,
  `tensor(0.5, device='cuda:0')`), with `N/M` for a count out of a total (`iteration 5426/
  250000`); a number glued to a unit (`2.96s/it`, `0.4m`) or to a `:` (`2:44:49`) is none;
- pairs between `|`, `,`, ` - `, tabs or spaces.

A line is a step's metrics when it names its step and one more pair. The step is, first to
last: a key like `step`, `steps`, `global_step`, `Global Step`, `iteration`, `iter`, `it`
(`[step] 104`, `iteration 5426/250000`, nanoGPT's `iter 3010:`), a word before the counter
qualifying it (`Total iter`, `Learning iteration`) unless it makes it a setting's, another
phase's or prose (`max_steps`, `eval_steps`, `micro step`, `from step`); the `[epoch][iter/
total]` of mmengine and torchvision's MetricLogger; a position out of a total under any other
name (`Training  [ 40/5000000]`, `Batch 0/4000`; not a peer's, `[host:0/8]`); the count the
line starts with, bare or bracketed (`[40/1000] loss: nan`) -- a Keras bar's
position (`4/234 [=====>....] - loss: inf`), a bare number column (`100000 | loss nan |`,
`333 154 Loss=nan`, the last of several); a `batch` key, then an `epoch` key, for a line
that counts nothing finer (`Batch 12: loss = nan`, `Train Summary | Epoch 8 |
grad_norm=INF`). A line that names no step is a step's metrics when it prints a dict
(quoted keys, HF-style), or when it holds two pairs or more with a separator and one of
them is not finite (`Acc@10: 0.002, Grad Norm: inf`): `MetricLines` gives it the step the
nearest progress bar, step line or header named, else the one after the last (the order of
lines). A *header* is a line that names a step and nothing else (`Iteration
3027`, `Learning iteration 8391/10000`, `---- Iteration #50 ----`), or a logging record whose
message is counters alone (OLMo's `... INFO    [step=1/739328,epoch=0]`): the `key: value` lines
under it are that step's (`MetricLines`). `step_numbers.loss_scale_overflow` reads the lines
that say a step was skipped for a loss-scale overflow (fp16 in DeepSpeed, apex and Megatron);
a trainer's sentence that it skipped a step for a NaN (`skip_report`) is no metric line (the
value was not applied); a setting's `inf` (`max_grad_norm=inf`), a printed configuration
(`metric_settings`) and a best-so-far's are no measurement; `metric_tables` reads tables of numbers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from runwatch.emitters.metric_alone import (
    at_step,
    dict_item,
    invalid_stop,
    lone,
    printed_tensor,
    says_not_finite,
    single_pair,
    step_row,
    stops_on,
    table_step,
    unnumbered,
)
from runwatch.emitters.metric_pairs import (
    LABELLED_GROUP_GATE,
    NAMED_LIST_GATE,
    NUMBER,
    PAIR,
    STEP_ENDS,
    Pair,
    labelled_groups,
    msvc_nan,
    named_lists,
    nan_lists,
    pairs,
    step_key,
    value_first,
)
from runwatch.emitters.metric_settings import limit, settings
from runwatch.emitters.tracebacks import exception_at

__all__ = [
    "EVALUATION",
    "MARKERS",
    "NUMBER",
    "STEP_RANK",
    "Pair",
    "Record",
    "counter",
    "header",
    "label_count",
    "pairs",
    "read_line",
    "read_step",
    "single_pair",
    "skip_report",
    "step_key",
    "step_row",
    "table_step",
]

#: mmengine's `Epoch(train) [1][240/735]`, torchvision / timm's `Epoch: [3]  [ 100/1251]`,
#: `Epoch: [127/300][ 35/464]`
_EPOCH_ITER = re.compile(r"\[\s*\d+\s*(?:/\s*\d+\s*)?\]\s*\[\s*(\d{1,18})\s*/\s*\d+\s*\]")
#: a position among peers (`[host:0/8]`, `rank 3/8`, `GPU 1/4`): no count of progress
_PEER = re.compile(
    r"(?i)(?:^|[\s_])(?:rank|host|node|worker|gpu|device|proc|process|dp|tp|pp|"
    r"shard|replica|machine|server|client)$"
)
#: which of several step keys on one line names the step (global before micro, ...); an
#: optimizer update (fairseq's `num_updates`) is a step, a batch's index one where nothing finer
#: is counted (`Batch 12: loss = nan`); an epoch only where nothing finer is
#: counted (`_step`)
STEP_RANK = ("global", "step", "iteration", "iter", "it", "updates", "update", "batch", "episode",
             "epoch")  # fmt: skip
#: the count a line starts with, before its first pair: a Keras progress bar's position
#: (tf.keras' `  4/234 [=====>.......] - ETA: 25:09 - loss: inf`, Keras 3's `4/234 ━━━━━━ 25:09
#: 6s/step - loss: inf`; keras/src/utils/progbar.py), or bare numbers, the last the finest
#: (`100000 | loss nan |`, `333 154 Loss=nan`, `[40/1000] loss: nan`); a date or a time is none
#: (`10/30 22:19:57`).
#: A count read as an int has at most 18 digits (Python refuses to read a long one).
_BAR_COUNT = re.compile(r"^[\s>]*(\d{1,18})/(?:\d+|Unknown) (?:\[[=>.]*\]|\u2501+)")
_LEAD_COUNT = re.compile(
    r"^[\s>]*(?:\d+\s+)*\[?\s*(\d{1,18})(?:\s*/\s*\d{1,18})?\s*\]?\s*[|:,\-]?\s*$"
)
#: a header: a line that names a step and nothing else, decorated or not (`Iteration 3027`,
#: `Learning iteration 8391/10000`, `---- Iteration #50 ----`, `Epoch 2/10`, three words at
#: most before the counter: `Eval metrics at step 6:`), after a
#: timestamp and an INFO level at most (nnU-Net's `2023-08-09 14:55:25.642011: Epoch 0`)
_HEADER = re.compile(
    r"(?i)^(?:\[?\d{4}-\d\d-\d\d[ T][\d:.,]+\]?[\s:|\-]+(?:(?:INFO|DEBUG)\b[\s:|\-\]]*)?)?"
    r"[\s\-=#*|>:.\[]*(?:[a-z]+ ){0,3}(steps?|iteration|iter|it|updates?|epoch)\s*[:#]?\s*"
    r"(\d{1,18})(?:\s*(?:/|of)\s*\d+)?[\s\-=#*|:.\]]*"
    r"(?:(?<=\s)took [\d.]+\s*(?:s|sec|seconds|ms|min|m)\.?\s*)?$"
)
#: a count written before what it counts, the finer unit than an epoch (multiffn-nli's
#: `0 completed epochs, 100 batches Average training batch loss: nan`, `after 1200 steps`),
#: out of a total or not (PyTorch's word_language_model example, `'| epoch {:3d} | {:5d}/{:5d}
#: batches | ...'`: `|   200/ 2983 batches |`, the batch the line is at first)
_COUNTED = re.compile(
    r"(?<![\w./])(?:(\d{1,18})\s*/\s*)?(\d{1,18}) (?:completed |finished |processed )?"
    r"(?:steps|iterations|iters|batches|updates)\b(?![/=])"
)
#: a counter after `at`, as a pair's key (`loss: nan at step 100`)
_AT_STEP_KEYS = frozenset(f"at {w}" for w in ("step", "iteration", "iter", "global step", "update"))
#: keys that count what was skipped (Megatron's `number of skipped iterations`)
_SKIPPED = re.compile(r"skipped iter", re.I)
#: a best-so-far starts at inf before anything is measured (`best_val_loss: inf`), and a
#: change is told from it (Keras' ModelCheckpoint, copied widely: `val_loss improved from
#: {self.best:.5f} to {current:.5f}`, `did not improve from {self.best:.5f}`, its best np.inf at
#: first): no value
_SENTINEL = re.compile(r"(?i)(?:^|[\s_/.-])(?:best|lowest|highest|from)(?:$|[\s_/.-])")
#: a line's first key (or a bar's name) that says it is an evaluation's (mmengine's
#: `Epoch(val)`, `Validation loss`, `Evaluating`): its metrics are `eval.metrics`, which no
#: training rule reads
EVALUATION = re.compile(r"(?i)^(?:eval\w*|val|valid\w*|test\w*)\b|\((?:val|test)\)")
#: a key of an evaluation's among a training step's (`val loss`, `test_reward`): an
#: `eval.metrics` value (xgboost's `valid-auc` after its `train-auc` too)
_EVAL_KEY = re.compile(r"(?i)^(?:val|valid|validation|eval|evaluation|test)(?:[ _/-]|$)")

#: the words of numpy's warning that a mean was taken of an empty array
#: (`metric_records.EMPTY_MEAN`)
EMPTY_MEAN_MARKER = "Mean of empty slice"
#: the pieces a line must hold for `read_line` to look at it (the scanner's markers): a step
#: key, a non-finite value, an epoch counter, a dict, a skipped step; a batch's counter
#: (Composer's `[batch=17/64]:` header, composer/loggers/console_logger.py; KotlinDL's
#: `Training batch 64 begins.`); numpy's warning of an empty mean (`metric_records.EMPTY_MEAN`)
#: (upper-case `INF` after a separator only: every `INFO` holds it)
MARKERS = ("step", "Step", "STEP", "iter", "Iter", "ITER", "Epoch", "epoch", "nan", "NaN", "NAN",
           "inf", "Inf", "=INF", ": INF", ":INF", " INF ", "': ", '": ', "verflow", "OVERFLOW",
           "Skipping step", "*** ", " not finite", "on-finite", "nvalid loss", "1.#", "batch",
           "Batch", EMPTY_MEAN_MARKER)  # fmt: skip
#: a title of metrics between runs of asterisks: transformers' `Trainer.log_metrics` prints
#: `***** {split} metrics *****`, then one `  {key: <w} = {value:>w}` line per metric
#: (transformers/trainer_pt_utils.py); its `***** Running training *****` is followed by
#: settings (`Num examples = 1000`, `Total optimization steps = 300`), no metrics
_BANNER = re.compile(r"(?i)^\s*\*{3,} +(?:\S+ ){0,3}metrics +\*{3,}\s*$")


def banner(text: str) -> bool:
    """Whether a line is a title of metrics framed by asterisks (`_BANNER`): the `key = value`
    lines under it are one record."""
    return "*** " in text and _BANNER.match(text) is not None


@dataclass
class Record:
    """One step's metrics as a line printed them."""

    metrics: dict[str, float]
    step: int | None  # None: the line names none (a dict)
    #: steps the line itself says were skipped (Megatron's count), None when it says nothing
    skipped: int | None = None
    pairs: list[Pair] = field(default_factory=list)
    #: the step is an epoch's number (`Epoch 4: loss=nan`), coarser than a step: a console
    #: that counts steps too puts the record at the step it is at (`MetricLines`)
    coarse: bool = False


def _step(found: list[Pair], text: str, coarse: bool = True) -> tuple[int | None, int | None]:
    """(the step a line names, the index of the pair that names it, if one does): a step key,
    the `[epoch][iter/total]` form, the count the line starts with, an epoch key (module
    docstring), first to last; `coarse=False` leaves out the count and the epoch (a line's
    step without its metrics: a hint for the record after it)."""
    best: tuple[int, int] | None = None  # (rank, index)
    for i, pair in enumerate(found):
        kind = step_key(pair.key)
        if kind is None and not pair.separated and pair.key.lower().endswith(" epoch"):
            kind = "epoch"  # an epoch named in words: `I Training of Epoch 0 - loss: inf`
        if kind is None or not pair.value.is_integer() or pair.value < 0:
            continue
        rank = STEP_RANK.index(kind)
        if best is None or rank < best[0]:
            best = (rank, i)
    if best is not None and STEP_RANK[best[0]] != "epoch":
        return int(found[best[1]].value), best[1]
    if "[" in text and (m := _EPOCH_ITER.search(text)) is not None:
        return int(m.group(1)), None
    if coarse and len(found) > 1 and (counted := _COUNTED.search(text)) is not None:
        # `0 completed epochs, 100 batches Average ...`: in a record only -- prose that
        # names a count (`Training for 10000 steps`) is no step the console is at, and a
        # later record naming a lower one would read as going back
        return int(counted.group(1) or counted.group(2)), None
    for i, pair in enumerate(found[1:], 1):
        # the step the values before it are at (`loss: nan at step 100`): a counter after
        # `at`, which elsewhere is prose about a step (`resumed at step 5`, `_NOT_STEP`)
        if pair.key.lower() in _AT_STEP_KEYS and pair.value.is_integer() and pair.value >= 0:
            return int(pair.value), i
    for i, pair in enumerate(found):
        # a position out of a total under any name (`Training  [ 40/5000000]`, `Batch 0/4000`):
        # the count the line is at, finer than an epoch
        if (
            pair.of is not None
            and pair.value.is_integer()
            and 0 <= pair.value <= pair.of
            and (best is None or i != best[1])
            and not EVALUATION.search(pair.key)
            and not _PEER.search(pair.key)
            and not pair.key.lower().endswith(STEP_ENDS)  # a counter of another kind's
        ):
            return int(pair.value), i
    if coarse and text[:1] in " >[0123456789" and (lead := _lead_count(found, text)) is not None:
        return lead, None
    if best is not None and coarse:
        return int(found[best[1]].value), best[1]
    return None, None


def _epoch(pair: Pair) -> bool:
    """Whether a step's pair counts epochs (`Epoch 4`, `Training of Epoch 0`)."""
    return step_key(pair.key) == "epoch" or (
        not pair.separated and pair.key.lower().endswith(" epoch")
    )


def _lead_count(found: list[Pair], text: str) -> int | None:
    """The count a line starts with, right before its pairs (`_BAR_COUNT`, `_LEAD_COUNT`)."""
    if (bar := _BAR_COUNT.match(text)) is not None:
        return int(bar.group(1))
    if not found:
        return None
    first = PAIR.search(text)
    if first is None or (m := _LEAD_COUNT.match(text[: first.start()])) is None:
        return None
    return int(m.group(1))


def header(text: str) -> tuple[str, int] | None:
    """(the kind, the step) of a header line: it names a step and nothing else (`_HEADER`), or
    its message -- after a logging record's level -- is counters and nothing else
    (`_counters_only`)."""
    if len(text) > 200:
        return None
    if (m := _HEADER.match(text)) is None:
        return _counters_only(text) if "=" in text or ":" in text else None
    kind = m.group(1).lower()
    return ("step" if kind == "steps" else kind), int(m.group(2))


#: where a logging record's message starts: after its level, and whatever the format put
#: before it (OLMo's `2024-08-06 09:59:26.181 host:0  olmo.train:908  INFO    [step=1/739328,
#: epoch=0]`, olmo/train.py's `log_metrics_to_console`)
_LEVEL = re.compile(r"\b(?:INFO|DEBUG)\b[\s:|\-\]]*")
#: a message that starts with a counter's word, after brackets at most
_COUNTER_FIRST = re.compile(r"(?i)[\s\[(<|#*=-]*(?:global[ _]?)?(?:step|iter|epoch|update|batch)")
#: what may stand between counters on a header: brackets, commas, bars, spaces
_BETWEEN = " \t[](){},;|-:"


def _counters_only(text: str) -> tuple[str, int] | None:
    """(the kind, the step) of a message that is counters and nothing else, in any syntax
    (`[step=1/739328,epoch=0]`, `step: 5, epoch: 1`): a step key's, the finest; None for any
    other text (a counter beside a metric, words besides, an epoch alone, a batch with no
    total: `batch: 64` is a configuration's size)."""
    levels = list(_LEVEL.finditer(text)) if "INFO" in text or "DEBUG" in text else []
    message = text[levels[-1].end() :] if levels else text
    if len(message) > 80 or not _COUNTER_FIRST.match(message):
        return None  # what every metric line is: longer, or a counter after words
    found = pairs(message)
    if not found or any(step_key(p.key) is None for p in found):
        return None
    if PAIR.sub("", message).strip(_BETWEEN):
        return None  # words besides the counters
    step, at = _step(found, message, coarse=False)
    if step is None or at is None:
        return None
    kind = step_key(found[at].key) or "step"
    if kind == "batch" and found[at].of is None:
        return None  # a batch out of a total is a position (`[batch=16/64]`); alone, a setting's
    return ("step" if kind == "global" else kind), step


def _message(text: str) -> bool:
    """Whether the line is an exception's (`RuntimeError: Rank 3, ..., iteration 1520:
    Unexpected result nan (...)`): its numbers are words of a message, no metrics."""
    if "Error" not in text and "Exception" not in text:
        return False
    return exception_at(text) is not None


#: a trainer's own report that it skipped a step (or its update) for a non-finite value, in
#: a sentence (`Loss in not finite. Skip this training step.`, `grad_norm is nan, skipping step
#: 5`, ESPnet's `The grad norm is nan. Skipping updating the model.`, its v1's `grad norm is nan.
#: Do not update model.`, its CTC's `1/2 samples got nan grad. These were ignored`): the value
#: it names was not applied, no metric of a step; a record's count (`number of skipped
#: iterations: 0`) is none. (A value put right in its place is a sentence's alone,
#: `metric_alone.says_not_finite`: a metric line's `lr set to 0.0001` is no such word)
_SKIP_WORD = (
    r"(?:skip(?:ping|ped|s)?|ignor(?:e|es|ed|ing)|discard(?:s|ed|ing)?"
    r"|(?:do|does|did|will) not (?:update|step|apply)|not (?:updating|applied|stepping))"
)
_NONFINITE_SKIP = re.compile(
    rf"(?i)\b(?:nan|inf|non-?finite|not finite)\b[^|=\n]{{0,60}}?\b{_SKIP_WORD}\b"
    rf"|\b{_SKIP_WORD}\b[^|=\n]{{0,60}}?\b(?:nan|inf|non-?finite|not finite)\b"
)


#: a piece of every `_SKIP_WORD` (a cheap test before the search)
_SKIP_GATE = ("kip", "gnor", "not ", "iscard")


def skip_report(text: str) -> bool:
    """Whether the line says a step was skipped for a non-finite value (`_NONFINITE_SKIP`)."""
    lower = text.lower()
    return any(w in lower for w in _SKIP_GATE) and (_NONFINITE_SKIP.search(text) is not None)


def read_line(text: str, step: int | None = None) -> Record | None:
    """The line as one step's metrics: it names its step (or `step` gives it: the bar the
    pairs follow) and one more pair; it prints a dict (two quoted keys or more); or it names
    no step and holds two pairs or more with a separator, one of them not finite (the order
    of lines numbers it). None for any other line. A printed list of numbers with a `nan` in
    it is that `nan` (`nan_lists`)."""
    if "]" in text and NAMED_LIST_GATE.search(text) is not None:
        text = named_lists(text)  # `[Total Loss, KL Loss] : [nan 2.3]`: the names' values
    if "[" in text and "=" in text and LABELLED_GROUP_GATE.search(text) is not None:
        text = labelled_groups(text)  # icefall's `loss[loss=1.2, ...], tot_loss[loss=inf, ...]`
    if "[" in text and "nan" in text.lower():
        text = nan_lists(text)
    if "grad_fn=<" in text and (computed := printed_tensor(text)) is not None:
        return Record({computed[0]: computed[1]}, step)  # `print(loss)`: the loss
    if " at " in text and (said := at_step(text)) is not None:
        key, at_n, value = said
        if math.isinf(value) and (_SENTINEL.search(key) or limit(key)):
            return None  # `Best loss at step 0: inf`: a best-so-far's start
        return Record({key: value}, at_n)  # `Minibatch loss at step 500: nan`
    if (invalid := invalid_stop(text)) is not None and not _message(text):
        # the batch the bar just showed: the bar's count on the line, else the console's
        return Record({invalid: math.nan}, _lead_count([], text) or step)
    if (stopped := stops_on(text)) is not None:
        key, value = stopped
        if math.isinf(value) and (_SENTINEL.search(key) or limit(key)):
            return None  # a best-so-far's start
        return Record({key: value}, step)  # `Loss is nan, stopping training`
    if (said_so := says_not_finite(text)) is not None and not (skip_report(text) or _message(text)):
        key, value = said_so
        if math.isinf(value) and (_SENTINEL.search(key) or limit(key)):
            return None
        return Record({key: value}, step)  # `WARN: grad_norm is not finite: nan`
    if "(" in text or "#" in text or "xx" in text or "__" in text or "**" in text or "~~" in text:
        text = msvc_nan(text)
    found = pairs(text)
    if not found and ":" in text and (listed := value_first(text)) is not None:
        named_first, found = listed  # darknet's `1234: -nan, -nan avg loss, 0.001 rate`
        return Record({p.key: p.value for p in found}, named_first, None, found)
    if not found or _message(text) or skip_report(text) or settings(text):
        return None
    named, at = _step(found, text)
    metrics: dict[str, float] = {}
    skipped: int | None = None
    for i, pair in enumerate(found):
        if i == at or (math.isinf(pair.value) and (_SENTINEL.search(pair.key) or limit(pair.key))):
            continue  # a best-so-far's start, a setting's `inf` (no limit): no measurement
        if "kipped" in pair.key and _SKIPPED.search(pair.key) and pair.value.is_integer():
            skipped = int(pair.value)
        metrics.setdefault(pair.key, pair.value)
    if not metrics:
        return None
    if EVALUATION.search(found[0].key):  # an evaluation's, not the training step's
        metrics = {f"eval/{k}": v for k, v in metrics.items()}
    elif any(_EVAL_KEY.match(k) for k in metrics):  # `train loss nan, val loss nan`
        metrics = {f"eval/{k}" if _EVAL_KEY.match(k) else k: v for k, v in metrics.items()}
    if named is not None or step is not None:
        coarse = named is not None and at is not None and _epoch(found[at])
        return Record(metrics, named if named is not None else step, skipped, found, coarse)
    if sum(p.quoted for p in found) >= 2:
        return Record(metrics, None, skipped, found)
    if (
        unnumbered(text, found, metrics)
        or lone(text, found, metrics)
        or dict_item(text, found, metrics)
    ):
        return Record(metrics, None, skipped, found)
    return None


#: a label that counts what the record after it is of, its word any (slime's `logger.info(
#: f"rollout {rollout_id}: {log_dict}")`, `perf {rollout_id}: ...`, `step {step}: ...`)
_LABEL_COUNT = re.compile(
    r"(?:^|[\s\]|>:-])(?P<w>[A-Za-z][\w/-]{0,40}) #?(?P<n>\d{1,18})\s*[:=-]?\s*$"
)


def label_count(text: str) -> int | None:
    """The count a record's label names (`rollout 3: ` before a dict), not a peer's (`rank 3:
    `) nor an epoch's (coarser: `read_step` and `MetricLines` weigh it); None if none."""
    m = _LABEL_COUNT.search(text[-80:])
    if m is None or _PEER.search(m.group("w")) or step_key(m.group("w")) == "epoch":
        return None
    return int(m.group("n"))


def read_step(text: str) -> int | None:
    """The step a line names (`Saving checkpoint at global_step=101`), with or without
    metrics; None if it names none."""
    return _step(pairs(text), text, coarse=False)[0]


def counter(text: str) -> int | None:
    """The count a line is at -- a step, an iteration, an epoch -- with or without metrics
    (`Train Epoch: 1516 [5%]`, `====> Epoch: 1515`): how far a process got, to tell whether it
    went on after a failure it may have survived. None if it names none."""
    found = pairs(text)
    if found and (n := _step(found, text)[0]) is not None:
        return n
    said = header(text.strip())
    return said[1] if said is not None else None

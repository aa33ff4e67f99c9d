"""The pairs of a metric line: its keys, separators and numbers, whatever printed it.

The words of `runwatch.emitters.metric_shape`'s grammar (its docstring says what a metric
line is): a key is a word or a few, quoted or bracketed; a separator `:`, `=`, `|`, a bracket
or spaces alone; a number in any notation, bare, quoted or wrapped (`tensor(nan)`); and which
keys name a step (`step_key`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

#: a word of a key: a letter of any script first (`loss`, `_loss`, `#queue-req`, `损失`: a
#: console in Chinese names its metrics in its own words), then letters, digits, `./#-@`
_WORD = r"(?:[^\W\d]|#(?=[^\W\d]| of ))[\w./#\-@]*(?:\([\w./ *]*\))?"
#: ... and not a number's name, where spaces alone end the key (`loss nan Grad Norm 3.0`
#: is two pairs; `number of nan iterations: 0` one)
_PLAIN_WORD = rf"(?!(?i:nan|inf|infinity)(?![\w./#\-])){_WORD}"
#: a key: up to six words (`number of skipped iterations`, `elapsed time per iteration (ms)`)
_KEY = rf"(?<![\w.#\-@]){_WORD}(?: (?:{_WORD}|\([\w./ *]+\))){{0,5}}"
_PLAIN_KEY = rf"(?<![\w.#\-@]){_PLAIN_WORD}(?: (?:{_PLAIN_WORD}|\([\w./ *]+\))){{0,5}}"
#: a number in any notation (`3`, `-0.5`, `2.999E-04`, `nan`, `-inf`, `Infinity`, YAML's `.nan`,
#: and a non-finite value a zero-padded format printed: Python's `'{:04.2f}'.format(nan)` and
#: `'%05.1f' % nan` pad `nan` and `inf` with zeros to the width, `0nan`, `00nan`, `-000inf`)
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:\.|0+)?(?i:nan|inf(?:inity)?)"
_PADDING = re.compile(r"^([-+]?)[.0]+(?=[A-Za-z])")
#: the second of two values joined by `/` (`Train/Val Loss: nan/nan`, `tr_loss_lr=nan/2e-6`):
#: not a count's total, so a fraction or not finite
_SECOND = r"(?:[-+]?\d*\.\d+(?:[eE][-+]?\d+)?|[-+]?\.?(?i:nan|inf(?:inity)?))"
#: TensorFlow's eager tensor up to its value (tensorflow/python/framework/ops.py
#: `_EagerTensorBase.__repr__`: `<tf.Tensor: shape=(), dtype=float32, numpy=nan>`, numpy 2's
#: scalar `numpy=np.float32(nan)`)
TF_TENSOR = r"<tf\.Tensor: shape=\([^()\n]*\), dtype=\w+, numpy="
#: a number, bare or quoted, with the total of an `N/M` count; or wrapped, `tensor(nan)`,
#: `np.float64(nan)`, `tensor(0.5, device='cuda:0')`, TensorFlow's (`TF_TENSOR`)
_VALUE = (
    rf"(?:(?:(?:np|numpy|torch)\.\w+|tensor)\(\s*(?P<w>{NUMBER})\s*(?:,[^()\n]{{0,80}})?\)"
    rf"|{TF_TENSOR}(?P<np>np\.\w+\()?(?P<t>{NUMBER})(?(np)\))>"
    rf"|['\"#]?(?P<v>{NUMBER})['\"]?(?:\s*/\s*(?P<of>\d{{1,18}})(?![\d.])|/{_SECOND})?)\s*\]?"
)
#: a pair, its value ending where a separator, a bracket, a sentence (`at iteration=27!`) or
#: the line does -- or at a percentage's `%` before one (`Accuracy: 10.0%, Avg loss: nan`; a
#: bar's `45%|` is no pair, nor a rate of nothing, `hit rate: nan%`: 0/0 is no measurement of a
#: run going wrong)
PAIR = re.compile(
    rf"(?:(?:'(?P<qk>[^'\n]{{1,100}})'|\"(?P<dk>[^\"\n]{{1,100}})\"|(?P<k>{_KEY}))"
    rf"(?P<sep>\s*[:=|]\s*\[?\s*|\s*\[\s*)|\[(?P<bk>{_KEY})\]\s*[:=]?\s*"
    rf"|(?P<pk>{_PLAIN_KEY})\s+)"
    rf"{_VALUE}(?=[\s,|;\]}})]|(?<=\d)%(?=[\s,;]|$)|/(?!\s*\d)|[:.!](?:\s|$)|$)"
)
_STEP_KEY = re.compile(
    r"^(?:global[ _]?|(?P<q>[a-z]+)[ _])?"
    r"(?:steps?|timesteps?|iterations?|iter|it|updates?|batch|episode|epoch)$",
    re.I,
)
#: words that make a counter's key a setting's or another phase's, not the step the line is
#: at (`max_steps`, `warmup_steps`, `eval_steps`, `time per iteration`); any other word before
#: a counter qualifies it (`Total iter`, `Learning iteration`, `train_step`, `num_updates`)
_NOT_STEP = frozenset({"max", "min", "warmup", "eval", "val", "valid", "test", "save", "log",
                       "logging", "skipped", "nan", "time", "remaining", "best", "patience",
                       "decay", "n", "micro",
                       # a preposition or an article: prose about a step, not its counter
                       "per", "of", "from", "at", "to", "in", "on", "after", "before", "until",
                       "since", "each", "every", "this", "that", "the", "a", "next", "last",
                       "first", "same"})  # fmt: skip
STEP_ENDS = ("step", "steps", "iteration", "iterations", "iter", "it", "update", "updates",
             "batch", "episode", "epoch")  # fmt: skip
#: a counter's word as the kind of step it counts (SB3's `time/iterations`, its
#: `time/total_timesteps` -- the step it logs at)
_KINDS = {"steps": "step", "timestep": "step", "timesteps": "step", "iterations": "iteration"}
_PARENS = re.compile(r"\s*\([^)]*\)")


@dataclass
class Pair:
    key: str
    value: float
    of: int | None = None  # the total of an `N/M` count
    quoted: bool = False
    separated: bool = False  # by `:`, `=`, `|`, brackets or quotes (not by spaces alone)


#: a logger's level before its message: no metric's name
_LEVEL_WORDS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"})
#: a source location, `[core.py:133]`, `socket.cpp:752`: a file's line, no metric
SOURCE_FILE = re.compile(r"\.(?:py|pyx|cc|cpp|cu|cuh|h|hpp|c|rs|go|js|ts|java)$")


def number(raw: str) -> float:
    """The value of a `NUMBER`: YAML's `.nan` and a zero-padded `0nan` are NaN."""
    if raw[-1:].isalpha():
        raw = _PADDING.sub(r"\1", raw)
    return float(raw)


def pairs(text: str) -> list[Pair]:
    """Every key/value pair of a line, in order."""
    out: list[Pair] = []
    for m in PAIR.finditer(text):
        qk, dk, bk, k, pk, sep, v, w, t, of = m.group(*_GROUPS)
        key = (qk or dk or bk or k or pk or "").strip()
        if not key or len(key) > 100 or ("." in key and SOURCE_FILE.search(key)):
            continue
        if " " in key and key.split(" ", 1)[0] in _LEVEL_WORDS:
            key = key.split(" ", 1)[1]  # `[time] INFO loss: nan`: the level is no word of it
        if key in _LEVEL_WORDS or (
            sep == ":"
            and text[m.start() - 1 : m.start()] == "("
            and text[m.end() : m.end() + 1] == ")"
        ):
            continue  # a logger's level (`WARNING: 1/2 samples`), its `(module:line)`
        if k and "=" in sep:
            key = key.split()[-1]  # `k=v` keys are one word: "saving global_step=101"
        elif pk:
            key, said = _sentence_key(key)
            if not key or key.lower().rsplit(" ", 1)[-1] in _FUNCTION_WORDS:
                continue  # `Epoch 1 of 100`: a total; `number of nan`: words, no value
        if (
            text[m.end() : m.end() + 1] == ":"
            and text[m.end() + 1 :].strip()
            and step_key(key) is None
        ):
            continue  # `iter 3010: loss nan` heads its pairs with the step; `Batch 3:` no pair
        try:
            value = number(v or w or t)
        except ValueError:
            continue
        out.append(
            Pair(key, value, int(of) if of else None, quoted=bool(qk or dk),
                 separated=not pk or said)  # a sentence's `is` separates as `:` does
        )  # fmt: skip
    return out


_GROUPS = ("qk", "dk", "bk", "k", "pk", "sep", "v", "w", "t", "of")
#: a key that spaces alone separate from its value names nothing when it ends in a function
#: word: `of` before a number is a total's (`Epoch 1 of 100`), and before `nan` the word NaN
#: in prose -- Megatron's `number of nan iterations: 0` cut by a terminal's wrap after `nan`,
#: `count of nan values` -- no value; `to` is kept (`lr reduced to nan`: the value the
#: sentence gives)
_FUNCTION_WORDS = frozenset({"of", "for", "per", "with", "by", "the", "a", "an", "any", "no"})
_VERBS = frozenset({"is", "was", "are", "were"})


def _sentence_key(key: str) -> tuple[str, bool]:
    """(a key that spaces alone separate from its value, whether a verb said it): as a
    sentence says it (BigDL's `... records/second. Loss is Infinity.`, Lightning's `Previous
    best value was 0.512.`), the words after the last sentence's end, less a trailing `is`."""
    words = key.split()
    for i in range(len(words) - 1, -1, -1):
        if words[i].endswith(".") and i < len(words) - 1:
            words = words[i + 1 :]
            break
    said = False
    while words and words[-1].lower() in _VERBS:
        words.pop()
        said = True
    return " ".join(words), said


#: the same counters named in Chinese, as training scripts print them (`轮次: 3, 批次: 100,
#: 损失: nan`, `周期 [1/10], 步骤 [100/600], 损失: nan`, `迭代 50/200, 损失: nan`)
_CHINESE_KINDS = {"步": "step", "步数": "step", "步骤": "step", "全局步数": "global",
                  "迭代": "iteration", "迭代次数": "iteration", "批次": "batch",
                  "回合": "episode", "轮": "epoch", "轮次": "epoch", "周期": "epoch"}  # fmt: skip


def step_key(key: str) -> str | None:
    """The kind of step a key names (`global`, `step`, `iteration`, `iter`, `it`, `updates`,
    `epoch`), or None."""
    name = _PARENS.sub("", key).strip() if "(" in key else key
    if (chinese := _CHINESE_KINDS.get(name.strip())) is not None:
        return chinese
    if "/" in name:
        # ms-swift's "global_step/max_steps": "300/1296"; else a namespace's counter
        # (`train/global_step`, SB3's `time/iterations`) -- not a bare `step` after one
        # (`timing_s/step` is a time)
        first, last = name.split("/", 1)[0], name.rsplit("/", 1)[1]
        name = first if first.lower().endswith(STEP_ENDS) else last
        if name.lower() in ("step", "steps", "it", "iter") and name is last:
            return None
    low = name.lower()
    if not low.endswith(STEP_ENDS) or (m := _STEP_KEY.match(name)) is None:
        return None
    if m.group("q") is not None and m.group("q").lower() in _NOT_STEP:
        return None
    if low.startswith("global"):
        return "global"
    kind = low.split()[-1].split("_")[-1]
    return _KINDS.get(kind, kind)


#: a numeric array's repr inside a printed list: numpy's `array([...], dtype=float32)`
_ARRAY = re.compile(r"(?:(?:np|numpy)\.)?array\(|,\s*dtype=\w+\)|\)")
_LIST_ITEM = re.compile(rf"\s*(?:{NUMBER})\s*")
_NAN = re.compile(r"(?<![\w.])[-+]?(?i:nan)(?![\w.])")


#: a printed list of names, then `:` or `=` and a printed list (or numpy array) of as many
#: numbers: `[Total Loss, KL Loss] : [  nan   nan]` (ClariNet#7), `['g', 'd']=[0.1, nan]`
_NAMED_LIST = re.compile(
    r"\[(?P<names>\s*'?[A-Za-z][\w ./-]{0,40}'?\s*(?:,\s*'?[A-Za-z][\w ./-]{0,40}'?\s*)+)\]"
    rf"\s?[:=]\s?\[(?P<values>\s*(?:{NUMBER})(?:(?:\s*,\s*|\s+)(?:{NUMBER}))+\s*)\]"
)
_VALUE_SPLIT = re.compile(r"\s*,\s*|\s+")
#: what a line must hold for `named_lists` to look at it: a list closed, `:` or `=`, one opened
NAMED_LIST_GATE = re.compile(r"\] ?[:=] ?\[")


def named_lists(text: str) -> str:
    """The line with each printed list of names followed by a list of as many numbers (a
    program printing its loss names beside the array of their values) written as the pairs
    they are (`Total Loss: nan, KL Loss: nan`); any other list is left as it is."""

    def pairs_of(m: re.Match[str]) -> str:
        names = [n.strip().strip("'").strip() for n in m.group("names").split(",")]
        values = _VALUE_SPLIT.split(m.group("values").strip())
        if len(names) != len(values) or not all(names):
            return m.group(0)
        return ", ".join(f"{n}: {v}" for n, v in zip(names, values, strict=True))

    return _NAMED_LIST.sub(pairs_of, text)


#: a group of pairs its label names, `label[k=v, k2=v2, ...]`: icefall's (k2-fsa) MetricsTracker
#: as its training loops print it, the batch's and the running totals' side by side, naming the
#: same keys -- `loss[loss=1.196, simple_loss=1.08, ..., over 11669.00 frames. ], tot_loss[
#: loss=inf, ...]` (icefall egs/*/ASR/*/train.py, `f"loss[{loss_info}], tot_loss[{tot_loss}]"`)
_LABELLED_GROUP = re.compile(r"(?<!\w)(?P<label>[A-Za-z_]\w{0,40})\[(?P<body>[^\[\]\n]{0,2000})\]")
_GROUP_KEY = re.compile(r"(?<![\w./-])(?P<key>[A-Za-z_][\w./-]{0,60})(?==)")
#: what a line must hold for `labelled_groups` to look at it
LABELLED_GROUP_GATE = re.compile(r"\w\[[A-Za-z_][\w./-]*=")


def labelled_groups(text: str) -> str:
    """The line with its labelled groups of `key=value` pairs written with each group's label
    before the keys two groups share (`loss[loss=1.2], tot_loss[loss=inf]` -> `loss[loss/loss=
    1.2], tot_loss[tot_loss/loss=inf]`): the label says which is which. A line with one group,
    or groups naming different keys (`lr[min=0, max=inf]`: a setting's bounds), a step's key
    (`train[step=100, ...]`) and a bracket with no pair in it (`iter[ 14/ 15]`) are left as
    they are."""
    groups = [
        (m, {k.group("key") for k in _GROUP_KEY.finditer(m.group("body"))})
        for m in _LABELLED_GROUP.finditer(text)
    ]
    if len(groups) < 2:
        return text
    named = Counter(k for _, keys in groups for k in keys)
    shared = {k for k, n in named.items() if n > 1 and step_key(k) is None}
    if not shared:
        return text
    out, at = [], 0
    for m, _ in groups:
        label = m.group("label")
        body = _GROUP_KEY.sub(
            lambda k, label=label: (
                f"{label}/{k.group('key')}" if k.group("key") in shared else k.group(0)
            ),
            m.group("body"),
        )
        out.append(text[at : m.start("body")] + body)
        at = m.end("body")
    return "".join(out) + text[at:]


def nan_lists(text: str) -> str:
    """The line with each printed list of numbers that holds a `nan` -- a list, nested lists,
    numpy arrays' reprs (`Losses: [array([0.5, 0.4]), array([nan, nan], dtype=float32)]`,
    `Pseudo dice [nan, 0.0, 0.0]`) -- written as that one `nan`: the value of its key is not
    finite. A list with any word in it (a configuration, a dataset's preview), or none that
    is `nan` (infinities are masks' fill as often as a metric's), is left as it is."""
    out, at = [], 0
    while (start := text.find("[", at)) >= 0:
        end, depth = start, 0
        for end in range(start, min(len(text), start + 4000)):
            depth += {"[": 1, "]": -1}.get(text[end], 0)
            if depth == 0:
                break
        if depth != 0:
            break  # a list the line does not close (cut, or printed over lines): left as it is
        body = text[start : end + 1]
        if not _NAN.search(body):
            out.append(text[at : end + 1])  # nor any list inside it
        elif all(
            _LIST_ITEM.fullmatch(x)
            for x in _ARRAY.sub(",", body.replace("[", ",").replace("]", ",")).split(",")
            if x.strip()
        ):
            out.append(text[at:start] + "nan")
        else:
            out.append(text[at : start + 1])  # words in it: a list inside it may be numbers
            at = start + 1
            continue
        at = end + 1
    return "".join(out) + text[at:]


#: MSVC's C runtime writes NaN as `nan(ind)`, `-nan(ind)`, `nan(snan)` (C++ trainers on
#: Windows: darknet's `-nan(ind) avg loss`): the `nan` it is
_MSVC_NAN = re.compile(r"(?i)(?<![\w.])([-+]?nan)\((?:ind|snan|qnan)\)")
#: ... and, before Visual Studio 2015, `1.#QNAN0`, `-1.#IND00`, `1.#INF00`
_MSVC_OLD = re.compile(r"(?<![\w.])([-+]?)1\.#(?:(QNAN|SNAN|IND)|INF)\d*")
#: a count the line starts with and a colon (darknet's detector: `printf("\n %d: %f, %f avg
#: loss, %f rate, %lf seconds, %d images, %f hours left\n", ...)`, AlexeyAB/darknet
#: src/detector.c; pjreddie's `%ld: %f, %f avg, %f rate, ...`)
_COUNT_LEAD = re.compile(r"^\s*(\d{1,18}):\s+")
#: one item of a list of values written before their names (`-nan avg loss`, `0.001 rate`)
_VALUE_FIRST = re.compile(
    rf"^\s*(?P<v>{NUMBER})\s+(?P<k>[A-Za-z][A-Za-z_]*(?: [A-Za-z_]+){{0,3}})\s*$"
)


#: a NaN or an infinity padded to its format's width with a fill character: PaddleOCR's and
#: PaddleDetection's `'{}: {:x<6f}'.format(k, v)` (ppocr/utils/stats.py) writes `nanxxx`,
#: `infxxx`, `-infxx` where a number is `0.000516`
_PADDED = re.compile(r"(?i)(?<![\w.])([-+]?(?:nan|inf))([x_*#~])\2*(?=[\s,;|\]})]|$)")


def msvc_nan(text: str) -> str:
    """The line with other spellings of NaN and infinity -- MSVC's (`-nan(ind)`, `-1.#IND00`,
    `1.#INF00`), padded ones (`nanxxx`) -- as `nan` and `inf` (`_MSVC_NAN`, `_MSVC_OLD`,
    `_PADDED`)."""
    if "xx" in text or "__" in text or "**" in text or "##" in text or "~~" in text:
        text = _PADDED.sub(r"\1", text)
    if "(" in text:
        text = _MSVC_NAN.sub(r"\1", text)
    if "#" in text:
        text = _MSVC_OLD.sub(lambda m: "nan" if m.group(2) else f"{m.group(1)}inf", text)
    return text


def value_first(text: str) -> tuple[int, list[Pair]] | None:
    """(the count the line starts with, its pairs) of a line of comma-separated values each
    written before its name, after a count and a colon (darknet's `1234: -nan, -nan avg loss,
    0.001000 rate, 3.2 seconds, 78976 images`): two named values or more; an unnamed one
    (darknet's loss itself) is none. None for any other line."""
    if (lead := _COUNT_LEAD.match(text)) is None:
        return None
    out: list[Pair] = []
    for item in text[lead.end() :].split(","):
        if (m := _VALUE_FIRST.match(item)) is not None:
            raw = m.group("v")
            out.append(Pair(m.group("k"), number(raw)))
    return (int(lead.group(1)), out) if len(out) >= 2 else None

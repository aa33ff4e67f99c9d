"""A metrics dict as a trainer prints it, read back: transformers' `Trainer.log` (`str(dict)`,
floats or, in transformers 5, strings; NaN as `nan`, an unscorable reward as `None`), ms-swift's
JSON with `"global_step/max_steps": "300/1296"`, numbers wrapped (`tensor(nan)`,
`np.float64(0.5)`). `MetricLines` (emitters/metric_lines.py) finds them on a console's lines;
this module reads one."""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from runwatch.emitters.metric_pairs import TF_TENSOR
from runwatch.emitters.metric_settings import no_limit
from runwatch.emitters.metric_shape import STEP_RANK, step_key
from runwatch.emitters.trainer import SUMMARY_KEYS, metric_value

#: a dict printed whole on a line, and where one opens that goes on over the next lines
DICT = re.compile(r"\{['\"][^{}]*\}")
DICT_OPEN = re.compile(r"\{\s*['\"]")
_STEP_OF = re.compile(r"^(\d{1,18})(?:/\d+)?$")
#: an object's repr inside a value, which no literal parses (torch's `tensor(nan, device=
#: 'cuda:1', grad_fn=<NllLossBackward>)`, `<function f at 0x7f...>`): read as None
_OBJECT_REPR = re.compile(r"<[A-Za-z_][^<>'\"\n]{0,200}>")
#: TensorFlow's eager tensor (`metric_pairs.TF_TENSOR`): read as the value it holds
_TF_TENSOR = re.compile(rf"{TF_TENSOR}([^<>\n]{{1,80}}?)>")


def _namespaced_step(key: str, raw: Any) -> bool:
    """Whether a key names the step under a namespace (ROLL's `system/step`, slime's
    `train/step`) and its value is a count: a whole number as printed (`timing_s/step: 45.2`
    is a time)."""
    return (
        "/" in key
        and isinstance(raw, int)
        and not isinstance(raw, bool)
        and step_key(key.rsplit("/", 1)[1]) is not None
    )


#: the keys of a cluster's resource quantities: a dict of them all finite is no metrics dict --
#: Ray's resources by their own names (`{'CPU': 1.0, 'GPU': 1.0}`, `{'bob': 1.0, 'CPU': 1.0}`:
#: a request its autoscaler cannot schedule, a placement group's bundle, a replica's needs)
_RESOURCES = frozenset({"CPU", "GPU", "object_store_memory", "TPU", "NPU", "HPU"})
#: a number a trainer formatted with thousands separators before printing it as a string
#: (`f"{n:,}"`, `'tok/stp': '1,024.0'`, `'cum_tokens': '3,072'`)
_GROUPED = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def _count(key: str, raw: Any) -> int | None:
    """The count a step key's value holds: a whole number, as printed or as a string
    (fairseq's JSON progress writes every value as one, `"num_updates": "3"`), or the first of
    `N/M` (ms-swift's `"global_step/max_steps": "300/1296"`)."""
    if isinstance(raw, str):
        found = _STEP_OF.match(raw.strip())
        return int(found.group(1)) if found is not None else None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    return None


def _step_of(data: dict[str, Any]) -> tuple[str | None, int | None]:
    """(the key, the step) of the dict's finest step key (`STEP_RANK`: fairseq's
    `num_updates` before its `epoch`), a namespaced one (`train/step`) after the others."""
    best: tuple[int, str, int] | None = None
    for key, raw in data.items():
        kind = step_key(key)
        if kind is None and not _namespaced_step(key, raw):
            continue
        if (n := _count(key, raw)) is None or (kind == "epoch" and isinstance(raw, str)):
            continue  # transformers 5 writes the epoch's fraction as a string: '1' at its end
        rank = STEP_RANK.index(kind) if kind in STEP_RANK else len(STEP_RANK)
        if best is None or rank < best[0]:
            best = (rank, key, n)
    return (best[1], best[2]) if best is not None else (None, None)


def value_of(raw: Any) -> float | bool | None:
    """A printed value as a metric: what `metric_value` takes, and numbers printed as strings
    (transformers 5; `'nan'`, and with thousands separators); False for anything else."""
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            if "," in raw and _GROUPED.match(raw.strip()):
                return float(raw.replace(",", ""))
            return False
    return metric_value(raw)


def _node(node: ast.expr) -> Any:
    """A printed value: a literal, `nan` / `inf` (bare names in a repr), and the number a
    wrapper holds (`tensor(nan, device='cuda:0')`, `np.float64(0.5)`); None for anything
    else."""
    if isinstance(node, ast.Name) and node.id in ("nan", "inf"):
        return float(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _node(node.operand)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
        return None
    if isinstance(node, ast.Call) and node.args:
        return _node(node.args[0])
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


#: one `'key': value` item of a printed dict, its value a quoted string or a bare token up to
#: the next item (`_items`)
_ITEM = re.compile(
    r"""(?:^\{|, )(?P<q>['"])(?P<k>[^'"\n]{1,120})(?P=q): (?P<v>'[^'\n]*'|"[^"\n]*"|[^,'"{}]+)"""
    r"(?=, ['\"]|\}$)"
)


def _items(text: str) -> dict[str, Any] | None:
    """The whole items of a dict a terminal overwrote in places (the DPO trainer's `train stats`
    of corpus21/dev: `'l  's0ogps_train/rejected': 'nan'`, a stray quote no literal parses):
    each `'key': value` that still stands between its neighbours' separators, a key with a
    terminal's run of spaces in it none; None when fewer than two stand."""
    out: dict[str, Any] = {}
    for m in _ITEM.finditer(text):
        key = m.group("k")
        if "  " in key:
            continue
        try:
            out[key] = _node(ast.parse(m.group("v").strip(), mode="eval").body)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
    return out if len(out) >= 2 else None


def _literal(text: str) -> Any:
    """The dict a line prints: Python's repr (nan and inf as bare names) or JSON."""
    if text.startswith('{"'):
        try:
            data = json.loads(text)
        except ValueError:
            pass  # a dict of Python's with double quotes
        else:
            # JSON's null is a field the record does not have (LLaMA-Factory's
            # trainer_log.jsonl writes `"reward": null` in every record of a run without
            # one); Python's None, printed by `Trainer.log`, is a value that was logged
            return (
                {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data
            )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        if "<tf.Tensor: " in text and (held := _TF_TENSOR.sub(r"\1", text)) != text:
            return _literal(held)
        if "<" not in text or (bare := _OBJECT_REPR.sub("None", text)) == text:
            return _items(text)
        return _literal(bare)
    if not isinstance(tree.body, ast.Dict):
        return None
    out: dict[Any, Any] = {}
    for key, value in zip(tree.body.keys, tree.body.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return None
        out[key.value] = _node(value)
    return out


def cut_dict(text: str) -> str | None:
    """The items a dict holds whole when its text was cut before its `}` (a paste or a log cut
    mid-record: `{'loss': nan, 'learning_rate': 2.9e-07, 'epoc`): the dict up to its last
    comma between items, closed; None when not one item is whole."""
    depth, quote, end = 0, "", -1
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == "," and depth == 1:
            end = i
    return text[:end] + "}" if end > 0 and text.startswith("{") else None


def metrics_dict(text: str) -> tuple[dict[str, float | None], int | None] | None:
    """(a training step's metrics, its step when the dict names it) from a printed dict: two
    numbers or more, or one that is not finite and no limit's (`step 12: {'loss': nan}`), not
    the end-of-training summary; None for anything else."""
    if len(text) > 20_000:
        return None
    data = _literal(text)
    if not isinstance(data, dict) or SUMMARY_KEYS & data.keys():
        return None
    step_at, step = _step_of(data)
    metrics: dict[str, float | None] = {}
    for key, raw in data.items():
        if key == step_at:
            continue
        value = value_of(raw) if not isinstance(raw, bool) else False
        if value is not False:
            assert not isinstance(value, bool)
            if value is not None and no_limit(key, value):
                continue  # a limit's `inf` (`'max_norm': inf`): none, a setting
            metrics[key] = value
    # a metrics dict is numbers (transformers 5 prints them as strings, an unscored reward
    # as None; ms-swift adds a few times as words); a configuration printed as a dict has
    # words, flags and tables among its numbers -- a third of it or more
    numbers = sum(1 for v in metrics.values() if v is not None) + (step is not None)
    lone = numbers == 1 and any(
        v is not None and not math.isfinite(v) and not no_limit(k, v) for k, v in metrics.items()
    )
    if not metrics or (numbers < 2 and not lone):
        return None
    if _RESOURCES & data.keys() and all(v is None or math.isfinite(v) for v in metrics.values()):
        return None  # quantities of a cluster's resources (a metrics dict may count its GPUs)
    if (len(metrics) + (step is not None)) * 3 <= len(data) * 2:
        return None
    return metrics, step

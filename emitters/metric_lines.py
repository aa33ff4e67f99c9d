"""A trainer's metrics as a console prints them: any record of numbers with a step.

- transformers' `Trainer.log` (so TRL's GRPOTrainer, PPOTrainer, ...) prints one `str(dict)`
  per logging step: `{'loss': 0.0, 'grad_norm': 0.0866, ..., 'reward': 1.71, 'epoch': 0.31}`
  (transformers 4.x: floats), `{'loss': '0', 'reward': '0', 'entropy': '5.593', ...}`
  (transformers 5 with TRL 1.16: every float a string with 4 significant digits), NaN as
  `nan` / `'nan'`, an unscorable reward as `None`, and a last summary dict
  (`train_runtime`, `train_samples_per_second`, ...) that is no step. The dict carries no
  step: it is the step the bar refreshed just before it names (`StepNumbers`). A dict
  pretty-printed over several lines is read whole.
- ms-swift prints the same as JSON, with `"global_step/max_steps": "300/1296"`.
- OpenRLHF's actor puts its status in the postfix of its `Train epoch [e/E]` bar
  (openrlhf/trainer/ray/ppo_actor.py): `act_loss=, reward=, return=, gen_len=, tot_len=,
  kl=, act_lr=, grad_norm=, ent_loss=` (0.8 on; `pg=, rm=, ret=, glen=, tlen=, kl=, act_lr=`
  and `cri=, vals=` before), each formatted by tqdm as `{:.3g}`. They are OpenRLHF's own
  `train/...` metrics; the bar ends one training step (the last epoch's bar), so its last
  postfix is the step's metrics -- sooner if a value is not finite.
- Any other bar's postfix is the metrics of the step its count names.
- Any other line of key/value pairs with a step (`runwatch.emitters.metric_shape`: Megatron's
  `iteration N/M | lm loss: ... |`, mmengine's `Epoch(train) [1][240/735] ... grad_norm: nan`,
  `epoch: 0|step: N|act_loss: inf`, `[step] 104`, a Keras bar's `4/234 [===>...] - loss: inf`,
  ...), or without one but with a value that is not finite; a table's header and its rows
  of numbers (`Step | Training Loss | reward | kl`, then `1 | -0.28 | 13.4 | nan`); a
  two-column table's rows (rlpyt's `| loss/Average   nan`), one record; a header naming a
  step (`Iteration 3027`, `Learning iteration 8391/10000`) and the `key: value` lines or
  two-column rows under it (baselines' `| KL | nan |`, RSL-RL's right-aligned `Value function
  loss: inf`), one record of that step -- up to the next header, or a few lines that are
  none of its. A printed list of numbers with a `nan` in it (numpy's `Losses: [array([0.5]),
  array([nan], dtype=float32)]`) is its key's `nan` (`metric_pairs.nan_lists`).

A record starts only on a line holding one of `metric_shape.MARKERS` -- what `runwatch
watch`'s scanner shows the parsers -- so `runwatch diagnose`, which reads every line, reads
the same records; a record spread over lines is followed line by line."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from runwatch.emitters.metric_settings import labelled, no_limit, settings, undefined
from runwatch.emitters.metric_shape import (
    EVALUATION,
    MARKERS,
    Pair,
    banner,
    header,
    label_count,
    pairs,
    read_line,
    read_step,
    single_pair,
    step_key,
    step_row,
    table_step,
)
from runwatch.emitters.metric_tables import (
    column_header,
    column_row,
    is_rule,
    table_header,
    table_row,
)
from runwatch.emitters.printed_dicts import DICT, DICT_OPEN, cut_dict, metrics_dict
from runwatch.emitters.step_numbers import OVERFLOW_STEPS, StepNumbers, loss_scale_overflow
from runwatch.emitters.trainer import step_events

Found = tuple[str, dict[str, Any]]

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


#: box drawing (rich's and tabulate's tables) as ASCII tables draw it: verticals (`│`, `┃`,
#: `║`) are `|`, corners and junctions `+` (horizontals stay: Keras 3 draws its bar with `━`;
#: `metric_tables.is_rule` reads them); full-width forms
#: (`step：12，loss：nan`, typed with a CJK input method) their ASCII letters
_PLAIN = str.maketrans(
    {
        **dict.fromkeys("│┃║╎╏┆┇┊┋", "|"),
        **dict.fromkeys("┌┐└┘├┤┬┴┼┏┓┗┛┣┫┳┻╋┡┩╇╈┢┪╀╁╂╃╄╅╆╉╊┍┑┕┙┝┥┯┷┿", "+"),
        **dict.fromkeys("╒╕╘╛╞╡╤╧╪╓╖╙╜╟╢╥╨╫╔╗╚╝╠╣╦╩╬", "+"),
        **{chr(0xFF01 + i): chr(0x21 + i) for i in range(94)},
    }
)


#: a two-column table's row that titles the rows under it, its value cell empty:
#: stable-baselines3's `| rollout/                |             |`
#: (stable_baselines3/common/logger.py, HumanOutputFormat.write)
_SECTION = re.compile(r"^\s*\|\s*[A-Za-z][\w./ -]{0,60}?\s*\|\s*\|\s*$")


def plain(line: str) -> str:
    """The line with table verticals and full-width forms as ASCII (`_PLAIN`)."""
    return line if line.isascii() else line.translate(_PLAIN)


def _alone(row: Pair) -> bool:
    """Whether one row under a header is a record: a value that is not finite, not a limit's
    setting (`Epoch : 8` then `LOSS : nan`, not `Epoch 1/10` then `max_grad_norm: inf`)."""
    return not math.isfinite(row.value) and not no_limit(row.key, row.value)


def openrlhf_postfix(postfix: str) -> dict[str, float]:
    """OpenRLHF's postfix items under its own metric names."""
    out: dict[str, float] = {}
    for key, raw in _POSTFIX_ITEM.findall(postfix):
        name = OPENRLHF_KEYS.get(key)
        if name is not None:
            out[name] = float(raw)
    return out


class _Open:
    """A record spread over lines, being read: a pretty-printed dict (its text so far), a
    table (its header), a two-column table (its pairs so far), or the lines under a header
    (its step, and its pairs so far)."""

    __slots__ = ("block", "columns", "header", "lines", "misses", "pairs", "settings", "step",
                 "text")  # fmt: skip

    def __init__(self, text: str = "", header: list[str] | None = None,
                 pair: Pair | None = None, step: int | None = None,
                 columns: list[tuple[str, int, int]] | None = None,
                 block: bool = False, settings: bool = False) -> None:  # fmt: skip
        self.text = text
        self.settings = settings  # a dict of settings (`config: {`): read through, no record
        self.header = header
        self.columns = columns  # an aligned table's header: (name, start, end) per column
        self.pairs = [pair] if pair is not None else []
        self.step = step
        self.block = block or step is not None  # under a header (a banner names no step)
        self.lines = 1
        self.misses = 0  # lines in a row that were none of a header's


class MetricLines:
    """Every metric record of a console, per source (module docstring): numbered, with
    overflow skips weighed, by `StepNumbers`."""

    #: a record spread over more lines than this is given up
    MAX_LINES = 200
    #: lines in a row that are none of a header's (its words, a wrapped line) that end it
    MAX_MISSES = 3

    def __init__(self, reward_keys: Sequence[str], overflow_steps: int = OVERFLOW_STEPS) -> None:
        self.reward_keys = tuple(reward_keys)
        self.steps = StepNumbers(overflow_steps)
        self._bars: dict[Any, int] = {}  # source -> training steps OpenRLHF's bar ended
        self._postfixes: dict[tuple[Any, str], int] = {}  # (source, bar) -> count last read
        self._counts: dict[tuple[Any, str], int] = {}  # (source, bar) -> highest count shown
        self._open: dict[Any, _Open] = {}  # source -> a record spread over lines
        #: why lines that looked like metrics gave none, since the owner last took them
        self.notes: list[str] = []

    @property
    def following(self) -> bool:
        """A record spread over lines is being read: the next lines matter."""
        return bool(self._open)

    def more(self, source: Any, line: str) -> tuple[bool, list[Found]]:
        """(whether the line goes on a record of its source spread over lines, what it
        gives): read before any other reader, so a line that does not go on it ends it."""
        held = self._open.get(source)
        return (False, []) if held is None else self._more(source, held, plain(line))

    def read(self, source: Any, line: str) -> list[Found]:
        """What a line no trainer-specific reader took says: a dict, a line of pairs with a
        step, a table's header, a two-column table's first row, a skipped step."""
        out: list[Found] = []
        line = plain(line)
        if not any(m in line for m in MARKERS):
            return out  # what the scanner would not show (`runwatch watch` reads the same)
        if (skip := loss_scale_overflow(line)) is not None:
            return out + self._emit_all(self.steps.overflow(source, skip))
        if "{" in line and (m := DICT_OPEN.search(line)) is not None:
            whole = DICT.search(line, m.start())
            if labelled(line[: m.start()]):  # `config: {...}`: settings, read to its end
                if whole is None:
                    out += self._hold(source, _Open(text=line[m.start() :], settings=True))
                return out
            if whole is None:  # a dict pretty-printed over lines
                out += self._hold(source, _Open(text=line[m.start() :]))
                return out
            got = metrics_dict(whole.group(0))  # a dict that is no step (a summary) is none
            if got is None:
                return out
            # a dict that names no step takes the one the line names before it (`step 40: {...}`),
            # or the dict it is printed in (ROLL's `metrics_tag: {"step": 4, "metrics": {...}}`)
            if (step := got[1]) is None:
                before = line[: whole.start()]
                step = read_step(before)
                if step is None and before.strip() and "{" not in before:
                    # a label's count (`rollout 3: {...}`), where it does not go back: slime
                    # counts rollouts and train steps apart, and the state drops a record
                    # whose step went back
                    count = label_count(before)
                    step = count if count is not None and count >= self.steps.last(source) else None
            return out + self._record(source, step, got[0])
        # a header first: a logging record's prefix may hold pairs of its own (`host:0`)
        head = header(line)
        if head is None and (record := read_line(line)) is not None:
            step = record.step
            if record.coarse and step is not None:
                step = self.steps.coarse(source, step)
            return out + self._record(source, step, dict(record.metrics), record.skipped)
        if (cells := table_header(line)) is not None and any(step_key(c) for c in cells):
            out += self._hold(source, _Open(header=cells))
        elif (columns := column_header(line)) is not None:
            out += self._hold(source, _Open(columns=columns))
        elif banner(line):  # `***** eval metrics *****`: the step the console named last
            out += self._hold(source, _Open(block=True))
        elif (head := head or table_step(line)) is not None:
            # a header, or a two-column table's first row naming its step (Spinning Up's
            # `| Epoch | 3 |` above its metrics): the lines under it are that step's
            kind, step = head
            if kind != "epoch":  # a step line: a dict printed after it is that step's
                self.steps.named(source, step)
            # an epoch's header numbers its lines coarsely: the step the console is at
            # where it counts finer (a record at an epoch's lower number would read as going
            # back, and be dropped)
            out += self._hold(
                source, _Open(step=self.steps.coarse(source, step) if kind == "epoch" else step)
            )
        elif (pair := single_pair(line)) is not None:
            out += self._hold(source, _Open(pair=pair))
        elif (named := read_step(line)) is not None:
            self.steps.named(source, named)
        else:
            self._why_not(line)
        return out

    def _why_not(self, line: str) -> None:
        """Say why a line with a value that is not finite gave no metrics (`notes`)."""
        found = pairs(line)
        bad = next((p for p in found if not math.isfinite(p.value)), None)
        if bad is None:
            return
        if settings(line):
            why = "the line prints settings (a configuration's repr or a labelled dict)"
        elif len(found) < 2:
            why = "it is the line's only number: a step's metrics are two pairs or more"
        else:
            why = (
                "the line names no step (a key like step, global_step, iteration, iter, it, "
                "`[epoch][iter/total]`, a count it starts with), prints no dict, and has no "
                "two pairs with a separator (`:`, `=`, `|`)"
            )
        self.notes.append(f"`{bad.key}` is {bad.value} but {why}")

    def _more(self, source: Any, held: _Open, line: str) -> tuple[bool, list[Found]]:
        """(whether the line goes on the record being read, what it gives): a dict's next
        line, a table's row, a two-column table's row -- or what the record gives once a
        line that does not go on it ends it."""
        held.lines += 1
        if held.lines > self.MAX_LINES:  # given up: what it holds whole is still a record
            del self._open[source]
            if held.text:
                return False, self._cut(source, held.text) if not held.settings else []
            return False, self._block(source, held.pairs, held.step) if held.pairs else []
        if held.columns is not None:
            return self._column_row(source, held.columns, line)
        if held.header is not None:
            if is_rule(line):  # under the header, or between rows (a grid's)
                return True, []
            row = table_row(held.header, line)
            if row is not None:
                return True, self._record(source, row.step, dict(row.metrics))
            del self._open[source]
            return False, []
        if held.block:
            return self._under_header(source, held, line)
        if held.pairs:
            pair = single_pair(line)
            if pair is not None:
                held.pairs.append(pair)
                return True, []
            if (step := step_row(line)) is not None:
                if held.step is None:
                    held.step = step  # the table's step, among its rows (the first it names)
                return True, []
            if "|" in line and _SECTION.match(line):
                return True, []  # a section's title among the rows (SB3's `| train/ |  |`)
            del self._open[source]
            return False, self._block(source, held.pairs, held.step)
        held.text += "\n" + line
        if held.text.count("}") < held.text.count("{"):
            return True, []
        del self._open[source]
        if held.settings:
            return True, []
        got = metrics_dict(held.text[: held.text.rfind("}") + 1])
        return True, self._record(source, got[1], got[0]) if got is not None else []

    def _column_row(
        self, source: Any, columns: list[tuple[str, int, int]], line: str
    ) -> tuple[bool, list[Found]]:
        """A line under an aligned header: a row (its record; the line is still every other
        reader's, a progress bar's refresh most often), a blank (taken), or the end of the
        table."""
        if not line.strip():
            return True, []
        row = column_row(columns, line)
        if row is None:
            del self._open[source]
            return False, []
        self._open[source].lines = 1  # a table goes on for as many rows as it has
        return False, self._record(source, row.step, dict(row.metrics))

    def _under_header(self, source: Any, held: _Open, line: str) -> tuple[bool, list[Found]]:
        """A line under a header: one of its `key: value` lines or two-column rows (taken), a
        blank or a rule (taken), or something else -- which the other readers read, and which
        ends the header's record when it is a record or a header of its own, or the
        `MAX_MISSES`-th such line in a row."""
        if not line.strip() or is_rule(line):
            return True, []
        pair = single_pair(line, bare=True)
        if pair is not None:
            held.pairs.append(pair)
            held.misses = 0
            return True, []
        held.misses += 1
        if held.misses < self.MAX_MISSES and not self._starts(line):
            return False, []
        del self._open[source]
        return False, self._block(source, held.pairs, held.step)

    @staticmethod
    def _starts(line: str) -> bool:
        """Whether a line starts a record of its own (a header, a two-column table's step row
        -- the next table's `| Epoch | 4 |` -- a line of metrics, a dict)."""
        if not any(m in line for m in MARKERS):
            return False
        return (
            header(line) is not None
            or table_step(line) is not None
            or banner(line)
            or ("{" in line and DICT_OPEN.search(line) is not None)
            or read_line(line) is not None
        )

    def _block(self, source: Any, rows: list[Pair], step: int | None = None) -> list[Found]:
        """A two-column table's rows, or the pairs under a header, as one record (two rows
        or more): the header's step, else the one the console named last."""
        if len(rows) < 2 and not (step is not None and rows and _alone(rows[0])):
            return []
        metrics: dict[str, float | None] = {}
        for pair in rows:
            metrics.setdefault(pair.key, pair.value)
        return self._record(source, step, metrics)

    def _cut(self, source: Any, text: str) -> list[Found]:
        """A dict cut before its `}` (`printed_dicts.cut_dict`) as the record of its whole
        items."""
        whole = cut_dict(text)
        got = metrics_dict(whole) if whole is not None else None
        return self._record(source, got[1], got[0]) if got is not None else []

    def finish(self) -> list[Found]:
        """The output ended: a two-column table, or a header's lines, read to its end is a
        record."""
        out: list[Found] = []
        for source in list(self._open):
            out += self._close(source)
        return out

    def _hold(self, source: Any, opened: _Open) -> list[Found]:
        """Read a record spread over lines from here; one the source still held ends (a
        table's header after an epoch's `key: value` lines): what it read is its record."""
        out = self._close(source)
        self._open[source] = opened
        return out

    def _close(self, source: Any) -> list[Found]:
        """The record a source held, ended: a two-column table's or a header's lines read so
        far, a dict cut before its `}` (its whole items); a configuration's dict is none."""
        held = self._open.pop(source, None)
        if held is None:
            return []
        if held.pairs:
            return self._block(source, held.pairs, held.step)
        if held.text and not held.settings:
            return self._cut(source, held.text)
        return []

    def saw(self, found: list[Found]) -> None:
        """The events a line gave, every reader's: the steps the run has reached."""
        for kind, fields in found:
            if kind == "step.metrics":
                self.steps.saw(fields["step"])

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

    def _record(
        self, source: Any, named: int | None, metrics: dict[str, float | None],
        skipped: int | None = None, rewards: bool = True,
    ) -> list[Found]:  # fmt: skip
        if any(undefined(k, v, metrics) for k, v in metrics.items()):
            metrics = {k: v for k, v in metrics.items() if not undefined(k, v, metrics)}  # 0/0
            if not metrics:
                return []
        bad = any(v is not None and not math.isfinite(v) for v in metrics.values())
        step = self.steps.step(source, named, bad)
        records = self.steps.record(source, step, metrics, skipped)
        kept = {k for s, m in records if s == step for k in m}
        held = [k for k, v in metrics.items() if k not in kept and v is not None]
        if held:
            self.notes.append(
                f"`{held[0]}` is {metrics[held[0]]} at step {step}, which the log says was "
                "skipped for a loss-scale overflow: routine until "
                f"{self.steps.overflow_steps} skips in a row or a loss scale of 1 "
                "(RUNWATCH_OVERFLOW_STEPS)"
            )
        return self._emit_all(records, rewards)

    def _emit_all(
        self, records: list[tuple[int, dict[str, float | None]]], rewards: bool = True
    ) -> list[Found]:
        out: list[Found] = []
        for step, metrics in records:
            keys = self._reward_keys(metrics) if rewards else ()
            out += step_events(metrics, step, keys, done=False)
        return out

    def _reward_keys(self, metrics: dict[str, float | None]) -> tuple[str, ...]:
        """The reward keys, matched without regard to case (`Reward` in PRIME-RL's older
        console, `reward` in TRL's table)."""
        lower = {k.lower(): k for k in metrics}
        return tuple(lower[k.lower()] for k in self.reward_keys if k.lower() in lower)

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


def _lightning_placeholder(metrics: dict[str, float]) -> None:
    """Drop a bar postfix's `loss=nan` that is Lightning's placeholder for no running loss
    (`LIGHTNING_LOSS`): another key of the postfix names a loss, and it is finite."""
    value = metrics.get(LIGHTNING_LOSS)
    if value is None or not math.isnan(value):
        return
    others = (v for k, v in metrics.items() if k != LIGHTNING_LOSS and "loss" in k.lower())
    if any(math.isfinite(v) for v in others):
        del metrics[LIGHTNING_LOSS]

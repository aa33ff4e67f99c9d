"""Which step a printed metric record is, and whether its non-finite values count.

Per source (a Ray worker, a rank, the process):

- **The step.** A record that names its step is that step. One that names none (a
  transformers dict) is the step the nearest progress bar or step line named since the last
  record -- a bar's count, a `step=101` -- and only without any, the step after the last
  record's (the order of lines). One numbered by its epoch is its epoch only where nothing
  finer was counted: after a bar or a step past it, it is the step the console is at. A
  count that goes back (a new epoch's batches, a resumed run) is at the step the console
  had reached: the run's state keeps steps in their numbers' order.
- **Loss-scale overflow.** fp16 training skips a step whose gradients overflowed and halves
  the loss scale (DeepSpeed, apex, Megatron print it routinely while the scale finds its
  range). A record of a skipped step may print NaN or inf: that is the scaler at work, so its
  non-finite values are held back -- unless the skips go on for `overflow_steps` steps in a
  row, or the scale reaches a floor in a run of two skips or more: 1 -- DeepSpeed's and
  Megatron's, which clamp there, and apex's, which has none and halves on: at or below 1 the
  scale magnifies nothing, the gradients overflow unscaled (one skip at 1 after steps went
  through is one batch that overflowed so, and DeepSpeed, clamped at its `min_loss_scale`,
  goes on) -- or fairseq's, whose scaler words its skips `setting loss scale to: S`
  (`FAIRSEQ_FLOOR`: its criterions sum the loss over a batch's tokens, so a scale below 1 is
  routine there, down to its `--min-loss-scale`, 1e-4, where it says so itself, `Minimum loss
  scale reached`, a failure's words); a scale below every floor (`LOWEST_FLOOR`) at once. Then
  the
  skipping is a failure: the held values are reported at their steps (or, when no record
  printed any, the overflow itself as `loss_scale/overflow: inf`), and so is every
  non-finite value until a step goes through. DeepSpeed's fused optimizer writes two lines
  for one overflow (`Grad overflow on iteration N`, then `Overflow detected. Skipping step.
  ...`): a line of one kind after one of the other, with no record between, is the same
  skip, at the iteration the first named.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

#: an overflow and what was not applied for it -- a step, an update, both models' steps, the
#: gradient -- or the loss scale set lower for it (module docstring; wordings from the sources:
#: tests/fixtures/consoles/README.md)
_OVERFLOW = re.compile(
    r"(?i)\boverflow\b.{0,80}?\b(?:skipping|ignoring)\b(?: \w+){0,4}? "
    r"(?:steps?|updates?|iterations?|gradients?)\b"
    r"|\bskipping step\b.{0,80}?\boverflow"
    r"|\boverflow (?:detected|occurs)\b.{0,40}?\bloss scale (?:is )?(?:set|adjusted) to"
    r"|\boverflow (?:detected|occurs)\b.{0,40}?\bsetting loss scale to"
    r"|Grad overflow on iteration:? (?P<it>\d{1,18})(?!\d)"
)
#: the scale set after it, else (DeepSpeed's line cut before `reducing to`) the one tried
_SCALE_TO = re.compile(
    r"(?i)(?:reducing|setting|adjusted|set)(?: loss scale)? to:? (\d[\d.]*(?:e[+-]?\d+)?)"
)
_SCALE_TRIED = re.compile(r"(?i)loss scale: (\d[\d.]*(?:e[+-]?\d+)?)")
#: the lowest floor a scaler sets by default (fairseq's `--min-loss-scale`, 1e-4; DeepSpeed's,
#: Megatron's and apex's are 1): a scale below it is below every floor -- apex, which has
#: none, halving on through 1e-200 at every step
LOWEST_FLOOR = 1e-4
#: the floor of the scalers whose loss is a mean (DeepSpeed's and Megatron's `min_loss_scale`,
#: 1; apex's LossScaler, `min_loss_scale=None`, halves on past it): a scale at or below it
#: magnifies nothing, so skipping there is gradients that overflow unscaled
FLOOR = 1.0
#: fairseq's scaler's words for a skip (fairseq/optim/dynamic_loss_scaler.py, `raise
#: OverflowError("setting loss scale to: " + str(self.loss_scale))`, which fairseq/trainer.py
#: logs as `NOTE: overflow detected, ` or `NOTE: gradient overflow detected, ignoring
#: gradient, ` and the error; fairseq 0.9-0.12 on GitHub): its floor is its
#: `--min-loss-scale`, 1e-4 (module docstring)
_FAIRSEQ = re.compile(r"setting loss scale to: ")
FAIRSEQ_FLOOR = LOWEST_FLOOR


@dataclass
class Overflow:
    """A step skipped because the loss scale overflowed."""

    scale: float | None  # the scale after it, where the line says
    iteration: int | None  # the step, where the line names it
    floor: float = FLOOR  # the scaler's floor, as its words say which scaler it is


def loss_scale_overflow(text: str) -> Overflow | None:
    """A line saying a step was skipped for a loss-scale overflow: DeepSpeed's `[deepspeed]
    OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2`, `Overflow
    detected. Skipping step.`, `Grad overflow on iteration 5`; apex's `Gradient overflow.
    Skipping step, loss scaler 0 reducing loss scale to 32768.0`. Wordings:
    tests/fixtures/consoles/README.md."""
    if "verflow" not in text and "VERFLOW" not in text:
        return None
    m = _OVERFLOW.search(text)
    if m is None:
        return None
    scale: float | None = None
    try:
        if (to := _SCALE_TO.search(text, m.start())) is not None:
            scale = float(to.group(1))
        elif (tried := _SCALE_TRIED.search(text, m.start())) is not None:
            scale = float(tried.group(1))  # DeepSpeed halves it, down to 1
            scale = scale / 2 if scale >= 2 else scale
    except ValueError:
        scale = None
    iteration = int(m.group("it")) if m.group("it") else None
    floor = FAIRSEQ_FLOOR if _FAIRSEQ.search(text, m.start()) else FLOOR
    return Overflow(scale if scale is not None and math.isfinite(scale) else None, iteration, floor)


#: consecutive overflow skips that are no longer the scaler finding its range: halving from
#: the largest initial scale in use (2^32, DeepSpeed's and Megatron's upper end) reaches 1
#: after 32 of them
OVERFLOW_STEPS = 32
#: the key a run of skips is reported under when no record printed a non-finite value
OVERFLOW_KEY = "loss_scale/overflow"

Metrics = dict[str, float | None]


@dataclass
class _Source:
    last: int = 0  # the last record's step
    hint: int | None = None  # a step a bar or step line named since the last record
    skipping: bool = False  # an overflow line came since the last record
    run: int = 0  # consecutive skipped steps
    overflow_at: int | None = None  # the iteration the last overflow line named
    #: whether the last overflow line, if it is still waiting for its other half (fused
    #: DeepSpeed's pair), named its iteration; None: no line waits
    waiting: bool | None = None
    failed: bool = False  # the skips are a failure (module docstring)
    held: list[tuple[int, Metrics]] = field(default_factory=list)  # skipped steps' NaN/inf


class StepNumbers:
    """Numbers records and decides what their non-finite values mean, per source."""

    def __init__(self, overflow_steps: int = OVERFLOW_STEPS) -> None:
        self.overflow_steps = max(1, overflow_steps)
        self._sources: dict[object, _Source] = {}
        self._top = 0  # the highest step any reader of the console gave (`saw`)

    def _of(self, source: object) -> _Source:
        got = self._sources.get(source)
        if got is None:
            got = self._sources[source] = _Source()
        return got

    def named(self, source: object, step: int) -> None:
        """A bar or a step line named this step."""
        self._of(source).hint = step

    def saw(self, step: int) -> None:
        """A step some reader of the console gave a record (verl's step line, another
        rank's): the step the run has reached."""
        if step > self._top:
            self._top = step

    def last(self, source: object) -> int:
        """The step of the source's last record (0 before any)."""
        return self._of(source).last

    def coarse(self, source: object, epoch: int) -> int:
        """The step of a record numbered by its epoch (`Epoch 4: train_loss=nan`): the epoch,
        unless the console already counts finer -- a bar, a step line or a record named a
        later step -- then the step it is at."""
        s = self._of(source)
        finer = s.hint if s.hint is not None else s.last
        return max(finer, epoch)

    def step(self, source: object, named: int | None, bad: bool = False) -> int:
        """The step of a record (`named` when the line names it). A count that went back --
        a new epoch's batches (Keras' bar, mmengine's `[2][50/735]`), a run resumed from an
        earlier checkpoint -- is at the step the console had reached: a record at a lower
        step is one the run's state takes for an old step's, and its NaN would be lost
        behind the later steps' finite values."""
        s = self._of(source)
        if named is None:
            named = s.hint if s.hint is not None else s.last + 1
            s.hint = None
        else:
            s.hint = named  # a step line: a dict printed after it is that step's
        named = max(named, s.last)
        if bad and named < self._top:
            # a record with a value that is not finite from a source behind the run (a Ray
            # worker's dict under the driver's step lines, a lagging rank's): at the step the
            # run reached, where the state reads it
            named = self._top
        s.last = named
        self.saw(named)
        return named

    def record(
        self, source: object, step: int, metrics: Metrics, skipped: int | None = None
    ) -> list[tuple[int, Metrics]]:
        """(step, metrics) to report for a record: its own, less the non-finite values of a
        skipped step while skipping is routine, plus held ones a failure releases. `skipped`:
        how many skipped steps the record itself counts (Megatron's), None if it says none."""
        s = self._of(source)
        was_skipped = s.skipping or bool(skipped)
        s.skipping, s.waiting = False, None
        if not was_skipped:
            s.run, s.held, s.failed = 0, [], False
            return [(step, metrics)]
        s.run += skipped or 0
        bad: Metrics = {k: v for k, v in metrics.items() if v is not None and not math.isfinite(v)}
        out = self._check(s, None, step, said=bool(bad))
        if bad and not s.failed:
            s.held.append((step, bad))
            metrics = {k: v for k, v in metrics.items() if k not in bad}
        return [*out, (step, metrics)] if metrics else out

    def overflow(self, source: object, seen: Overflow) -> list[tuple[int, Metrics]]:
        """An overflow line: one more skipped step (or the same one, when it names the
        iteration the last one named); what a failure it makes releases."""
        s = self._of(source)
        named = seen.iteration is not None
        if s.waiting is not None and s.waiting != named:
            s.waiting = None  # the other half of the skip the last line reported
            if named:
                s.overflow_at = seen.iteration
        else:
            if not named or seen.iteration != s.overflow_at:
                s.run += 1
            s.waiting, s.overflow_at = named, seen.iteration
        s.skipping = True
        step = s.overflow_at if s.overflow_at is not None else s.last + 1
        return self._check(s, seen.scale, step, floor=seen.floor)

    def _check(
        self,
        s: _Source,
        scale: float | None,
        step: int,
        said: bool = False,
        floor: float = FLOOR,
    ) -> list[tuple[int, Metrics]]:
        """What a run of skips releases once it is a failure: the held values, else (unless
        the record at hand says its own, `said`) the overflow itself. `floor`: the scaler's."""
        # a scale below every scaler's floor took hundreds of skips to reach; one skip at the
        # floor may be one batch whose gradients overflow unscaled (DeepSpeed clamps at its
        # `min_loss_scale` and goes on): the floor is a failure once the skipping goes on there
        floored = scale is not None and (scale < LOWEST_FLOOR or (scale <= floor and s.run >= 2))
        if s.failed or not (s.run >= self.overflow_steps or floored):
            return []
        s.failed = True
        held, s.held = s.held, []
        return held or ([] if said else [(step, {OVERFLOW_KEY: math.inf})])

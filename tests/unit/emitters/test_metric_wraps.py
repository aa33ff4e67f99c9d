"""A metric line a terminal hard-wrapped (issue 41: Megatron's iteration lines `also
hard-wrapped over several lines`): joined back as the terminal cut it and read whole, so a
NaN is found at its key and step however the line was cut, and a healthy line's cut words
(`number of n` / `an iterations: 0`) are no NaN -- in `runwatch diagnose`'s reading and in
`runwatch watch`'s scanner alike."""

from __future__ import annotations

import pytest
from helpers import non_finite as bad
from helpers import read_all, scanned

from runwatch.emitters.metric_wraps import may_be_cut

#: https://github.com/bigscience-workshop/Megatron-DeepSpeed/issues/396 (corpus/dev), as posted
NAN_LINES = [
    " iteration     5426/  250000 | consumed samples:        43408 | consumed tokens:     "
    "88899584 | elapsed time per iteration (ms): 4247.9 | learning rate: 2.999E-04 | global "
    "batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of "
    "skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.883 | "
    "TFLOPs: 78.36 |",
    " iteration     5427/  250000 | consumed samples:        43416 | consumed tokens:     "
    "88915968 | elapsed time per iteration (ms): 4225.8 | learning rate: 2.999E-04 | global "
    "batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of "
    "skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.893 | "
    "TFLOPs: 78.77 |",
]
#: https://github.com/epfLLM/Megatron-LLM/issues/11 (corpus6/dev), as posted: healthy
HEALTHY_LINES = [
    f" iteration      {n}/  250000 | consumed samples:       {samples} | elapsed time per "
    f"iteration (ms): {ms} | learning rate: {lr} | global batch size:  1024 | lm loss: {loss} "
    f"| loss scale: 1.0 | grad norm: {gnorm} | number of skipped iterations:   0 | number of "
    "nan iterations:   0 |"
    for n, samples, ms, lr, loss, gnorm in [
        (182, 186368, "126995.3", "1.365E-05", "2.382640E+00", "0.227"),
        (183, 187392, "125553.7", "1.372E-05", "2.471678E+00", "0.134"),
        (184, 188416, "127804.5", "1.380E-05", "2.408367E+00", "0.270"),
    ]
]  # fmt: skip


def wrapped(lines: list[str], width: int) -> list[str]:
    """The lines as a terminal `width` columns wide shows them, copied: cut every `width`
    characters, the spaces a cut leaves at a line's end dropped."""
    return [line[i : i + width].rstrip() for line in lines for i in range(0, len(line), width)]


@pytest.mark.parametrize("width", [80, 100, 120, 132, 160, 200])
def test_a_wrapped_iteration_line_is_read_whole(width: int) -> None:
    lines = wrapped(NAN_LINES, width)
    assert bad(read_all(lines)) == [(5426, ["grad norm"]), (5427, ["grad norm"])]
    assert bad(scanned(lines)) == [(5426, ["grad norm"]), (5427, ["grad norm"])]
    healthy = wrapped(HEALTHY_LINES, width)
    found = read_all(healthy)
    assert bad(found) == []
    # a fragment's leading count is no step: a line cut inside a number, not held for its
    # rest (only a cut inside a key or an exponent is), reads as its line's step's fragments
    steps = [f["step"] for kind, f in found if kind == "step.metrics"]
    assert sorted(set(steps)) == [182, 183, 184]


def test_a_line_ending_in_words_is_no_wrap_of_the_next() -> None:
    """3D-R1#16 (corpus14/dev): an iteration line ending in a unit (`Mem 29072.79MB`) is
    whole; the trainer's sentences after it are lines of their own. A step line ending in
    words after its pairs is not held (its step would come a line late)."""
    lines = [
        "Epoch [0/5]; Iter [0/9450]; Loss 10.08; LR 1.00e-06; Iter time 3.72; ETA 9:46:15; Mem "
        "29072.79MB",
        "Loss in not finite. Skip this training step.",
        "Loss in not finite. Terminate training.",
    ]
    assert bad(read_all(lines)) == [(0, ["Loss"])]  # as unwrapped
    step = "INFO:root:[step 21000]  mlm_loss=1.41707  nsp_loss= 0.02   throughput=16.2K tks/s"
    assert not may_be_cut(step)
    assert may_be_cut(NAN_LINES[0][:80].rstrip())  # `| consumed tokens:`

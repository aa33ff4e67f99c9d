"""A line a terminal, a collector or a paste wrapped is read as its program printed it
(emitters/printed.py `printed`): after a tqdm bar's last refresh, which has no line end,
after a collector's time, and inside the markdown a paste puts around a line -- by every
reading of `Failures`, not only the catalogue's."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.emitters.failures import Failures, fatal
from runwatch.emitters.printed import as_printed, printed

CONSOLES = Path(__file__).resolve().parents[2] / "fixtures" / "consoles"

#: (line as the console or the paste shows it, the line as printed) -- real lines of corpus11's
#: development part and the shapes of the first ten corpora's pastes
WRAPPED = [
    ("**Killed**", "Killed"),
    ("> Floating point exception (core dumped)", "Floating point exception (core dumped)"),
    ("`Aborted (core dumped)`", "Aborted (core dumped)"),
    (" 31%|████▉     | 331/1063 [01:06<03:59,  3.06it/s]Killed", "Killed"),
    # a terminal's padding split the bar itself off: its counter and times remain
    ("| 348/1063 [01:08<02:57,  4.03it/s]Killed", "Killed"),
    ("> Epoch 0:  83%|████| 100/120 [00:30<00:06,  3.3it/s]Killed", "Killed"),
    # a code fence glued to the line, and padding around it
    ("```Killed", "Killed"),
    ("    Killed```", "    Killed"),
    # an inline code span a paste opened on the line before closes at the shell's report
    # (corpus25/dev/opennmt_step_85700_of_300000_acc_loss_then_run_sh_line_66_killed)
    ("run.sh: line 66: 777016 Killed`", "run.sh: line 66: 777016 Killed"),
    ("`Segmentation fault (core dumped)", "Segmentation fault (core dumped)"),
    # text-generation-inference's `tracing` time (corpus3/dev/fatal_tgi_shard_signal4_cannot_start)
    (
        "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process "
        "was signaled to shutdown with signal 4 rank=0",
        "ERROR shard-manager: text_generation_launcher: Shard process was signaled to shutdown "
        "with signal 4 rank=0",
    ),
]
#: lines that merely mention a signal's word, wrapped or not: no shell's report
NOT_A_DEATH = [
    "**Killed processes are restarted by the supervisor**",
    "> the job was Killed by the user last week, see above",
    " 31%|████▉     | 331/1063 [01:06<03:59,  3.06it/s, loss=0.25]",
    "Epoch 3: Killed 2 stale workers; continuing",
    # abseil's failure signal handler writes its own stars: the program's text, no emphasis
    "```python",
]


@pytest.mark.parametrize(("wrapped", "program_s"), WRAPPED)
def test_a_wrapped_shell_report_is_read_as_printed(wrapped: str, program_s: str) -> None:
    assert as_printed(wrapped) == program_s
    found = fatal(wrapped)
    assert found is not None
    assert found[1]["error"] == program_s.strip()  # padding around it is no part of it


@pytest.mark.parametrize("line", NOT_A_DEATH)
def test_a_wrapped_mention_is_no_death(line: str) -> None:
    assert fatal(line) is None


def test_a_line_nothing_wrapped_has_no_printed_form() -> None:
    assert as_printed("Killed") is None
    # a code span that opens and closes on the line, or a lone mark inside it, is the text's
    assert as_printed("use `kill -9` and the job is Killed") is None
    assert as_printed("a ` between words") is None
    assert as_printed("**   **") is None


def test_a_program_s_own_stars_are_no_markup() -> None:
    line = "*** SIGABRT received at time=1744106512 on cpu 176 ***"
    assert as_printed(line) is None
    assert fatal(line) is not None


def test_a_bar_s_refresh_is_what_its_source_printed_before_the_line() -> None:
    text, bar = printed("  0%|          | 0/392 [00:00<?, ?it/s]Traceback (most recent call last):")
    assert text == "Traceback (most recent call last):"
    assert bar.endswith("?it/s]")


def _read(lines: list[str]) -> list[str]:
    failures = Failures()
    for line in lines:
        assert failures.read(None, line) == []
    return [fields["error"] for _, (_, fields) in failures.finish()]


def test_a_quoted_traceback_is_read_by_the_grammar_as_printed() -> None:
    """corpus11's quoted paste: every line of the traceback under a `>`, read as Python wrote
    it -- frames, code lines, and the exception line its process died of."""
    path = CONSOLES / "corpus11" / "dev" / "fail_yolov3_quoted_traceback_dataloader_bus_error.log"
    lines = [x for x in path.read_text().splitlines() if not x.startswith("#")]
    assert lines[0].startswith("> Traceback")
    said = _read(lines)
    assert said == [lines[-1].removeprefix("> ")]


def test_a_traceback_glued_to_a_bar_after_a_warning_is_the_bar_s_source_s() -> None:
    """The record before a traceback's head is what was printed before it: a bar's refresh on
    its line, not the WARNING line above the bar (that would make it a logged warning)."""
    lines = [
        "2020-06-10 16:23:38,177 - WARNING - allennlp.training.trainer - slow data loading",
        "  0%|          | 0/392 [00:00<?, ?it/s]Traceback (most recent call last):",
        '  File "train.py", line 110, in <module>',
        "    train_model(train_params, serialization_dir, recover=bool(args.resume))",
        "ValueError: nan loss encountered",
    ]
    assert _read(lines) == ["ValueError: nan loss encountered"]
    # the same head on a line of its own after the WARNING: the warning's traceback
    assert _read([lines[0], lines[1].split("]", 1)[1], *lines[2:]]) == []


#: torch's report of a DataLoader worker a signal killed (torch/csrc/DataLoader.cpp
#: `_error_if_any_worker_fails`: "DataLoader worker (pid " pid ") is killed by signal: "
#: strsignal(si_status) ". ", then for SIGBUS "It is possible that dataloader's workers are out
#: of shared memory. Please try to raise your shared memory limit."; the wording as posted in
#: https://github.com/pytorch/pytorch/pull/25730), rendered and hard-wrapped by a terminal after
#: the colon's space, as pastes of it show it: the space the wrap left is the message's
WRAPPED_AT_SIGNAL = [
    "DataLoader worker (pid 270071) is killed by signal: ",
    "Bus error. It is possible that dataloader's workers are out of shared memory. ",
    "Please try to raise your shared memory limit. ",
]


def test_a_message_wrapped_after_a_word_keeps_the_word_s_space() -> None:
    """A terminal's wrap after `signal: ` left the space at the line's end: the catalogue's
    line is read there, though padding around a fatal line is no part of what it says."""
    found = fatal(WRAPPED_AT_SIGNAL[0])
    assert found is not None
    assert found[1]["error"] == WRAPPED_AT_SIGNAL[0].strip()
    assert found[1]["component"] == "trainer"
    # the process said no more after it: its death (pending, as a survivable one is not)
    failures = Failures()
    out = [f for line in WRAPPED_AT_SIGNAL for f in failures.read("w", line)]
    out += [f for _, f in failures.finish()]
    assert [f[0] for f in out] == ["component.failed"]
    # a paste (or an editor) that trimmed the wrap's trailing space: the signal's name is on the
    # next line all the same
    assert fatal(WRAPPED_AT_SIGNAL[0].rstrip()) is not None

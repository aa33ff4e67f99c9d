"""A fatal line a terminal or a paste wrapped is read as its program printed it
(emitters/failures.py `as_printed`): after a tqdm bar's last refresh, which has no line end,
and inside the markdown a paste puts around a line."""

from __future__ import annotations

import pytest

from runwatch.emitters.failures import as_printed, fatal

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
]
#: lines that merely mention a signal's word, wrapped or not: no shell's report
NOT_A_DEATH = [
    "**Killed processes are restarted by the supervisor**",
    "> the job was Killed by the user last week, see above",
    " 31%|████▉     | 331/1063 [01:06<03:59,  3.06it/s, loss=0.25]",
    "Epoch 3: Killed 2 stale workers; continuing",
]


@pytest.mark.parametrize(("wrapped", "printed"), WRAPPED)
def test_a_wrapped_shell_report_is_read_as_printed(wrapped: str, printed: str) -> None:
    assert as_printed(wrapped) == printed
    found = fatal(wrapped)
    assert found is not None
    assert found[1]["error"] == printed


@pytest.mark.parametrize("line", NOT_A_DEATH)
def test_a_wrapped_mention_is_no_death(line: str) -> None:
    assert fatal(line) is None


def test_a_line_nothing_wrapped_has_no_printed_form() -> None:
    assert as_printed("Killed") is None
    assert as_printed("**   **") is None

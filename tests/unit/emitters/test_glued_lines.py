"""What a program writes right after a tqdm bar's refresh (issue 41): tqdm ends a refresh with
no line end, so the next write -- a traceback's head under torchrun's `[rankN]:`, a launcher's
glog record -- starts after the bar's `]` on the bar's line. It is a line of its own for every
reader, with its own launcher prefix. The lines are real consoles' (corpus15's development
part: ms-swift#4023, unsloth#2367, lightning#4404 in corpus5)."""

from __future__ import annotations

from typing import Any

from helpers import read_all

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found

BAR = "Train:   0%|          | 1/594 [00:21<3:28:13, 21.07s/it]"
RANK4 = [  # ms-swift#4023: rank 4's traceback, its head glued after the bar
    BAR + "[rank4]: Traceback (most recent call last):",
    '[rank4]:   File "/home/ap/ms-swift/swift/cli/rlhf.py", line 5, in <module>',
    "[rank4]:     rlhf_main()",
    "[rank4]: RuntimeError: CUDA error: an illegal memory access was encountered",
]


def failed(found: list[Found]) -> list[dict[str, Any]]:
    return [f for k, f in found if k == "component.failed"]


def test_a_traceback_glued_after_a_bar_is_read_under_its_own_launcher_prefix() -> None:
    found = read_all(RANK4)
    assert ("progress", {"name": "Train", "n": 1, "total": 594}) in found
    (fields,) = failed(found)
    assert fields["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    # the same traceback on a line of its own reads the same
    assert failed(read_all([BAR, *RANK4[0:1][0].split(BAR)[1:], *RANK4[1:]])) == [fields]


def test_watch_s_scanner_reads_the_glued_line_as_diagnose_does() -> None:
    data = ("\n".join(RANK4) + "\n").encode()
    scanner = LineScanner(LineParser())
    found = scanner.feed(data) + scanner.finish() + scanner.parser.finish()
    assert failed(found) == failed(read_all(RANK4))


def test_what_follows_the_bar_is_read_after_the_bar_s_progress() -> None:
    """A step the bar shows, then a traceback the process went on after (a caught one): the
    bar before it on its line is no progress after it."""
    caught = [BAR + "Traceback (most recent call last):",
              '  File "/workspace/train.py", line 88, in step',
              "    batch = next(it)",
              "StopIteration"]  # fmt: skip
    assert failed(read_all(caught)) != []
    later = "Train:   0%|          | 2/594 [00:42<3:28:13, 21.07s/it]"
    assert failed(read_all([*caught, later])) == []


def test_a_head_the_output_ends_on_is_too_little_a_frame_after_it_is_a_cut_traceback() -> None:
    """unsloth#2367: the bar at 2/750, then rank 0's head, and the paste ends: a bare head
    alone names nothing (a healthy console can end on one), but rank 0's is torch's
    excepthook's -- an uncaught exception, as on a line of its own (test_tracebacks); with a
    frame after it, the process's last word, cut before its exception line; more progress
    after it: none."""
    bar = "  0%|▎         | 2/750 [06:25<40:07:50, 193.14s/it]"
    head = bar + "[rank0]: Traceback (most recent call last):"
    frame = '[rank0]:   File "/x/swift/cli/rlhf.py", line 5, in <module>'
    assert failed(read_all([bar + "Traceback (most recent call last):"])) == []
    (hooked,) = failed(read_all([head]))
    assert hooked["error"].startswith("an uncaught exception (torch.distributed's excepthook")
    (fields,) = failed(read_all([head, frame]))
    assert fields["error"].startswith("an uncaught traceback, cut before its exception line")
    more = "GRPO:   0%|▎         | 3/750 [09:38<40:07:50, 193.14s/it]"
    frame0 = '  File "/x/swift/cli/rlhf.py", line 5, in <module>'
    assert failed(read_all([bar + "Traceback (most recent call last):", frame0, more])) == []
    # progress of another source (the bar has no rank prefix) says nothing of rank 0
    assert failed(read_all([head, frame, more])) != []


def test_python_s_ignored_exception_glued_to_a_bar_cut_before_its_bracket() -> None:
    """lightning#4404: the last refresh's postfix cut by `Exception ignored in: <function
    tqdm.__del__ ...>` (no `]`), then the head, cut: an exception Python ignored in a
    finaliser, whatever the bar before it on its line said."""
    lines = [
        "Epoch 1: 100%|██████████| 1017/1017 [00:09<00:00, 100.37it/s, loss=0.336, v_num=24, "
        "train_loss=2.33, train_acc=0.143Exception ignored in: <function tqdm.__del__ at "
        "0x7fd9c4374f80>",
        "Traceback (most recent call last):",
        '  File "/x/tqdm/std.py", line 1145, in __del__',
    ]
    assert failed(read_all(lines)) == []
    assert failed(read_all(lines[1:])) != []  # the head and a frame alone: a cut traceback

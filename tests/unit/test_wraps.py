"""A pasted console's hard wraps (`runwatch.emitters.wraps`): what a terminal cut at its width
is read as the lines the process wrote, and what only looks cut is left alone."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from helpers import read_events
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runwatch.diagnose import diagnose
from runwatch.emitters import Emitter
from runwatch.emitters.console import LineParser
from runwatch.emitters.watch import Watcher
from runwatch.emitters.wraps import (
    SAMPLE,
    SAMPLE_CHARS,
    Margin,
    OutputMargin,
    OutputUnwrapper,
    Widths,
    terminal_width,
    unwrapped,
)
from scripts.corpus_report import CONSOLES, CORPORA, DAY, excerpt_lines

#: torch's watchdog line (tests/unit/emitters/test_console_readers.py's, from a real console)
WATCHDOG = (
    "[rank3]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=4486, OpType=ALLTOALL, NumelIn=46684160, "
    "NumelOut=46684160, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
)


#: AReaL's stats table as its console prints it (the fixture's first table)
TABLE = [
    line
    for line in (CONSOLES / "areal_trainer.log").read_text(encoding="utf-8").splitlines()
    if line[:1] in "╒│├╘"
][:5]


def _cut(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)]


def test_a_line_cut_at_the_terminal_s_width_is_one_line_again() -> None:
    text = ["INFO starting", *_cut(WATCHDOG, 85), *_cut(WATCHDOG.replace("4486", "4487"), 85)]
    assert terminal_width(text) == 85
    joined = [line for _, line in unwrapped(enumerate(text, 1))]
    assert joined == ["INFO starting", WATCHDOG, WATCHDOG.replace("4486", "4487")]
    assert [n for n, _ in unwrapped(enumerate(text, 1))] == [1, 2, 2 + len(_cut(WATCHDOG, 85))]


def test_a_file_of_long_lines_is_not_held_whole_to_judge_its_width() -> None:
    """The sample the width is judged from is held before the first line is given out: a
    file of long lines gives out its first after a few megabytes, not 20,000 of its lines."""
    pulled = 0

    def lines() -> Iterator[tuple[int, str]]:
        nonlocal pulled
        for number in range(1, 201):
            pulled = number
            yield number, f"{number} " + "x" * (100 << 10)

    first, _ = next(unwrapped(lines()))
    assert first == 1
    assert pulled * (100 << 10) <= SAMPLE_CHARS + (200 << 10)


def test_the_lines_after_the_sample_are_given_whole_wrapped_or_not() -> None:
    """Past the sample (`SAMPLE` lines) the width is settled: a file that shows none gives
    every later line as it is, one that shows one still joins its later wraps."""
    plain = [(n, f"INFO step {n} loss 0.5") for n in range(1, SAMPLE + 1001)]
    assert list(unwrapped(plain)) == plain
    cut = _cut(WATCHDOG, 85)
    wrapped = [*cut, *(f"INFO step {n}" for n in range(SAMPLE)), *cut]
    joined = [line for _, line in unwrapped(enumerate(wrapped, 1))]
    assert joined[0] == WATCHDOG
    assert joined[-1] == WATCHDOG
    assert len(joined) == SAMPLE + 2


@pytest.mark.parametrize(
    "lines",
    [
        # one format's records, equally long and longest (torchvision's detection MetricLogger)
        [f"Epoch: [0]  [{n:4}/1985]  eta: 0:07:57  lr: 0.000500  loss: 0.5219 (0.7306)  "
         f"max mem: 1792" for n in (0, 50, 100)] + ["Loss is nan, stopping training"],
        # a console padded to its width with spaces
        [line.ljust(100) for line in ("Traceback (most recent call last):",
                                      '  File "/root/slime/train.py", line 66, in train',
                                      "    train(args)")] + ["RuntimeError: boom"],
        # long lines each followed by a line of its own (a timestamp, a level, a traceback)
        ["x" * 90, "2024-05-01 10:00:00 INFO next", "y" * 90, "ERROR: something",
         "z" * 90, "Traceback (most recent call last):"],
        # a box-drawn table, each row as wide as the others (AReaL's stats: tests/fixtures/
        # consoles/areal_trainer.log, tabulate's fancy_grid)
        [line.rstrip("\n") for line in TABLE],
        # short lines: no terminal is that narrow
        ["abcdefghij", "klmnopqrst", "abcdefghij", "uvwxyz"],
        # a warning every rank gives, longest, each with the source line Python shows under it
        [line for rank in range(4) for line in (
            "/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:460: UserWarning:"
            " torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False"
            f" explicitly (rank {rank}).", "  warnings.warn(")],
        # one format's lines that happen to be as long as each other, the step they name at
        # their start (verl's step line with the same figures six steps running)
        [f"step:{n} - actor/pg_loss:0.000 - critic/score/mean:0.000 - critic/rewards/mean:0.000"
         " - response_length/mean:512.0" for n in range(1, 7)],
        # a header and its record, the records as long as each other: the header after each
        # record starts as the first header did, after a short line -- a line of its own
        # (TETGAN's `Iter[2/20], Epoch [1/1]` over `Lrec: ..., Lsty: 1068.036`, corpus17/dev)
        ["options: done"] + [line for n in range(1, 5) for line in (
            f"Iter[{n}/20], Epoch [1/1]",
            f"Lrec: 0.2{n}9, Ldadv: 0.99{n}, Ldesty: -10.377, Lsadv: 8.586, Lsty: 106{n}.036")],
    ],
    ids=["records", "padded", "fresh-lines", "box-table", "narrow", "warnings", "step-lines",
         "header-records"],
)  # fmt: skip
def test_what_only_looks_cut_is_left_alone(lines: list[str]) -> None:
    # (a padded console shows its width -- its lines padded to it -- and nothing in it is cut)
    assert terminal_width(lines) == (100 if lines[0].endswith("  ") else None)
    assert [line for _, line in unwrapped(enumerate(lines, 1))] == lines


def test_a_padded_terminal_s_line_that_fills_its_width_was_cut() -> None:
    """prime-rl's orchestrator traceback from a terminal that pads its lines (corpus40): the
    one frame whose path filled the width goes on in the next line, which no padding ends."""
    lines = [
        "Traceback (most recent call last):".ljust(60),
        '  File "/home/u/.local/share/uv/python/cpython-3.12.9/lib/asyncio/runners.',
        'py", line 195, in run'.ljust(60),
        "    return runner.run(main)".ljust(60),
        "AssertionError: Token prefix mismatch".ljust(60),
    ]
    lines[1] = lines[1][:60]
    assert terminal_width(lines) == 60
    joined = [line for _, line in unwrapped(enumerate(lines, 1))]
    assert joined[1] == lines[1] + lines[2]
    assert len(joined) == 4


@cache
def _fired(path: Path, width: int) -> tuple[str, ...]:
    def lines(p: Path) -> Iterator[tuple[int, bytes]]:
        number = 0
        for _, line in excerpt_lines(p):
            body = line.rstrip(b"\r\n")
            for i in range(0, max(len(body), 1), width or max(len(body), 1)):
                number += 1
                yield number, body[i : i + width] + b"\n" if width else line

    found = diagnose([path], day=DAY, lines=lines)
    return tuple(sorted({a.rule for a in found.alerts if a.state == "firing"}))


#: development excerpts (of 1,080) whose alerts a hard wrap still changes, at most: measured
#: when the wraps were first joined (without joining them: 190 at 80 columns, 107 at 120) -- a
#: piece that begins as a fresh line does, a wrap inside a reader's window of lines, one wrap.
#: corpus27's development part (33 more, registered 2026-12-01) adds one at each width: vLLM's
#: one-line `Engine core proc EngineCore_DP0 died unexpectedly` at 80, NeMo-Aligner's traceback
#: cut before its exception line at 120. corpus28's (34 more, read since the reader's nineteenth
#: pass) one at 80: yolov5's `WARNING: non-finite loss, ending training` glued after its bar,
#: which an 80-column wrap cuts inside the sentence, in a two-line excerpt that shows no width.
#: corpus29's (32 more, registered 2026-12-01, reported only) one at 120: RLlib's Tune traceback,
#: a traceback cut before its exception line, whose frame lines a 120-column wrap breaks.
#: waits31's scheduler entries (2026-12-01) one at each: Neu.ro's one-line `Status: pending ...
#: [2884.0 sec]` at 80 (its seconds cut onto a line of their own, in an excerpt of one line,
#: which shows no width), Volcano's 140-column `Unschedulable ... (x78789 over 26h)` event row
#: at 120 (its message cut after the age, among short rows: no width shown either).
#: corpus31's (30 more, asserted since the eighteenth session) three at 80 and four at 120, all
#: kubectl's FailedScheduling rows in excerpts of a few lines (no width shown): the rest of a
#: row a wrap puts on a line of its own ends the pod's wait (gpushare's, kubeflow's), or the
#: scheduler's FitError words a wrap moves off the row leave it no verdict (the device
#: plugin's at both widths, Triton's at 120).
#: corpus33's (29 more, registered 2026-12-01, reported only) one at 120: vLLM 0.5.5's RPC client
#: logging `TimeoutError("Server didn't reply within 5000 ms")` under its `ERROR ... client.py:412]`
#: prefix and then the traceback's one frame, a line of about 160 columns that a 120-column wrap
#: breaks; the excerpt is cut after that frame, so nothing but the broken frame follows the error.
#: corpus34's (24 more, registered 2026-12-02, reported only) one at 120: LMM-R1's (OpenRLHF's)
#: `Train epoch [1/1]` bars of about 150 columns, one glued to the next, before the engine's
#: `CUDA Error: out of memory at .../cumem_allocator.cpp:62` and a driver traceback cut before its
#: exception line -- a 120-column wrap of the bars leaves the excerpt with no rule at all.
#: corpus36's (23 more, registered 2026-12-02, reported only) one at 120: Rotated-LD's (MMRotate's)
#: one JSON log record of about 230 columns, wrapped in the poster's `**` bold markers, whose
#: `"loss_cls": NaN, ...` keys a 120-column wrap splits across two lines, in an excerpt of one
#: line (no width shown): the wrapped record reads as no metric line at all.
#: corpus37's (22 more, registered 2026-12-02, reported only) one at each width, the same
#: control: RLlib's `Exception ignored in: <function RolloutWorker.__del__ ...>` after the
#: poster's `ALL DONE`, whose one frame line (about 125 columns) either wrap breaks, so that the
#: `TypeError` at interpreter exit no longer reads as ignored and fires component_failed.
#: corpus38's (31 more, registered 2026-12-02, reported only) one at 120: ssbuild's
#: chatglm_finetuning Lightning bar at `loss=nan` with DeepSpeed's `Using ... as PyTorch
#: extensions root...` glued after it (a line of about 165 columns), then a traceback from
#: trainer.fit that the store cut before its exception line -- wrapped at 120, the excerpt no
#: longer fires component_failed, only non_finite_metric.
#: corpus36's Ray excerpt since the catalogue reads Ray's 0.7-1.0 node-dead line (923a47a): one
#: at each width, its one line of about 150 columns (`The node with client ID ... has been
#: marked dead because the monitor has missed too many heartbeats from it.`), alone in the
#: excerpt (no width shown), cut by either wrap before the words the signature reads.
#: corpus41's (registered 2026-12-02, reported only) three at 80 and two at 120, as its
#: collector measured them: a vllm-ascend engine's stats and shm_broadcast lines that the poster's
#: paste wrapped already, a Ray worker's colour-coded `Error executing method` line, and a vLLM
#: worker's self-attention traceback whose exception line a wrap at 80 cuts. Since a padded
#: terminal shows its width: corpus40's prime-rl traceback (read since) at 80 -- its frames
#: padded to 107 columns, cut at 80 into pieces a reader no longer joins. corpus43's HCCL
#: link-setup line (read since the same session), about 190 columns, whose `rank[12]
#: timeout[120]` a wrap at 80 puts on a piece of its own: one more at 80. corpus44's TRL
#: `vllm-serve` client line (`The client socket has timed out after 300000ms while trying to
#: connect`, about 170 columns, its milliseconds on the next piece at 80) and corpus47's
#: MARLlib Tune table (rows of about 200 columns: wrapped at 80 its `nan` cells fall out of
#: their columns, so the control's false alert goes): two more at 80. Since a markdown quote's
#: marks are a paste's margin (the twenty-fourth session): corpus29's Trinity-RFT traceback,
#: quoted and its records glued two to a line as posted, read at 120 -- the wrap splits the
#: glued records, and its label's component_failed fires: one more at 120, the other way.
#: Since torch's excepthook head glued after a bar is read (the twenty-fifth session):
#: corpus15's Unsloth console, whose last line -- a bar of about 150 columns, then
#: `[rank0]: Traceback (most recent call last):` -- either wrap splits before the head: one more
#: at each width.
#: corpus55's (30 more, asserted since the twenty-seventh session) one at 120: YOLOv8's older
#: torch `RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(...)` of 183
#: columns, which a 120-column wrap cuts inside `Timeout(ms)` -- after it only frames of its own
#: width or less, so nothing shows the cut was a wrap: the exception line alone fires
#: component_failed, the timeout is lost. corpus56's (30 more, asserted at arrival) one at 120:
#: ms-swift's bar glued to torch elastic's `Received 1 death signal, shutting down workers` (158
#: columns), which the wrap cuts inside the words the catalogue reads, in an excerpt of bars of
#: 99 columns (no width shown). Since rich's traceback panel is read by its frames (the
#: twenty-eighth session): corpus17's DeepDeWedge panel, drawn 80 columns wide and cut in its
#: frames, read unwrapped; a wrap at 80 splits the frame lines its padding made longer, so none
#: is a frame: one more at 80. Since the catalogue reads FastDeploy's `Failed to launch worker
#: processes, check log/workerlog` (the twenty-ninth session): corpus59's one line of 127
#: columns, which a wrap at 80 cuts inside `worker`: one more at 80. corpus61's (27 more,
#: asserted at arrival) lighteval panel behind `[rank0]:`, cut in its frames before the locals:
#: its lines are 109 columns but some 300 bytes of box-drawing characters, which either wrap
#: (of bytes) cuts into pieces none of which is a frame: one more at 120 (the count at 80 is
#: still within its bound).
LOST = {80: 45, 120: 48}


@pytest.mark.slow  # (every development excerpt, twice: `make test`, not the unit loop)
@pytest.mark.parametrize("width", sorted(LOST))
def test_a_hard_wrapped_console_reads_as_it_was_written(width: int) -> None:
    changed = [
        f"{corpus}/{ident}"
        for corpus in CORPORA
        for ident in tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text())
        if _fired(path := CONSOLES / corpus / "dev" / f"{ident}.log", 0) != _fired(path, width)
    ]
    assert len(changed) <= LOST[width], changed


# --- runwatch watch: the same reading of a command's output, as it comes ------------------

#: a paste a terminal wrapped at its width, the collective's timeout cut over four lines
#: (corpus26's development excerpt, from torchtune#2651)
PASTED_ID = "torchtune_llama4_lora_save_dump_signal_local_rank_wrapped_at_terminal_width"
PASTED = CONSOLES / "corpus26" / "dev" / f"{PASTED_ID}.log"


def _dev_excerpts() -> Iterator[Path]:
    for corpus in CORPORA:
        for ident in tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text()):
            yield CONSOLES / corpus / "dev" / f"{ident}.log"


def _given(data: bytes, size: int) -> list[str]:
    """The lines `runwatch watch` scans of `data`, read `size` bytes at a time: its margin
    taken off, then its wraps joined (`watch.OutputReader`)."""
    margin, unwrapper = OutputMargin(), OutputUnwrapper()
    out = b"".join(
        unwrapper.feed(margin.feed(data[i : i + size])) for i in range(0, len(data), size)
    )
    out += unwrapper.feed(margin.finish())
    lines = (out + unwrapper.finish()).decode("utf-8", "replace").split("\n")
    return [line.rstrip("\r") for line in (lines[:-1] if lines[-1] == "" else lines)]


def test_watch_reads_a_pasted_console_s_wraps_as_diagnose_does(tmp_path: Path) -> None:
    """The paste through watch's pump, from a pipe: the timeout its wrapped line states is
    read, as diagnose reads it (issue 41 item 5: the two commands agree on one log)."""
    em = Emitter(run="r", component="trainer", path=tmp_path / "spool", heartbeat=False)
    watcher = Watcher(em, LineParser(), progress_every=0.0)
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    data = b"".join(line for _, line in excerpt_lines(PASTED))
    os.write(src_w, data)
    os.close(src_w)
    watcher.pump({src_r: out_w})
    os.close(out_w)
    assert os.read(out_r, 1 << 16) == data  # (copied through as it came, wraps and all)
    for fd in (src_r, out_r):
        os.close(fd)
    em.close()
    timeouts = [e for e in read_events(tmp_path / "spool") if e["kind"] == "collective.timeout"]
    assert [(e["rank"], e["last_enqueued"]) for e in timeouts] == [(7, 9387)]
    assert {a.rule for a in diagnose([PASTED], day=DAY, lines=excerpt_lines).alerts} == {
        "collective_timeout"
    }


def test_watch_joins_every_development_excerpt_as_diagnose_does() -> None:
    """Every development excerpt, read by watch a pipe's 4 KiB at a time, gives the lines
    diagnose's reading of the file gives: the same width, the same joins (32 of them have a
    width)."""
    differ, wide = [], 0
    for path in _dev_excerpts():
        raw = list(excerpt_lines(path))
        lines = ((n, line.decode("utf-8", "replace").rstrip("\r\n")) for n, line in raw)
        read = [line for _, line in unwrapped(lines)]
        data = b"".join(line for _, line in raw)
        wide += len(read) < len(raw)
        if _given(data, 4096) != read:
            differ.append(path.stem)
    assert differ == []
    assert wide >= 30


def test_a_paste_s_margin_is_taken_off_as_watch_and_diagnose_read_it() -> None:
    """Every development excerpt pasted indented -- four spaces, a tab -- before each line
    (inside a list item), or quoted in markdown (`> `, its empty lines `>`: a reply quoting
    another's console), is read by diagnose as the excerpt itself, and by watch a pipe's 4
    KiB at a time as diagnose reads it: traceback frames, source lines and exception lines
    keep the indentation that tells them apart."""
    differ = []
    for path in _dev_excerpts():
        raw = [line for _, line in excerpt_lines(path)]
        plain = [line.decode("utf-8", "replace").rstrip("\r\n") for line in raw]
        if not any(line.strip() and not line.startswith((" ", "\t", ">")) for line in plain):
            continue  # (an excerpt indented or quoted already: its own margin is taken off too)
        if sum(1 for line in plain if line.strip()) < 2:
            continue  # (one line shows no margin: it may be its own indentation)
        read = [line for _, line in unwrapped(enumerate(plain))]
        indent = "\t" if path.stem.startswith("c") else "    "
        # (a quote's empty line is empty however it was blank: a tab in it is no line's)
        quoted = [line if line.strip() else "" for line in read]
        for pasted, expected in (
            ([indent + line if line.strip() else line for line in plain], read),
            (["> " + line if line.strip() else ">" for line in plain], quoted),
        ):
            if [line for _, line in unwrapped(enumerate(pasted))] != expected:
                differ.append(("diagnose", pasted[0][:1], path.stem))
            if _given("\n".join(pasted).encode() + b"\n", 4096) != expected:
                differ.append(("watch", pasted[0][:1], path.stem))
    assert differ == []


def _margined(lines: list[str]) -> list[str]:
    margin = Margin()
    out = [line for n, text in enumerate(lines) for _, line in margin.feed(n, text)]
    return out + [line for _, line in margin.flush()]


def test_a_margin_is_what_every_line_so_far_began_with_once_two_show_it() -> None:
    assert _margined(["    a", "", "      b", "  c", "d", "  e"]) == [
        "a", "", "  b", "c", "d", "  e"]  # fmt: skip
    # (a markdown quote's marks, nested ones and its empty lines too)
    assert _margined(["> > a", ">", "> >   b", "> > c", "d"]) == ["a", "", "  b", "c", "d"]
    # (one indented line is its own -- a prompt's, a frame's -- till a second shows a margin)
    assert _margined([" $ mpirun -np 4 ./bt", "mpirun noticed that process rank 0"]) == [
        " $ mpirun -np 4 ./bt", "mpirun noticed that process rank 0"]  # fmt: skip
    assert _margined(['  File "x.py", line 3, in f']) == ['  File "x.py", line 3, in f']
    # (a live job's first line is its own: its output passes as it comes, bytes untouched)
    output = OutputMargin()
    assert output.feed(b"step 1 \xff\n  indented\n") == b"step 1 \xff\n  indented\n"
    assert output.margin.off


def test_a_bar_that_starts_indented_is_given_as_it_refreshes() -> None:
    """tqdm's own bar starts `  0%|` and refreshes with `\\r`, never a line end: the margin
    gives it up at once, as `Margin` gives a line with a `\\r` up, and the refreshes pass as
    they come -- none held for the next line end (a reviewer's case: no progress while the job
    ran, and the held bytes read again at every refresh)."""
    margin = OutputMargin()
    first = b"  0%|          | 0/80 [00:00<?, ?it/s]"
    assert margin.feed(first) == b""  # (one indented piece: a paste's margin or not, unknown)
    refresh = b"\r 12%|#         | 10/80 [00:01<00:07, 10.00it/s]"
    assert margin.feed(refresh) == first + refresh
    assert margin.margin.off
    assert margin.feed(refresh) == refresh
    assert _margined([first.decode() + refresh.decode(), "  next"]) == [
        first.decode() + refresh.decode(), "  next"]  # fmt: skip


def test_a_live_job_s_output_is_given_at_once() -> None:
    """Where the output shows no width, a line is scanned when it ends and a bar's refresh
    as it comes -- nothing waits on the unwrapper -- and after the sample, the bytes pass
    unlooked at."""
    unwrapper = OutputUnwrapper()
    assert unwrapper.feed(b"step:1 - reward:0.5\n") == b"step:1 - reward:0.5\n"
    bar = b"\rTraining:  50%|#####     | 1/2"
    assert unwrapper.feed(bar) == bar
    line = b"2026-03-14 16:41:00,123 INFO worker.py:1 rollout 1: generated 512 tokens\n"
    assert unwrapper.feed(line * 20_000) == line * 20_000
    assert unwrapper.through


def test_widths_learned_in_batches_are_the_file_s() -> None:
    text = ["INFO starting", *_cut(WATCHDOG, 85), "x", *_cut(WATCHDOG.replace("86", "87"), 85)]
    for size in (1, 2, 3, 5):
        widths = Widths()
        for i in range(0, len(text), size):
            widths.saw(text[i : i + size])
        assert widths.width == terminal_width(text) == 85


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
# (a pause inside a line less indented than the margin two lines showed: cut as the line is)
@example(lines=["  y", "  y", _cut(WATCHDOG, 85)[0]], cuts=[12], pauses=[True])
@given(
    st.lists(st.sampled_from([*_cut(WATCHDOG, 85), "INFO x", "  y", "z" * 85, "\r50%|#", ""]),
             max_size=20),
    st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=10),
    st.lists(st.booleans(), min_size=1, max_size=10),
)  # fmt: skip
def test_whatever_the_reads_and_pauses_no_byte_is_lost_or_doubled(
    lines: list[str], cuts: list[int], pauses: list[bool]
) -> None:
    """Only line ends between a wrapped line's pieces are taken out -- and a paste's margin,
    as `Margin` takes it off line by line, or none where the output paused before a second
    line showed it."""
    for indent in ("", "  "):
        text = [indent + line for line in lines]
        data = "\n".join(text).encode()
        margin, unwrapper = OutputMargin(), OutputUnwrapper()
        out, pos, k = b"", 0, 0
        while pos < len(data):
            size = cuts[k % len(cuts)]
            out += unwrapper.feed(margin.feed(data[pos : pos + size]))
            if pauses[k % len(pauses)]:
                out += unwrapper.feed(margin.pause()) + unwrapper.pause()
            pos, k = pos + size, k + 1
        out += unwrapper.feed(margin.finish()) + unwrapper.finish()
        # (a pause before a second line showed the margin gives it up: the lines as they are)
        assert out.replace(b"\n", b"") in (
            "".join(_margined(text)).encode(),
            "".join(text).encode(),
        )


def test_step_lines_of_one_length_are_each_a_step(tmp_path: Path) -> None:
    """Six verl step lines at reward 0, as long as each other: six steps, and zero_reward --
    joined as one wrapped line they were one step (the unwrapper compared their starts with
    the step number in them)."""
    log = tmp_path / "verl.log"
    log.write_text("".join(
        f"step:{n} - actor/pg_loss:0.000 - critic/score/mean:0.000 - critic/rewards/mean:0.000"
        " - response_length/mean:512.0\n" for n in range(1, 7)))  # fmt: skip
    found = diagnose([log])
    assert [e.fields["step"] for e in found.events if e.kind == "reward"] == [1, 2, 3, 4, 5, 6]
    assert [a.rule for a in found.alerts if a.state == "firing"] == ["zero_reward"]


def test_a_wrapped_array_s_pieces_are_joined_though_they_start_alike() -> None:
    """An array of numbers cut at the terminal's width: its pieces start alike once their
    digits are left out (`0 0.0 `), but numbers alone say no format -- they are one line's
    pieces, joined again (the same-start test is for starts with a word in them)."""
    values = " ".join(f"0.{n:04d}" for n in range(1000, 1060))
    array = f"[{values} nan]"
    lines = []
    for step in range(1, 4):
        lines += [f"step {step} per-sample rewards:"]
        lines += [array[i : i + 80] for i in range(0, len(array), 80)]
    assert [line for _, line in unwrapped(enumerate(lines, 1))] == [
        text for step in range(1, 4) for text in (f"step {step} per-sample rewards:", array)
    ]


def test_a_line_that_starts_as_a_header_the_console_shows_on_its_own_is_no_piece() -> None:
    """A console whose other lines show the terminal's width (cut mid-word), and one record as
    long as that width followed by the header of the next record: the header is seen after a
    short line first (`Iter[1/20]` after the options), so it is a line of its own here too."""
    long = "the run's options: " + ", ".join(
        f"{word}={n}"
        for n, word in enumerate(
            [
                "lr",
                "batch",
                "warmup",
                "decay",
                "beta",
                "gamma",
                "clip",
                "seed",
                "steps",
                "epochs",
                "workers",
                "rollout",
            ]
            * 2
        )
    )
    wrapped = [long[i : i + 80] for i in range(0, len(long), 80)]
    record = "Lrec: 0.219, Ldadv: 0.991, Ldesty: -10.377, Lsadv: 8.586, Lsty: 1068.036 ok"
    record += "." * (80 - len(record))
    lines = [*wrapped, *wrapped, "options: done", "Iter[1/20], Epoch [1/1]", record,
             "Iter[2/20], Epoch [1/1]"]  # fmt: skip
    assert terminal_width(lines) == 80
    out = [line for _, line in unwrapped(enumerate(lines, 1))]
    assert out == [long, long, "options: done", "Iter[1/20], Epoch [1/1]", record,
                   "Iter[2/20], Epoch [1/1]"]  # fmt: skip

"""Why lines that looked like failures or metrics gave no event (`LineParser.notes`): what
`runwatch diagnose` shows a user whose console it cannot place, so they can report it -- and,
in `runwatch watch`, which never takes them, a bounded list, not a leak."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.diagnose import UNKNOWN_ERROR, UNKNOWN_WAIT, diagnose, looks_like
from runwatch.emitters.console import LineParser
from runwatch.emitters.logparse import NOTES_KEPT
from runwatch.emitters.stalls import SHM_BEFORE_SERVING

#: written for this test: an error in no framework's words, a death in words, and lines that
#: read like neither
CONSOLE = (
    "starting job\n"
    "ERROR something bad happened in the frobnicator\n"
    "worker 3 crashed, see its log\n"
    "an errorless line about errors_total\n"
)


def test_diagnose_names_the_lines_that_read_like_errors_it_could_not_place(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    log.write_text(CONSOLE)
    found = diagnose([log])
    assert found.events == []
    assert found.alerts == []
    noted = {where: text for where, why, text in found.notes if "reads like an error" in why}
    assert noted == {
        "job.log:2": "ERROR something bad happened in the frobnicator",
        "job.log:3": "worker 3 crashed, see its log",
    }


def test_an_error_line_a_traceback_follows_is_the_traceback_s_to_explain(tmp_path: Path) -> None:
    """A record logged at ERROR with its traceback after it: the traceback is read (here the
    process's death), the record gets no note of its own."""
    log = tmp_path / "job.log"
    log.write_text(
        "2025-06-01 10:00:05,000 ERROR train.py:120 -- step failed\n"
        "Traceback (most recent call last):\n"
        '  File "/app/train.py", line 40, in main\n'
        "    step()\n"
        '  File "/app/train.py", line 90, in step\n'
        "    check(batch)\n"
        "ValueError: bad batch\n"
    )
    found = diagnose([log])
    assert [e.kind for e in found.events] == ["component.failed"]
    assert found.notes == []


def test_a_report_held_pending_is_read_and_a_restart_that_takes_it_back_says_so(
    tmp_path: Path,
) -> None:
    """A pod's `Error` row is a report held until the console says more: read, so no "reads
    like an error" note; the later row of the pod running ready says why no failure came."""
    log = tmp_path / "pods.log"
    log.write_text(
        "NAME                 READY   STATUS    RESTARTS   AGE\n"
        "job-launcher-mkjgm   0/1     Error     0          5s\n"
        "job-worker-0         1/1     Running   0          6s\n"
        "job-launcher-mkjgm   1/1     Running   1 (9s ago) 20s\n"
    )
    found = diagnose([log])
    assert found.alerts == []
    assert [(where, why.split(":")[0]) for where, why, _ in found.notes] == [
        ("pods.log:4", "pod job-launcher-mkjgm runs again with every container ready")
    ]


def test_a_line_a_reader_placed_or_explained_gets_no_second_note() -> None:
    """A value the metric readers saw and said why they held is theirs to explain; a read
    failure (the catalogue's) is an event, no note."""
    parser = LineParser()
    parser.read("ERROR loss: nan")
    (why,) = parser.notes()
    assert "the line's only number" in why
    _, found = parser.read("ray.exceptions.ActorDiedError: The actor died unexpectedly before "
                           "finishing this task.")  # fmt: skip
    assert found
    assert parser.notes() == []


def test_a_parser_no_one_takes_notes_from_keeps_the_latest_few() -> None:
    """`runwatch watch` reads for weeks and never asks why: the notes stay bounded."""
    parser = LineParser()
    for k in range(10 * NOTES_KEPT):
        parser.read(f"ERROR line {k} in no framework's words")
        parser.read(f"ERROR loss_{k}: nan")
    notes = parser.notes()
    assert len(notes) <= 3 * NOTES_KEPT
    assert any(f"`loss_{10 * NOTES_KEPT - 1}`" in why for why in notes)  # the latest kept


def test_a_wait_line_after_an_error_line_does_not_hide_it(tmp_path: Path) -> None:
    """Only a traceback (or a reader's own line) explains an error-like line: a wait line after
    it, which the waits reader follows, does not."""
    log = tmp_path / "job.log"
    log.write_text("ERROR reward server died unexpectedly\nwaiting for the reward server\n")
    noted = [where for where, why, _ in diagnose([log]).notes if "reads like an error" in why]
    assert noted == ["job.log:1"]


def test_a_console_that_ends_inside_a_wait_too_short_to_be_a_stall_says_what_it_lacks(
    tmp_path: Path,
) -> None:
    """A wait the console ends inside, shown lasting less than a stall's evidence (the
    grammar's minute, a catalogue entry's `lasted`): the note says what was shown and what it
    would take. A wait that progress ended says nothing."""
    waiting = (
        "[2024-01-01 10:00:00] Waiting for the trainer to connect...\n"
        "[2024-01-01 10:00:20] Waiting for the trainer to connect...\n"
    )
    log = tmp_path / "job.log"
    log.write_text(waiting)
    found = diagnose([log])
    assert found.alerts == []
    assert [(where, why) for where, why, _ in found.notes] == [
        ("job.log:2", "the console ends inside a wait ('Waiting for the trainer to connect..'), "
         "shown lasting 20 s over 2 lines: a stall once shown lasting 60 s, or said 5 times "
         "by lines without a clock"),
    ]  # fmt: skip
    ray = tmp_path / "ray.log"
    ray.write_text(
        "(autoscaler +2m17s) Warning: The following resource request cannot be scheduled right"
        " now: {'CPU': 1.0, 'GPU': 1.0}. This is likely due to all cluster resources being"
        " claimed by actors. Consider creating fewer actors or adding more nodes to this Ray"
        " cluster.\n"
    )
    whys = [why for _, why, _ in diagnose([ray]).notes]
    assert whys == [
        "the console ends inside a wait the catalogue declares (ray-autoscaler-request-pending-"
        "cluster-full, emitters/waits.toml), shown lasting 0 s: a stall once shown lasting 60 s"
    ]
    went_on = tmp_path / "went_on.log"
    went_on.write_text(waiting + "[2024-01-01 10:00:30] trainer connected, starting step 1\n")
    assert diagnose([went_on]).notes == []


def test_the_wait_note_counts_lines_and_gives_way_to_a_framework_s_wait(tmp_path: Path) -> None:
    """A retry line that counts its attempts is one line shown (its count is the wait's
    evidence, not lines); a framework's wait after the grammar's decides, and no note is
    given for the one before it."""
    retry = tmp_path / "retry.log"
    retry.write_text("Connecting to the store at 10.0.0.1:29500... retrying (attempt 3/60)\n")
    (why,) = [why for _, why, _ in diagnose([retry]).notes]
    assert "over" not in why  # (one line: no count of lines)
    horovod = tmp_path / "horovod.log"
    horovod.write_text(
        "[2024-01-01 10:00:00] Waiting for the trainer to connect...\n"
        "[2024-01-01 10:00:20] Waiting for the trainer to connect...\n"
        "[2024-01-01 10:00:21.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
        "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
        "waiting for remainder of ranks for more than 60 seconds.\n"
        "Missing ranks:\n1: [allreduce.x]\n"
    )
    found = diagnose([horovod])
    assert [a.rule for a in found.alerts if a.state == "firing"] == ["ranks_stalled"]
    assert found.notes == []


def _noted(log: Path) -> list[tuple[str, str]]:
    return [(where, why) for where, why, _ in diagnose([log]).notes]


def test_errors_in_words_and_repeats_are_noted_once_counts_and_settings_not(
    tmp_path: Path,
) -> None:
    """An error in lower case, an OOM or a timeout in words is noted like a logger's ERROR; the
    same line again with other numbers is one note; a count or a setting named after errors is
    none. The first three lines are verl's and SGLang's as a user posted them
    (sgl-project/sglang#14092, corpus53's excerpt), after `runwatch diagnose` said "nothing
    runwatch reads" and not why."""
    log = tmp_path / "job.log"
    log.write_text(
        "(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of "
        "memory)  file=csrc/utils.h func=cu_mem_create line=194\n"
        "(WorkerDict pid=209740) WARNING:2025-11-28 16:00:45,396:Async request to "
        "resume_memory_occupation timed out (attempt 1)\n"
        "(WorkerDict pid=209740) WARNING:2025-11-28 16:01:48,395:Async request to "
        "resume_memory_occupation timed out (attempt 2) [repeated 4x across cluster]\n"
        "eval: error=0 errors_total=0 failures: 0 timeout=1800\n"
        "the sampler is done\n"
    )
    assert _noted(log) == [("job.log:1", UNKNOWN_ERROR), ("job.log:2", UNKNOWN_ERROR)]


def test_a_hang_or_a_wait_no_reader_took_is_noted_and_a_queue_wait_before_serving_says_why(
    tmp_path: Path,
) -> None:
    """`ray status`'s demands a placement group waits on (corpus26's excerpt, ray-project/ray
    "stuck in pending") are a wait no reader takes: noted as one; its `(no pending nodes)`
    and its heading are none. vLLM's shared-memory queue before the engine served is a wait
    the reader knows and does not count: the note says why, once for all its lines
    (corpus18's excerpt)."""
    status = tmp_path / "status.log"
    status.write_text(
        "Pending:\n (no pending nodes)\nDemands:\n"
        " {'CPU': 2.0} * 1 (SPREAD): 1+ pending placement groups\n"
    )
    assert _noted(status) == [("status.log:4", UNKNOWN_WAIT)]
    vllm = tmp_path / "vllm.log"
    line = (
        "INFO 08-13 11:{m}:02 [shm_broadcast.py:802] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing "
        "some time-consuming work (e.g. compilation, weight/kv cache quantization).\n"
    )
    vllm.write_text("".join(line.format(m=m) for m in range(27, 32)))
    assert _noted(vllm) == [("vllm.log:1", SHM_BEFORE_SERVING)]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("2024-01-01 10:00:00 ERROR the reward server went away", UNKNOWN_ERROR),
        ("[FATAL] cannot continue", UNKNOWN_ERROR),
        ("CRITICAL: worker lost", UNKNOWN_ERROR),
        ("RayChannelTimeoutError: no reply", UNKNOWN_ERROR),
        ("Exception in thread Thread-3 (_loop_forever):", UNKNOWN_ERROR),
        ("worker 3 died", UNKNOWN_ERROR),
        ("rank 2 was killed by the OOM killer", UNKNOWN_ERROR),
        ("the sandbox crashed", UNKNOWN_ERROR),
        ("Segmentation fault (core dumped)", UNKNOWN_ERROR),
        ("the sandbox segfaulted: segfault at 0", UNKNOWN_ERROR),
        ("bash: line 1: 123 core dumped python train.py", UNKNOWN_ERROR),
        ("Aborted", UNKNOWN_ERROR),
        ("Fatal error in the reward worker", UNKNOWN_ERROR),
        ("request timed out after 600 s", UNKNOWN_ERROR),
        ("CUresult error: 2 (out of memory)", UNKNOWN_ERROR),
        ("the server is unresponsive", UNKNOWN_ERROR),
        ("reward model not responding", UNKNOWN_ERROR),
        ("Failed to update the weights", UNKNOWN_ERROR),
        ("rank 3 failed.", UNKNOWN_ERROR),
        ("update failure on rank 1", UNKNOWN_ERROR),
        (
            "hai-a100-3:376586:377443 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed",
            UNKNOWN_ERROR,
        ),
        ("the job hangs at step 20", UNKNOWN_WAIT),
        ("training is hanging after the eval", UNKNOWN_WAIT),
        ("training hung after the eval", UNKNOWN_WAIT),
        ("rollout stuck on one trajectory", UNKNOWN_WAIT),
        ("the job is stuck.", UNKNOWN_WAIT),
        ("the engine stalled", UNKNOWN_WAIT),
        ("the pipeline stalls", UNKNOWN_WAIT),
        ("the two ranks deadlocked", UNKNOWN_WAIT),
        ("pod group is unschedulable", UNKNOWN_WAIT),
        ("the task cannot be scheduled", UNKNOWN_WAIT),
        ("worker 2 is not ready", UNKNOWN_WAIT),
        ("worker 2 is not yet ready", UNKNOWN_WAIT),
        ("No available node for the actor", UNKNOWN_WAIT),
        (" {'GPU': 1.0} * 1 (PACK): 2+ pending placement groups", UNKNOWN_WAIT),
        ("eval: error=0 errors_total=0 failures: 0 timeout=1800", None),
        ("Failed requests:                         0", None),
        ("Error: 0", None),
        ("frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x80", None),
        ("raise ValueError(msg)", None),
        (
            "ip-1:14605:14673 [0] misc/ibvwrap.cc:63 NCCL INFO Failed to open libibverbs.so[.1]",
            None,
        ),
        ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [::1]:55121", None),
        ("see error.log", None),
        ("Using frozen text encoder", None),
        (
            "huggingface/tokenizers: The current process just got forked, after parallelism has "
            "already been used. Disabling parallelism to avoid deadlocks...",
            None,
        ),
        ("Pending async checkpoint saves. Finalizing them synchronously now", None),
        ("Trial status: 1 RUNNING | 7 PENDING", None),
        (" (no pending nodes)", None),
        ("Stuck:", None),
        ("step 20 loss 0.3", None),
    ],
)
def test_each_word_of_an_error_or_a_hang_is_noted_and_counts_and_calm_lines_are_not(
    line: str, why: str | None
) -> None:
    """Each word the notes look for, through the substring test in front of its pattern (a
    word the test leaves out would never reach the pattern): the note's why, or none. A line
    the waits reader took is its to explain, unless it says an error."""
    assert looks_like(line, took_for_a_wait=False) == why
    assert looks_like(line, took_for_a_wait=True) == (why if why == UNKNOWN_ERROR else None)


def test_a_repeat_of_a_line_a_traceback_explained_is_still_noted(tmp_path: Path) -> None:
    """Only a noted line makes its repeats one note: an error line a step explained (a
    reader's line after it) leaves the next, with other numbers, to be noted."""
    log = tmp_path / "job.log"
    log.write_text(
        "ERROR reward server 1 went away\nstep 1 loss 0.5 lr 0.001\nhello\n"
        "ERROR reward server 2 went away\nhello\n"
    )
    assert _noted(log) == [("job.log:4", UNKNOWN_ERROR)]


def test_a_horovod_stall_warning_with_no_rank_named_says_so_at_the_end(tmp_path: Path) -> None:
    """Horovod's stall inspector's warning, quoted in a markdown paste's backticks with its list
    of ranks left out (horovod/horovod#86, corpus57's excerpt): no rank's wait to report, and
    the note says why instead of calling the warning an unknown error; a step after it ends
    the wait and the note."""
    warning = (
        "`WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
        "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This "
        "may indicate that different ranks are trying to submit different tensors or that only "
        "subset of ranks is submitting tensors, which will cause deadlock.` \n"
    )
    log = tmp_path / "hvd.log"
    log.write_text(warning)
    (why,) = [why for _, why, _ in diagnose([log]).notes]
    assert why.startswith("Horovod's stall inspector warned that ranks waited over 60 s")
    went_on = tmp_path / "went_on.log"
    went_on.write_text(warning + "step 2 loss 0.5 lr 0.001\n")
    assert not any("Horovod" in why for _, why, _ in diagnose([went_on]).notes)
    named_before = tmp_path / "named_before.log"  # (a list named rank 1; the next warning none)
    named_before.write_text(warning + "Missing ranks:\n1: [allreduce.x]\n" + warning)
    found = diagnose([named_before])
    assert [a.rule for a in found.alerts if a.state == "firing"] == ["ranks_stalled"]
    assert not any("Horovod" in why for _, why, _ in found.notes)

"""The readers `runwatch watch` and `runwatch diagnose` share, on the shapes real consoles
take: launchers' prefixes, wrapped lines, tracebacks handled or not, printed metric dicts,
OpenRLHF's postfix, and a refresh read once."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import non_finite, read_all, scanned

from runwatch.diagnose import diagnose
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found
from runwatch.emitters.prefixes import launcher_prefix, strip_colour

WATCHDOG = (
    "[rank3]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=4486, OpType=ALLTOALL, NumelIn=46684160, "
    "NumelOut=46684160, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
)


def kinds(found: list[Found]) -> list[str]:
    return [k for k, _ in found]


def only(found: list[Found], kind: str) -> dict[str, Any]:
    (fields,) = [f for k, f in found if k == kind]
    return fields


# --- prefixes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    ["", "(WorkerDict pid=7591) ", "\x1b[36m(WorkerDict pid=7591)\x1b[0m ",
     "[36m(WorkerDict pid=7591)[0m ", "Tue May 20 21:16:06 2025[1,3]<stdout>:",
     "[3]<stderr>:", "Tue May 20 21:16:06 2025[3]<stdout>:", "[2024-08-21 03:38:02] ",
     "[80746] ", "3: ", " 3: ", "P1 3: ", "10.96.202.43: ", "worker-1: ",
     "[pod/trainer-0/main] ", "[pod/trainer-0/main] 2024-05-01T10:00:00.123456789Z ",
     "Dec  2 05:19:57 node-3 python3[1234]: ", "(worker1, rank=1, pid=2277, ip=10.0.0.2) ",
     "(head, rank=0, pid=2277) ", "(task, pid=2277) "],
    ids=["bare", "ray", "ray-colour", "ray-colour-esc-lost", "mpirun", "horovodrun",
         "horovodrun-timestamped", "launcher", "gutter", "srun-label", "srun-label-padded",
         "srun-het-label", "pdsh-address", "pdsh-host", "kubectl-prefix",
         "kubectl-prefix-timestamps", "journal", "skypilot-worker", "skypilot-head",
         "skypilot-task"],
)  # fmt: skip
def test_a_watchdog_line_under_any_prefix(prefix: str) -> None:
    fields = only(read_all([prefix + WATCHDOG]), "collective.timeout")
    assert (fields["rank"], fields["group_rank"], fields["op"], fields["seq"]) == (
        3, 3, "ALLTOALL", 4486)  # fmt: skip
    assert (fields["timeout_s"], fields["ran_s"]) == (600.0, 600.013)


@pytest.mark.parametrize(
    "line",
    ["58:     learn: nan        total: 7m 2s    remaining: 1m 2s",
     " 74: -nan, -nan avg loss, 0.000100 rate, 39.074849 seconds, 1776 images",
     "2: tensor(nan, device='cuda:0', grad_fn=<SumBackward0>)", "step: 100 total_loss: nan",
     "top1: 75.2 top5: 90.1", "epoch: 1, step: 2265, lr: 3.62e-05, loss: 6.23",
     "acc1: tensor(75.2000, device='cuda:0')", "loss2: NaN", "math500: acc=0.45",
     "node107: 76930 2.6496577", "EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out.",
     "run-qwen2.5-7b.sh: line 12: 4321 Killed                  python train.py",
     "python3.11: Error while finding module specification for 'x'"],
    ids=["catboost", "darknet", "enumerated-print", "key", "digit-key", "word-key",
         "digit-key-tensor", "digit-key-nan", "digit-key-pairs", "host-then-columns",
         "cann-error-code", "bash-killed", "python-exec-error"],
)  # fmt: skip
def test_a_program_s_own_numbered_or_keyed_line_is_no_launcher_s_label(line: str) -> None:
    # (srun's `N: ` and pdsh's `HOST: ` begin lines as a program's iteration or key does)
    assert launcher_prefix(line) == (line, None)


def test_srun_s_label_is_the_rank() -> None:
    assert launcher_prefix(" 3: [rank3]:x") == ("x", 3)
    assert launcher_prefix("0: step: 2, loss: 1.20, lr: 1e-5") == (
        "step: 2, loss: 1.20, lr: 1e-5",
        0,
    )
    assert launcher_prefix("11: srun: error: node107: task 0: Out Of Memory") == (
        "srun: error: node107: task 0: Out Of Memory", 11)  # fmt: skip


def test_under_srun_s_labels_a_traceback_its_rank_worked_past_is_handled(tmp_path: Path) -> None:
    """A rank's steps and its traceback under one label, its steps going on after it: the
    traceback was handled, as it is without labels (a reviewer's case: the key-value exclusion
    left the step lines labelled, so rank 0 seemed to stop at its traceback)."""
    lines = [
        "0: step: 1, loss: 1.30, lr: 1e-5", "1: step: 1, loss: 1.31, lr: 1e-5",
        "0: Traceback (most recent call last):",
        '0:   File "/app/reward.py", line 42, in score',
        "0:     resp = requests.post(url, json=payload, timeout=10)",
        "0: requests.exceptions.ConnectionError: HTTPConnectionPool(host='rm', port=8000)",
        *[f"{r}: step: {n}, loss: 1.{20 - n}, lr: 1e-5" for n in (2, 3, 4) for r in (0, 1)],
    ]  # fmt: skip
    path = tmp_path / "srun.log"
    path.write_text("\n".join(lines) + "\n")
    assert [a.rule for a in diagnose([path], day=date(2026, 12, 2)).alerts] == []
    killed = tmp_path / "killed.log"
    killed.write_text(
        "step 1 loss 1.2\nrun-qwen2.5-7b.sh: line 12: 4321 Killed      python train.py\n"
    )
    assert {a.rule for a in diagnose([killed], day=date(2026, 12, 2)).alerts} == {
        "component_failed"
    }


def test_a_colour_code_leaves_a_bracketed_word_that_starts_with_m() -> None:
    # (`[m` is a code only after its ESC: without one it needs a number, `[0m`)
    assert (
        strip_colour("\x1b[0m Broadcast_0 [missing ranks: 0]") == " Broadcast_0 [missing ranks: 0]"
    )
    assert strip_colour("\x1b[32mINFO\x1b[m [metrics] loss=nan") == "INFO [metrics] loss=nan"
    assert strip_colour("[36m(TaskRunner pid=1)[0m x") == "(TaskRunner pid=1) x"


def test_every_torch_release_s_group_status_line() -> None:
    lines = {
        "[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last "
        "completed NCCL work: 158045.": ("1", 158046, 158045),
        "[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: "
        "1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.": ("1", 1580, 1579),
        "[PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence "
        "id: 26 PG status: last enqueued work: 26, last completed work: 126": (
            "0 (default_pg)", 26, 126),
        "[PG ID 1 PG GUID 1 Rank 1] Exception (either an error or timeout) detected by watchdog "
        "at work: 1, last enqueued NCCL work: 547, last completed NCCL work: -1.": ("1", 1, -1),
    }  # fmt: skip
    for line, (pg, seq, done) in lines.items():
        fields = only(read_all([line]), "collective.timeout")
        assert (fields["pg"], fields["seq"], fields["last_completed"]) == (pg, seq, done)


def test_c10d_gloo_and_the_stuck_watchdog() -> None:
    found = read_all([
        "[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to "
        "connect to (172.17.0.2, 44737).",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
        "waiting 1800000ms for recv operation to complete",
        "[PG ID 0 PG GUID 0(default_pg) Rank 7] ProcessGroupNCCL's watchdog got stuck for 480 "
        "seconds without making progress in monitoring enqueued collectives.",
    ])  # fmt: skip
    got = [(f["backend"], f.get("op"), f["timeout_s"]) for k, f in found
           if k == "collective.timeout"]  # fmt: skip
    assert got == [("c10d", "connect", 1800.0), ("gloo", "recv", 1800.0),
                   ("nccl", "watchdog", 480.0)]  # fmt: skip
    # TCPStore's Python `TimeoutError` carries the same message without the C++ log's prefix
    # (AdaFace#87, corpus4/dev)
    bare = read_all(["TimeoutError: The client socket has timed out after 1800s while trying to "
                     "connect to (127.0.0.1, 57388)."])  # fmt: skip
    assert only(bare, "collective.timeout")["timeout_s"] == 1800.0
    # gloo's pair gives up connecting its mesh (dmlcloud#47): no timeout figure in the line
    mesh = read_all([
        "[E108 17:22:04.118509503 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
        "[../third_party/gloo/gloo/transport/tcp/pair.h:301] Connect timeout [none]",
        "requests.exceptions.ConnectTimeout: Connect timeout while fetching the dataset",
    ])  # fmt: skip
    assert [(f["backend"], f.get("op")) for k, f in mesh if k == "collective.timeout"] == [
        ("gloo", "connect")
    ]
    # gloo's transport giving up reading or writing a collective's data (tcp/buffer.cc,
    # pair.cc `GLOO_ERROR_MSG("Read timeout ", peer)`), under JAX's CPU collectives
    # (jax#40831, corpus20/dev) as under torch's ProcessGroupGloo (rendered)
    data = read_all([
        "process 0: second psum_scatter FAILED after 30.0 s: UNKNOWN: Gloo ReduceScatter failed: "
        "[external/xla++third_party_ext+gloo/gloo/transport/tcp/buffer.cc:72] Read timeout "
        "[::1]:38624",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Write timeout "
        "[10.0.0.2]:40112",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
        "peer [10.0.0.2]:40112",
    ])  # fmt: skip
    assert [(f["backend"], f.get("op")) for k, f in data if k == "collective.timeout"] == [
        ("gloo", "recv"), ("gloo", "send")]  # fmt: skip


def test_the_watchdog_s_backtrace_names_its_timeout_without_its_message() -> None:
    """particleflow #390: the c10 backtrace torch's watchdog prints, its message not in the
    paste: the frame right under the error's constructor is `WorkNCCL::checkTimeout`, which
    builds the error only for a timed-out work. The same function deeper in another stack, or
    the watchdog's loop alone, names none."""
    lib = " (0x1554e9e0f8f2 in /lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)"
    frames = [
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96" + lib,
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
        "duration<long, std::ratio<1l, 1000l> > >) + 0x1d2" + lib,
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233" + lib,
    ]  # fmt: skip
    fields = only(read_all(frames), "collective.timeout")
    assert (fields["backend"], fields["op"]) == ("nccl", "watchdog")
    deeper = [frames[0], "frame #1: <unknown function> + 0xe5c6fc" + lib,
              frames[1].replace("#1", "#2"), frames[2].replace("#2", "#3")]  # fmt: skip
    assert kinds(read_all(deeper)) == []
    assert kinds(read_all([frames[0], frames[2]])) == []


def test_torch_s_words_that_some_nccl_operations_failed_are_a_collective_s_failure() -> None:
    """ProcessGroupNCCL's `handleException` logs them before it takes the process down, for an
    NCCL error as for a timeout: alone (the watchdog's line cut from the paste) they are the
    rank's collective failure; after a watchdog line that named the collective they add none."""
    some = ("[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Some NCCL operations have "
            "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
            "operations might run on corrupted/incomplete data.")  # fmt: skip
    fields = only(read_all([some]), "collective.timeout")
    assert (fields["backend"], fields["rank"], fields["group_rank"]) == ("nccl", 1, 1)
    both = [k for k, _ in read_all([WATCHDOG, some]) if k == "collective.timeout"]
    assert len(both) == 1


def test_the_heartbeat_monitor_s_timeout_is_the_watchdog_stuck() -> None:
    """ProcessGroupNCCL's heartbeat monitor (torch 2.3-2.6) kills a process whose watchdog made
    no progress; alone -- the fatal line that says `watchdog got stuck` cut or not yet written
    -- it is the rank's stuck watchdog, in its process group."""
    line = ("[rank6]:[E1019 01:04:03.358023054 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 6] Heartbeat "
            "monitor timed out! Process will be terminated after dumping debug info. "
            "workMetaList_.size()=121")  # fmt: skip
    fields = only(read_all([line]), "collective.timeout")
    assert (fields["op"], fields["pg"], fields["rank"]) == ("watchdog", "3", 6)


def test_init_process_group_s_store_based_barrier_timeout_is_the_store_s() -> None:
    """torch's `_store_based_barrier` (distributed_c10d.py): 1.x raises its RuntimeError with
    `on rank: N ... worker_count=C` (corpus12 dev, a megatron-deepspeed console), 2.x its
    DistStoreError with `on rank N ... num_workers_joined=C` (rendered from the format string);
    the rank raised it, so it is also the rank's failure."""
    old = (
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 7, "
        "for key: store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=0:00:30)"
    )
    new = ("torch.distributed.DistStoreError: Timed out initializing process group in store based "
           "barrier on rank 3, for key: store_based_barrier_key:1 (world_size=32, "
           "num_workers_joined=23, timeout=1 day, 0:30:00)")  # fmt: skip
    got = [only(read_all([line]), "collective.timeout") for line in (old, new)]
    assert [(f["backend"], f["op"], f["rank"], f["timeout_s"]) for f in got] == [
        ("c10d", "store_based_barrier", 7, 30.0),
        ("c10d", "store_based_barrier", 3, 88200.0),
    ]
    assert "component.failed" in kinds(read_all([old]))
    # the barrier's progress log at INFO is no timeout
    waiting = (
        "Waiting in store based barrier to initialize process group for rank: 0, key: "
        "store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)"
    )
    assert "collective.timeout" not in kinds(read_all([waiting]))


def test_some_nccl_operations_failed_with_an_nccl_error_on_its_line_is_no_timeout() -> None:
    """stanford_alpaca#207 (corpus14's development part): ProcessGroupNCCL's `Some NCCL
    operations have failed or timed out` run together on one line with the `what()` of an
    ncclRemoteError: the process's abort, no timed-out collective; alone (the cause cut) it
    stays one."""
    some = ("[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to "
            "the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data.")  # fmt: skip
    what = (" terminate called after throwing an instance of 'std::runtime_error' what(): NCCL "
            "error: remote process exited or there was a network error, NCCL version 2.14.3 "
            "ncclRemoteError: A call failed possibly due to a network error")  # fmt: skip
    assert "collective.timeout" not in kinds(read_all([some + what]))
    assert "component.failed" in kinds(read_all([some + what]))
    assert "collective.timeout" in kinds(read_all([some]))


#: LlamaFactory#6849 (corpus15's development part): rank 5's watchdog after NCCL's proxy failed
LLAMAFACTORY_6849 = [
    "[rank5]:[E207 19:37:09.983540349 ProcessGroupNCCL.cpp:681] [Rank 5] Some NCCL operations "
    "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
    "operations might run on corrupted/incomplete data.",
    "[rank5]:[E207 19:37:09.983555114 ProcessGroupNCCL.cpp:695] [Rank 5] To avoid data "
    "inconsistency, we are taking the entire process down.",
    "[rank5]:[E207 19:37:09.983600771 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 5] Process group watchdog thread terminated with exception: NCCL error: remote "
    "process exited or there was a network error, NCCL version 2.21.5",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process "
    "exiting prematurely.",
]


def test_some_nccl_operations_failed_then_the_watchdog_s_nccl_error_is_no_timeout() -> None:
    """The watchdog's exception a few lines after `Some NCCL operations have failed or timed
    out` says which: an NCCL error (the catalogue's failure), no timed-out collective. With
    those lines cut from the paste, or other lines after it, it stays the rank's timeout."""
    assert "collective.timeout" not in kinds(read_all(LLAMAFACTORY_6849))
    assert "component.failed" in kinds(read_all(LLAMAFACTORY_6849))
    fields = only(read_all(LLAMAFACTORY_6849[:2]), "collective.timeout")
    assert (fields["rank"], fields["group_rank"]) == (5, 5)
    others = [f"[rank5]:step {n} loss 1.0" for n in range(1, 6)]
    assert "collective.timeout" in kinds(read_all([LLAMAFACTORY_6849[0], *others]))
    scanner = LineScanner(LineParser())
    scanned = scanner.feed("\n".join(LLAMAFACTORY_6849).encode() + b"\n") + scanner.finish()
    assert "collective.timeout" not in [k for k, _ in scanned + scanner.parser.finish()]


def test_every_rank_s_some_nccl_operations_failed_waits_for_its_own_watchdog() -> None:
    """Every rank of a job says it at once and its lines interleave with the others': rank 5's
    `Some NCCL operations have failed` waits for rank 5's lines, whichever ranks' come between
    (LlamaFactory#6849's lines, as ranks 0-7 of a torchrun console write them: each rank's
    line, then each rank's next). Before, a second rank's line was a timeout at once, and four
    other ranks' lines gave out the first."""
    some, avoid, watchdog, error = LLAMAFACTORY_6849
    ranks = range(8)

    def each(line: str) -> list[str]:
        return [line.replace("[rank5]", f"[rank{r}]").replace("Rank 5]", f"Rank {r}]")
                for r in ranks]  # fmt: skip

    console = each(some) + each(avoid) + each(watchdog) + [error]
    assert "collective.timeout" not in kinds(read_all(console))
    assert "component.failed" in kinds(read_all(console))
    # the watchdog's lines cut from the paste: every rank stays in its timeout
    cut = read_all(each(some) + each(avoid))
    assert sorted(f["rank"] for k, f in cut if k == "collective.timeout") == list(ranks)


#: the watchdog's status line before it (ProcessGroupNCCL.cpp `watchdogHandler`'s format, torch
#: 2.4 on, rendered for LlamaFactory#6849's rank 5: the thread's paste starts after it)
EITHER_6849 = (
    "[rank5]:[E207 19:37:09.983500000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 5] Exception (either an error or timeout) detected by watchdog at work: 2051, last "
    "enqueued NCCL work: 2051, last completed NCCL work: 2050."
)


def test_the_watchdog_s_either_way_status_waits_for_what_the_watchdog_says() -> None:
    """torch 2.4 on, the watchdog first says a work failed "either" way (an error or a
    timeout), then `Some NCCL operations have failed`, then which: an NCCL error is no timed-out
    collective. Cut before its watchdog's lines it stays the work's timeout, with its status;
    after a line that said a timeout it is that timeout's status, given at once."""
    console = [EITHER_6849, *LLAMAFACTORY_6849]
    assert "collective.timeout" not in kinds(read_all(console))
    assert "component.failed" in kinds(read_all(console))
    cut = only(read_all(console[:3]), "collective.timeout")
    assert (cut["rank"], cut["seq"], cut["last_completed"]) == (5, 2051, 2050)
    named = (
        "[rank5]:[E207 19:37:09.983400000 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=2051, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
    )
    found = [f for k, f in read_all([named, EITHER_6849]) if k == "collective.timeout"]
    assert [f.get("last_completed") for f in found] == [None, 2050]


#: ProcessGroupNCCL's heartbeat monitor taking the dump signal (LlamaFactory#9496, corpus24/dev:
#: the two lines are the whole paste)
DUMP_9496 = (
    "[rank5]:[E1115 16:42:37.909000893 ProcessGroupNCCL.cpp:1753] [PG ID 0 PG GUID 0 Rank 5] "
    "Received a dump signal due to a collective timeout from this local rank and we will try "
    "our best to dump the debug info. Last enqueued NCCL work: 2, last completed NCCL work: 2.This "
    "is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across "
    "ranks, the order of collectives is not same for all ranks or the scheduled collective, for "
    "some reason, didn't run."
)


def test_the_heartbeat_monitor_s_dump_signal_is_a_timeout_unless_an_nccl_error_says_else() -> None:
    """The dump signal's words say a collective timed out, but the watchdog signals it for a
    work's NCCL error too (`dumpOnTimeoutOrEx_`): held to the output's end -- its process ends
    after it -- a timeout of its rank where nothing said an NCCL error, none where any rank's
    line did, before or after it (unless a process's steps went on between: a restarted job's
    own, not one step printed after the error); after
    a watchdog line that named the timed-out work, that work's timeout alone."""
    rank4 = DUMP_9496.replace("[rank5]", "[rank4]").replace("Rank 5]", "Rank 4]")
    for found in (read_all([DUMP_9496, rank4]), scanned([DUMP_9496, rank4])):
        got = [f for k, f in found if k == "collective.timeout"]
        assert sorted(f["rank"] for f in got) == [4, 5]
        assert (got[0]["backend"], got[0]["last_enqueued"], got[0]["last_completed"]) == (
            "nccl", 2, 2)  # fmt: skip
    error = (
        "[rank7]:[E1115 16:42:38.1 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0 Rank 7] Process "
        "group watchdog thread terminated with exception: NCCL error: remote process exited or "
        "there was a network error, NCCL version 2.21.5"
    )
    for console in ([DUMP_9496, *["[rank5]: noise"] * 6, error], [error, DUMP_9496]):
        assert "collective.timeout" not in kinds(read_all(console))
    # the job went on after the error (an elastic restart's steps): a later signal is its own
    steps = [f"step:{n} - actor/pg_loss:0.01 - critic/score/mean:0.5" for n in (1, 2)]
    got = [f for k, f in read_all([error, *steps, DUMP_9496]) if k == "collective.timeout"]
    assert [f["rank"] for f in got] == [5]
    # not the step a process had done when the error came, printed after it (each rank's)
    done = [f"[rank{r}]: step:37 - actor/pg_loss:0.01 - critic/score/mean:0.5" for r in (0, 1)]
    assert "collective.timeout" not in kinds(read_all([error, *done, DUMP_9496]))
    named = WATCHDOG.replace("[rank3]", "[rank5]").replace("[Rank 3]", "[Rank 5]")
    got = [f for k, f in read_all([named, DUMP_9496]) if k == "collective.timeout"]
    assert [f.get("seq") for f in got] == [4486]
    # another rank's signal through the store (` rank N`, torch's own double space)
    other = DUMP_9496.replace("from this local rank", "from  rank 7")
    assert only(read_all([other]), "collective.timeout")["rank"] == 5


def test_a_megabyte_line_with_a_collective_s_marker_is_read_in_one_pass() -> None:
    """A line holding a collective reader's marker and a megabyte of anything else (a printed
    tensor, a store's words over and over): the c10d socket regex once began with `.*?` and
    had another after its op, so a line of `recvBytes` took time cubic in its length (10 kB:
    two minutes; 1 MB: the job's output stalled behind it for good). Nothing is read from
    them; the test's timeout (pytest-timeout, 300 s) stands for "in one pass"."""
    for marker in ("Received a dump signal due to a collective timeout from ", "WorkNCCL("):
        for filler in ("recvBytes ", "x"):
            line = marker + filler * (1_000_000 // len(filler))
            assert kinds(read_all([line])) == []
    socket = "[c10d] recvValue: socket SocketImpl(fd=9) timed out after 300000ms. WorkNCCL("
    assert only(read_all([socket + "x" * 1_000_000]), "collective.timeout")["op"] == "recvValue"


def test_the_file_store_s_wait_timeout_is_the_store_s() -> None:
    """gloo#148 (corpus14's development part): init_process_group over a `file://` init method,
    its frames pasted flush, ending in the FileStore's bare `RuntimeError: Wait timeout`
    (torch/csrc/distributed/c10d/FileStore.cpp): a timed-out rendezvous, and the rank's death;
    the words inside a message are none."""
    lines = [
        "Traceback (most recent call last):",
        'File "/home/simon/anaconda3/lib/python3.6/site-packages/torch/distributed/'
        'distributed_c10d.py", line 283, in init_process_group',
        "_default_pg = ProcessGroupGloo(store, rank, world_size)",
        "RuntimeError: Wait timeout",
    ]
    fields = only(read_all(lines), "collective.timeout")
    assert (fields["backend"], fields["op"]) == ("c10d", "wait")
    assert "component.failed" in kinds(read_all(lines))
    said = "INFO retrying: RuntimeError: Wait timeout reached once, trying again"
    assert "collective.timeout" not in kinds(read_all([said]))


def test_ascend_hccl_timeouts_are_collective_timeouts() -> None:
    """HCCL's (CANN) timeouts as torch_npu, vllm-ascend and lmdeploy print them: a collective's
    Notify wait (EI0002, its op leading the task's tag), a peer's socket (EI0006), the device's
    fftsplus task timeout with its seconds."""
    notify = (
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 The wait execution of the Notify "
        "register times out. Reason: The Notify register has not received the Notify "
        "record from remote rank: [24]. base information: [streamID:[109], taskID[38], "
        "taskType[Notify Wait], tag[AllReduce_group_name_1654NHRAllReduceComm_device]]. "
        "group information: [group:[group_name_1654], rankSize[32], rankId[25 24]]"
    )
    socket = (
        "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times "
        "out. Reason: Remote Rank did not send the data in time."
    )
    task = (
        "        The error from device(chipId:5, dieId:0), serial number is 17, hccl fftsplus "
        "task timeout occurred during task execution, stream_id:7, sq_id:7, task_id:9865, "
        "stuck notify num:3, timeout:1836.[FUNC:ProcessStarsHcclFftsPlusTimeoutErrorInfo]"
    )
    got = [only(read_all([line]), "collective.timeout") for line in (notify, socket, task)]
    assert [(f["backend"], f["op"]) for f in got] == [
        ("hccl", "AllReduce"),
        ("hccl", "socket"),
        ("hccl", "task"),
    ]
    assert (got[0]["pg"], got[1]["rank"], got[2]["timeout_s"]) == ("group_name_1654", 1, 1836.0)
    # the cause lines of HCCL's report name no timeout of their own
    cause = (
        "        Possible Cause: 1. An exception occurs during the execution on some NPUs in "
        "the cluster. As a result, collective communication operation failed."
    )
    assert kinds(read_all([cause])) == []


def test_a_watchdog_line_a_terminal_wrapped_is_read_whole() -> None:
    cut = [WATCHDOG[:60], WATCHDOG[60:140], WATCHDOG[140:]]
    assert only(read_all(cut), "collective.timeout")["seq"] == 4486
    # the rest of a cut message is the next physical line, whoever wrote the first part
    ray = ["(ActorModelRayActor pid=1, ip=10.0.0.1) " + WATCHDOG[:100], WATCHDOG[100:]]
    fields = only(read_all(ray), "collective.timeout")
    assert (fields["seq"], fields["src"]["host"]) == (4486, "10.0.0.1")
    # a cut message a fresh line follows is read for what it has; the fresh line too
    found = read_all([WATCHDOG[:100], "(TaskRunner pid=9) step:3 - critic/score/mean:0.5"])
    assert kinds(found) == ["step.metrics", "reward"]
    # and one the output ends in
    assert read_all([WATCHDOG[:100]]) == []


def test_a_cut_watchdog_line_s_rest_under_its_prefix_is_its_own_writer_s() -> None:
    """A watchdog line cut under a launcher's prefix takes the next line under the same prefix
    as its rest -- not another rank's or container's line (their numbers are no collector's
    time), nor a traceback torch's excepthook begins under it: that is read on its own."""
    cut = WATCHDOG[:100]  # rank 3's, under `[rank3]:`
    raised = "RuntimeError: CUDA error: an illegal memory access was encountered"
    for rank in (1, 3):
        hook = [f"[rank{rank}]: Traceback (most recent call last):",
                f'[rank{rank}]:   File "train.py", line 10, in <module>',
                f"[rank{rank}]:     loss.backward()", f"[rank{rank}]: {raised}"]  # fmt: skip
        assert only(read_all([cut, *hook]), "component.failed")["error"] == raised
    # the rest of a line split where it was written, a collector's time moved on: joined
    rest = "[rank3]:" + WATCHDOG[100:]
    stamped = ["2024-05-01T10:00:00.123Z " + cut, "2024-05-01T10:00:01.5Z " + rest]
    assert only(read_all(stamped), "collective.timeout")["seq"] == 4486
    compose = ["trainer-1  | " + cut, "trainer-1  | " + rest]
    assert only(read_all(compose), "collective.timeout")["seq"] == 4486
    # another rank's line is no rest of this one's (its number is no collector's time)
    assert only(read_all([cut, f"[rank1]: {raised}"]), "component.failed")["error"] == raised


def test_the_watchdog_thread_s_last_words_wrapped_inside_a_timeout_s_are_the_timeout() -> None:
    """VLM-R1#109 (corpus23/dev), a terminal wrapped at 85 columns: the watchdog thread's
    `terminated with exception: [Rank 2] Watch` ends its line inside the words of a timeout's
    what(); its rest, on the next lines, says the collective timed out -- one timeout, no
    NCCL error's failure beside it. Its last words with an NCCL error stay a failure."""
    lines = [
        "[rank2]:[E303 15:22:17.210116508 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(defaul",
        "t_pg) Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watch",
        "dog caught collective operation timeout: WorkNCCL(SeqNum=3399, OpType=_ALLGATHER_BASE",
        ", NumelIn=8, NumelOut=32, Timeout(ms)=1800000) ran for 1800062 milliseconds before ti",
        "ming out.            ",
    ]
    for found in (read_all(lines), scanned(lines)):
        assert kinds(found) == ["collective.timeout"]
        assert only(found, "collective.timeout")["seq"] == 3399
    error = lines[1][:71] + "NCCL error: unhandled system error, NCCL version 2.21.5"
    after = "Exception raised from checkTimeout at x.cpp:632"
    assert kinds(read_all([lines[0], error, after])) == ["component.failed"]


def test_a_line_under_a_launcher_s_prefix_that_opens_a_bracket_is_no_ray_worker_s() -> None:
    """Ray's prefix is read under a launcher's (`docker compose` around the Ray driver); a
    line of the process's own that opens a bracket keeps the launcher's prefix: its stamp
    (what `runwatch diagnose` places the line by) and the rank it names. A Ray worker's line
    keeps the launcher's prefix outside Ray's too -- a collector's time is the line's time --
    and Ray's alone is taken off."""
    for line in ("[2024-08-21 03:38:02] (a note) loss went up", "[1,3]<stderr>:(0.5, 0.25)"):
        assert LineParser().read(line) == (line, [])
    for lead in ("trainer-1  | ", "2024-05-01T10:00:00.123456789Z "):
        body, found = LineParser().read(f"{lead}(TaskRunner pid=9) step:3 - loss:0.5")
        assert (body, found[0][1]["src"]) == (
            f"{lead}step:3 - loss:0.5",
            {"component": "trainer", "pid": 9},
        )


def test_a_log_level_padded_before_a_bar_is_no_compose_container_s_name() -> None:
    """`docker compose`'s `NAME  | ` is taken off a line; a level a log format pads to the same
    shape (loguru's `{level: <8} | `) is not: a warning's words stay a warning's."""
    said = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB; retrying, smaller batch"
    assert kinds(read_all([f"WARNING  | {said}"])) == []
    assert only(read_all([f"trainer-1  | {said}"]), "component.failed")["error"] == said


#: a dict printed as a table of padded keys, `print(f"{key:<25} | {value.item():.4f}")` (the
#: form of scripts that print torchmetrics' detection scores so, `find_string`), with the
#: scores a DETR fine-tune's evaluation gave (YoraiLevi/Intro-to-Deep-Learning-Final-Project-
#: CS236781, src/training_detr.py): no console of one was found in the corpora's development
#: parts or the issue threads searched; the real compose lines are corpus16's and corpus4's
SCORES = {"map": 0.2897, "map_50": 0.4257, "map_75": 0.3128, "map_medium": -1.0,
          "mar_100": 0.3637}  # fmt: skip
COMPOSED = (
    "vllm-sm120  | (APIServer pid=1) ERROR 06-19 14:45:12 [async_llm.py:704] AsyncLLM "
    "output_handler failed.",
    'eap-llm-server-on-arc  | INFO:     127.0.0.1:48802 - "GET /health HTTP/1.1" 200 OK',
)


def test_a_table_of_padded_keys_is_no_compose_container_s_lines() -> None:
    """`docker compose`'s `NAME  | ` is a container's name before a line of its log; a key a
    table pads to the same shape is followed by its value, one number: its line stays whole,
    so a metric keeps its key and a non-finite one is read at its step -- by `runwatch
    diagnose` and `runwatch watch` alike. The real compose lines are still taken off, and a
    container's table row of several numbers stays its line."""
    from runwatch.emitters.prefixes import launcher_prefix

    for key, value in SCORES.items():
        row = f"{key:<25} | {value:.4f}"
        assert launcher_prefix(row) == (row, None)
    row = "1 | -0.283600 | 13.437500 | 21.810942 | nan | 0"  # (corpus's nan_trl_grpo_notebook_...)
    assert launcher_prefix(f"trainer-1  | {row}") == (row, None)  # a container's table row
    for line in COMPOSED:
        assert launcher_prefix(line)[0] == line.split("  | ", 1)[1]
    table = [f"{k:<12} | {v}" for step, loss in ((101, "0.3"), (102, "nan"))
             for k, v in (("step", step), ("loss", loss), ("reward", "0.5"))]  # fmt: skip
    for found in (read_all(table), scanned(table)):
        metrics = [f for k, f in found if k == "step.metrics"]
        assert [(m["step"], math.isnan(m["metrics"]["loss"])) for m in metrics] == [
            (101, False),
            (102, True),
        ]


def test_ray_prefixes_ipv6_the_same_pid_on_two_nodes_and_prefix_only_lines() -> None:
    line = "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 tokens/s, " \
           "Running: 1 reqs, Waiting: 0 reqs"  # fmt: skip
    a = only(read_all([f"(vLLMHttpServer pid=42, ip=2001:db8::7) {line}"]), "inference.stats")
    b = only(read_all([f"(vLLMHttpServer pid=42, ip=10.0.0.3) {line}"]), "inference.stats")
    assert a["src"]["host"] == "2001:db8::7"
    assert (a["server"], b["server"]) == ("vllm@2001:db8::7/42", "vllm@10.0.0.3/42")
    assert read_all(["(WorkerDict pid=29239)", "(WorkerDict pid=29239) ", "(raylet)"]) == []


def test_wandb_s_end_of_run_summary_is_not_metrics() -> None:
    lines = ["wandb: Run history:", "wandb:   actor/grad_norm ▁▁▃▁█▂▁",
             "wandb: critic/score/mean ▁▃▅▇█", "wandb: Run summary:",
             "wandb:   actor/grad_norm 0.15893", "wandb: critic/score/mean 0.71"]  # fmt: skip
    assert read_all(lines) == []


# --- failures -----------------------------------------------------------------------------

TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
             "    d['teacher_logprobs']", "KeyError: 'teacher_logprobs'"]  # fmt: skip


def test_an_uncaught_traceback_is_a_failure_once_the_output_ends() -> None:
    parser = LineParser()
    assert [f for line in TRACEBACK for f in parser.parse(line)] == []  # pending
    assert parser.finish() == [("component.failed", {
        "error": "KeyError: 'teacher_logprobs'", "how": "exception"})]  # fmt: skip


def test_a_traceback_after_which_the_process_goes_on_was_handled() -> None:
    assert read_all([*TRACEBACK, "step:3 - critic/score/mean:0.5"])[-1][0] == "reward"
    assert "component.failed" not in kinds(
        read_all([*TRACEBACK, "Training Progress:  10%|# | 1/10 [00:01<00:09,  1.00it/s]"])
    )


def test_a_traceback_logged_at_warning_is_no_failure() -> None:
    for head in (["2026-03-14 10:00:00 WARNING reward server hiccup, will retry"],
                 []):  # fmt: skip
        lines = head + (TRACEBACK if head else ["WARNING 03-14 10:00:00 [x.py:1] " + t
                                               for t in TRACEBACK])  # fmt: skip
        assert read_all(lines) == []


def test_a_traceback_after_an_info_record_is_no_record_s_traceback() -> None:
    """An INFO line before a traceback (an access log glued to a bar, a progress line) is the
    program's last word before it died more often than a record logging a handled exception:
    the traceback is uncaught once the output ends with it, chained and cut or not."""
    before = '  97%|#| 1992/2048 [25:29<00:09,  5.76it/s]INFO:     1.2.3.4:80 - "POST /g" 200 OK'
    lines = [before, *TRACEBACK]
    assert only(read_all(lines), "component.failed")["error"] == "KeyError: 'teacher_logprobs'"
    debug = "2021-05-10 18:02:27,651\tDEBUG elastic.py:156 -- Actor status: 2 alive, 0 dead"
    assert kinds(read_all([debug, *TRACEBACK])) == ["component.failed"]


def test_a_traceback_after_another_record_s_warning_that_reaches_the_program_s_top() -> None:
    """The warning on the line before a traceback may be another record's (a launcher's): a
    frame of code that never catches -- runpy's, a console script's in `bin/` -- says the
    exception reached the program's top, even when the chain's last part is cut before its
    exception line. A script's own `<module>` says nothing."""
    before = ("WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'n4' has "
              "failed to shutdown the rendezvous '9987' due to an error of type "
              "RendezvousConnectionError.")  # fmt: skip
    chain = [*TRACEBACK[:1], '  File "/x/areal/controller.py", line 256, in start',
             "    self.wait()", "TimeoutError: Timeout waiting for model_worker/0", "",
             "During handling of the above exception, another exception occurred:", ""]  # fmt: skip
    for top in ('  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
                '  File "/env/bin/torchrun", line 33, in <module>'):  # fmt: skip
        lines = [before, *chain, TRACEBACK[0], top, "    sys.exit(main())"]
        assert only(read_all(lines), "component.failed")["error"].startswith("TimeoutError")
    script = '  File "train.py", line 9, in <module>'
    assert "component.failed" not in kinds(read_all([before, *chain, TRACEBACK[0], script]))


def test_a_logger_s_prefixed_traceback_and_chained_ones() -> None:
    prefix = "ERROR 04-28 02:37:03 [core.py:398] "
    lines = [prefix + "Traceback (most recent call last):", prefix + '  File "x.py", line 1',
             "ERROR 04-28 02:37:04 [core.py:398]     raise ValueError('bad')",
             prefix + "ValueError: bad", prefix,
             prefix + "The above exception was the direct cause of the following exception:",
             prefix + "Traceback (most recent call last):", prefix + '  File "y.py", line 2',
             prefix + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
                      "issue."]  # fmt: skip
    (failed,) = read_all(lines)
    assert failed[1]["error"].startswith("vllm.v1.engine.exceptions.EngineDeadError")


def test_loguru_s_decorated_frames_and_a_fatal_marker() -> None:
    lines = ["21:01:26   ERROR Fatal error in orchestrate", "Traceback (most recent call last):",
             "", '  File "/prime-rl/orchestrator.py", line 837, in main',
             "    asyncio.run(orchestrate(config))", "    │       └ <function run>", "",
             '  File "/prime-rl/orchestrator.py", line 512, in orchestrate',
             '    logprobs = batch["teacher_logprobs"]', "",
             "KeyError: 'teacher_logprobs'"]  # fmt: skip
    found = read_all(lines)
    assert [(f["how"], f["error"]) for _, f in found] == [
        ("fatal", "21:01:26   ERROR Fatal error in orchestrate"),
        ("exception", "KeyError: 'teacher_logprobs'")]  # fmt: skip


def test_fatal_markers_of_the_engines_and_frameworks() -> None:
    markers = [
        "(EngineCore) ERROR [core.py:1138] EngineCore encountered a fatal error.",
        "ERROR 07-31 11:57:33 async_llm_engine.py:658] Engine iteration timed out. This should "
        "never happen!",
        "ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 "
        "died, exit code: -6",
        "[2025-03-22 01:05:30 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error.",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "*** SIGSEGV received at time=1744106512 on cpu 176 ***",
    ]  # fmt: skip
    for line in markers:
        assert [(k, f["how"]) for k, f in read_all([line])][:1] == [
            ("component.failed", "fatal")
        ], line


def test_the_scanner_follows_a_traceback_across_chunks() -> None:
    text = "\n".join(["INFO starting", *TRACEBACK, ""]).encode()
    scanner = LineScanner(LineParser())
    found: list[Found] = []
    for i in range(0, len(text), 7):  # chunks cut anywhere
        found += scanner.feed(text[i : i + 7])
    found += scanner.finish() + scanner.parser.finish()
    assert found == [("component.failed", {"error": "KeyError: 'teacher_logprobs'",
                                           "how": "exception"})]  # fmt: skip


# --- metrics printed ----------------------------------------------------------------------


def test_trl_s_dicts_as_transformers_4_and_5_print_them() -> None:
    found = read_all([
        "{'loss': 0.0, 'grad_norm': 0.0866, 'reward': 1.71, 'reward_std': 0.57, 'epoch': 0.31}",
        "{'loss': '0', 'grad_norm': '0', 'reward': '0', 'reward_std': '0', "
        "'frac_reward_zero_std': '1', 'entropy': '5.593', 'step_time': '2.066', 'epoch': '0.25'}",
        "{'loss': '0.01', 'reward': None, 'epoch': '0.5'}",
        "{'train_runtime': '31.5', 'train_samples_per_second': '2.03', 'train_loss': '0.01'}",
    ])  # fmt: skip
    metrics = [(f["step"], f["metrics"].get("reward")) for k, f in found if k == "step.metrics"]
    assert metrics[:2] == [(1, 1.71), (2, 0.0)]
    assert len(metrics) == 3  # the summary is no step
    rewards = [(f["step"], f["mean"]) for k, f in found if k == "reward"]
    assert rewards[:2] == [(1, 1.71), (2, 0.0)]
    # `None`: TRL had no score for any sample -- reported as a non-finite reward, not skipped
    assert math.isnan(metrics[2][1])
    assert rewards[2][0] == 3
    assert math.isnan(rewards[2][1])


def test_a_dict_after_a_bar_s_refresh_on_its_line() -> None:
    line = ("\r 25%|██▌       | 1/4 [00:02<00:06,  2.07s/it]"
            "{'loss': '0', 'reward': '0.5', 'epoch': '0.25'}")  # fmt: skip
    assert kinds(read_all([line.lstrip("\r")])) == ["progress", "step.metrics", "reward"]


def test_lightning_s_loss_nan_placeholder_beside_a_finite_loss_is_no_metric() -> None:
    """Lightning 1.x's bar writes `loss=nan` when it has no running loss; beside a finite loss
    the program logs (NeMo's `reduced_train_loss`) it is that placeholder, and alone, or
    beside a loss that is NaN too, it is the loss."""

    def bar(n: int, post: str) -> str:
        return f"Epoch 0:   3%|3         | {n}/20101 [2:12:19<76:15:08, 14.05s/it, {post}]"

    found = read_all([bar(565, "loss=nan, v_num=, reduced_train_loss=3.910, gradient_norm=1.010"),
                      bar(566, "loss=nan, v_num=, reduced_train_loss=nan, gradient_norm=1.010"),
                      bar(567, "loss=nan, v_num=1, lr=0.001")])  # fmt: skip
    steps = [(f["step"], f["metrics"]) for k, f in found if k == "step.metrics"]
    assert [s for s, _ in steps] == [565, 566, 567]
    assert "loss" not in steps[0][1]
    assert steps[0][1]["reduced_train_loss"] == 3.91
    assert math.isnan(steps[1][1]["loss"])
    assert math.isnan(steps[2][1]["loss"])


def test_openrlhf_s_postfix_newer_and_older_names() -> None:
    def bar(n: int, post: str) -> str:
        return f"Train epoch [1/1]: {n * 25}%|##  | {n}/4 [00:0{n}<00:03,  1.2it/s, {post}]"

    new = "act_loss=0.00142, reward=0.65, return=0.6, gen_len=512, tot_len=700, kl=0.001"
    old = "pg=0.00142, rm=0, ret=0.6, glen=512, tlen=700, kl=0.001, act_lr=1e-06"
    found = read_all([bar(1, new), bar(4, new), bar(1, old), bar(4, old),
                      bar(2, old.replace("pg=0.00142", "pg=nan"))])  # fmt: skip
    steps = [(f["step"], f["metrics"]) for k, f in found if k == "step.metrics"]
    assert [s for s, _ in steps] == [1, 2, 3]  # a step per bar that ends; NaN at once
    assert steps[0][1]["train/reward"] == 0.65
    assert steps[1][1]["train/policy_loss"] == 0.00142
    assert [(f["step"], f["mean"]) for k, f in found if k == "reward"][:2] == [(1, 0.65), (2, 0.0)]
    assert kinds(found).count("step.done") == 2


def test_a_train_epoch_bar_s_other_keys_are_read_too() -> None:
    """OpenRLHF's reader knows its own postfix names; a key it does not know (a fork's, a
    later version's) is still a metric, and a `Train epoch` bar with none of its names is
    any bar's postfix: the step its count names."""

    def bar(desc: str, post: str) -> str:
        return f"{desc}: 50%|##  | 2/4 [00:02<00:02,  1.0it/s, {post}]"

    mixed = read_all([bar("Train epoch [1/1]", "act_loss=0.1, reward=0.5, policy_entropy=nan")])
    (metrics,) = [f for k, f in mixed if k == "step.metrics"]
    assert metrics["step"] == 1
    assert metrics["metrics"]["train/reward"] == 0.5
    assert math.isnan(metrics["metrics"]["policy_entropy"])
    fork = read_all([bar("Train epoch [1/1]", "policy_loss=nan, kl=0.01")])
    (metrics,) = [f for k, f in fork if k == "step.metrics"]
    assert metrics["step"] == 1
    assert metrics["metrics"]["train/kl"] == 0.01
    assert math.isnan(metrics["metrics"]["policy_loss"])
    bracketed = read_all([bar("Train epoch [1/1]", "policy_loss=nan, value_loss=0.3")])
    (metrics,) = [f for k, f in bracketed if k == "step.metrics"]
    assert metrics["step"] == 2  # (none of OpenRLHF's keys: any bar's, at its count)
    assert math.isnan(metrics["metrics"]["policy_loss"])
    other = read_all([bar("Train epoch", "policy_loss=nan, value_loss=0.3")])
    (metrics,) = [f for k, f in other if k == "step.metrics"]
    assert metrics["step"] == 2
    assert math.isnan(metrics["metrics"]["policy_loss"])


def test_validation_metrics_are_eval_metrics_not_the_step_s() -> None:
    found = read_all(["step:0 - val-core/math/acc/mean@1:0.31 - val-aux/num_turns/min:nan"])
    assert kinds(found) == ["eval.metrics"]


def yolo_table(
    losses: tuple[str, str, str], run: str, bar: str
) -> tuple[str, Callable[[int, float], str]]:
    """YOLOv5's and Ultralytics' epoch table: the `('%11s' * 7)` header, and the maker of a
    row -- the epoch's bar described by `('%11s' * 2 + '%11.4g' * 5)` (`run`: the epochs'
    `/N`, the memory, the targets and the image size, space-separated)."""
    of, mem, targets, size = run.split()
    head = ("%11s" * 7) % ("Epoch", "GPU_mem", *losses, "Instances", "Size")

    def row(epoch: int, loss: float) -> str:
        desc = ("%11s" * 2 + "%11.4g" * 5) % (f"{epoch}{of}", mem, loss, loss, loss,
                                              int(targets), int(size))  # fmt: skip
        return f"{desc}: {bar}"

    return head, row


def test_a_table_aligned_by_padding_and_its_rows_as_a_bar_s_description() -> None:
    """YOLOv5's train.py (ultralytics/yolov5 v7.0): `('%11s' * 7) % ('Epoch', 'GPU_mem',
    'box_loss', ...)` once an epoch, then the epoch's bar described by `('%11s' * 2 + '%11.4g'
    * 5) % (f'{epoch}/{epochs - 1}', mem, *mloss, n_targets, img_size)`: each refresh is a row
    under the header, the epoch its step. Words a single space apart are no header; a row out
    of its columns is none."""
    head, row = yolo_table(("box_loss", "obj_loss", "cls_loss"), "/99 2.64G 4 416",
                           "100%|##########| 7/7 [00:15<00:00,  2.27s/it]")  # fmt: skip
    found = read_all([head, row(0, 0.0512), head, row(1, float("nan"))])
    steps = [(f["step"], f["metrics"]) for k, f in found if k == "step.metrics"]
    assert [s for s, _ in steps] == [0, 1]
    assert steps[0][1]["box_loss"] == 0.0512
    assert math.isnan(steps[1][1]["cls_loss"])
    assert "progress" in kinds(found)  # the refresh is still the bar's
    prose = "Epoch starts now with loading cached labels"
    assert [k for k in kinds(read_all([prose, row(1, float("nan"))])) if k != "progress"] == []
    shifted = " " + row(1, float("nan"))
    assert [k for k in kinds(read_all([head, shifted])) if k != "progress"] == []


def test_a_paste_s_line_numbers_before_an_aligned_table() -> None:
    """ultralytics#19357 (corpus32/dev), as a commenter pasted it: an editor's line number and
    a space before each line (` 516      91/300 ...`). The number is a column of its own, no
    metric and no step; the table's columns are where they were. A row whose first cell is
    no number is out of that table."""
    head, row = yolo_table(("box_loss", "cls_loss", "dfl_loss"), "/300 17G 2 640",
                           "100%|##########| 278/278 [02:11<00:00,  2.11it/s]")  # fmt: skip
    lines = [f" {515 + i} {text}" for i, text in enumerate(
        [head, row(90, 1.757), "", head, row(91, float("nan"))])]  # fmt: skip
    found = read_all(lines)
    steps = [(f["step"], sorted(f["metrics"])) for k, f in found if k == "step.metrics"]
    names = ["Instances", "Size", "box_loss", "cls_loss", "dfl_loss"]
    assert steps == [(90, names), (91, names)]
    assert non_finite(found) == [(91, ["box_loss", "cls_loss", "dfl_loss"])]
    assert non_finite(scanned(lines)) == [(91, ["box_loss", "cls_loss", "dfl_loss"])]
    assert non_finite(read_all([lines[0], "  x " + row(91, float("nan"))])) == []


#: pandas 3.1.1's repr of `pd.DataFrame(trainer.state.log_history)`-like records, as printed
#: (rendered by pandas itself, in a throwaway venv): the index left of the first column,
#: unnamed; names right-aligned over their values; NaN as `NaN`
PANDAS_LOG_HISTORY = [
    "     loss  grad_norm  learning_rate  epoch  step",
    "0  0.6931     1.2345         0.0001   0.01    10",
    "1     NaN        NaN         0.0001   0.02    20",
]


def test_a_printed_data_frame_s_index_is_no_column() -> None:
    found = read_all(PANDAS_LOG_HISTORY)
    steps = [(f["step"], sorted(f["metrics"])) for k, f in found if k == "step.metrics"]
    names = ["epoch", "grad_norm", "learning_rate", "loss"]
    assert steps == [(10, names), (20, names)]
    assert non_finite(found) == [(20, ["grad_norm", "loss"])]


def test_a_notebook_table_copied_as_text_is_a_table_between_tabs() -> None:
    """A notebook's HTML table (TRL's `Step | Training Loss | ...` in Colab) selected and
    pasted as plain text: its cells between tabs, names of several words."""
    lines = ["Step\tTraining Loss\treward\tkl", "1\t0.000000\t0.125000\t0.000000",
             "2\tnan\t0.000000\tnan"]  # fmt: skip
    assert non_finite(read_all(lines)) == [(2, ["Training Loss", "kl"])]


def test_an_aligned_table_whose_names_are_words_one_space_apart() -> None:
    """A script's own table (`f"{'Epoch':>5}  {'Train Loss':>10}  ..."` then rows formatted
    to the same widths): a name of two words is one column, two spaces or more between
    columns; the words of prose with one space between stay no header."""
    widths = (5, 10, 8, 7)
    head = "  ".join(f"{n:>{w}}" for n, w in zip(("Epoch", "Train Loss", "Val Loss", "Val Acc"),
                                                 widths, strict=True))  # fmt: skip

    def row(epoch: int, loss: float) -> str:
        cells = (str(epoch), f"{loss:.4f}", f"{loss:.4f}", "0.1000")
        return "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))

    lines = [head, row(1, 2.31), row(2, float("nan"))]
    assert non_finite(read_all(lines)) == [(2, ["Train Loss", "Val Loss"])]
    assert non_finite(scanned(lines)) == [(2, ["Train Loss", "Val Loss"])]
    prose = "Epoch then Train Loss and Val Loss rose"  # (words a space apart: no columns)
    assert non_finite(read_all([prose, row(2, float("nan"))])) == []


# --- a refresh read when it is written ------------------------------------------------------


def test_peek_reads_an_unfinished_refresh_once_and_changes_no_reader_s_state() -> None:
    scanner = LineScanner(LineParser())
    head = b"\rTrain epoch [1/1]: 100%|####| 4/4 [00:04<00:00,  1.0it/s, act_loss=0.1, reward=1]"
    assert scanner.feed(head) == []
    peeked = scanner.peek()
    assert [(k, f["n"]) for k, f in peeked] == [("progress", 4)]
    assert scanner.peek() == []  # once
    rest = scanner.feed(b"\n")
    # its end gives the refresh no second time; the step its postfix ends, once
    assert kinds(rest) == ["step.metrics", "reward", "step.done", "step.started"]
    assert [f["step"] for k, f in rest if k == "step.metrics"] == [1]


TRL = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "trl"


def test_a_real_grpo_console_whose_reward_raised_names_the_exception() -> None:
    """The traceback follows the bar's last refresh on its line; the bar's repaint at exit
    (the same count) is no sign the process went on."""
    found = diagnose([TRL / "grpo_reward_raises.log"], day=date(2026, 11, 25))
    (alert,) = [a for a in found.alerts if a.state == "firing"]
    assert alert.rule == "component_failed"
    assert "RuntimeError: the reward service answered 500 at step 3" in alert.summary


def test_a_real_grpo_console_with_unscorable_rewards_fires_once_from_that_step() -> None:
    found = diagnose([TRL / "grpo_reward_nan.log"], day=date(2026, 11, 25))
    assert [(a.rule, a.state, a.details["step"]) for a in found.alerts] == [
        ("non_finite_metric", "firing", 4)  # and stays firing: no flapping per step
    ]


def test_a_bar_repainted_at_its_count_after_a_traceback_does_not_cancel_it() -> None:
    bar = "Epoch 1:  25%|██▌       | {n}/8 [00:0{n}<00:03,  1.2it/s]"
    lines = [bar.format(n=1), bar.format(n=2), "Traceback (most recent call last):",
             '  File "train.py", line 9, in <module>', "ValueError: bad batch"]  # fmt: skip
    repainted = read_all([*lines, bar.format(n=2)])  # tqdm closing the bar at exit
    assert only(repainted, "component.failed")["error"] == "ValueError: bad batch"
    went_on = read_all([*lines, bar.format(n=3)])  # handled: the loop went on
    assert "component.failed" not in kinds(went_on)


# --- lines after a file's last time ---------------------------------------------------------

RAY_DRIVER = """\
2026-03-14 14:00:00,000 INFO worker.py:1888 -- Started a local Ray instance.
(TaskRunner pid=2201) step:1 - actor/pg_loss:0.01 - critic/score/mean:0.5 - timing_s/step:60.0
(TaskRunner pid=2201) step:2 - actor/pg_loss:0.02 - critic/score/mean:0.6 - timing_s/step:61.0
(WorkerDict pid=2388, ip=10.0.0.7) Traceback (most recent call last):
(WorkerDict pid=2388, ip=10.0.0.7)   File "/verl/workers/fsdp_workers.py", line 610, in update_actor
(WorkerDict pid=2388, ip=10.0.0.7)     metrics = self.actor.update_policy(data=data)
(WorkerDict pid=2388, ip=10.0.0.7) RuntimeError: CUDA error: an illegal memory access \
was encountered
"""


def test_lines_after_a_file_s_last_time_belong_to_its_end(tmp_path: Path) -> None:
    """Issue 41: a Ray driver log with one timestamped line, two step lines, then a worker's
    traceback. The steps and the traceback come after that time, in that order -- not all at
    it, where the failure was no later than the last step and fired nothing."""
    log = tmp_path / "driver.log"
    log.write_text(RAY_DRIVER)
    found = diagnose([log], day=date(2026, 3, 14))
    (alert,) = [a for a in found.alerts if a.state == "firing"]
    assert alert.rule == "component_failed"
    assert "illegal memory access" in alert.summary
    times = [e.ts for e in found.events if e.kind in ("step.done", "component.failed")]
    assert times == sorted(times)
    assert len(set(times)) == len(times)
    start = datetime(2026, 3, 14, 14, tzinfo=UTC).timestamp()
    assert start < times[0] < times[-1] < start + 1
    # each step line's metrics, reward, end and next start, and the failure: said, not hidden
    assert [(p.name, n, t) for p, n, t in found.after_last] == [("driver.log", 9, start)]


def test_a_count_too_long_to_read_is_no_crash() -> None:
    """Python refuses to read an int of more than 4300 digits: a line holding one is skipped
    (said in the notes) or read without it, and the reading goes on."""
    long = "1" * 5000
    lines = [f"step:{long} - actor/pg_loss:nan", f"Iteration {long}", f"{long} | loss nan |",
             f"{long}/9 [====] - loss: nan", f"[1][{long}/5] loss: nan", f"x: 1/{long} y: nan",
             f"Grad overflow on iteration {long}", "step:3 - actor/pg_loss:nan"]  # fmt: skip
    parser = LineParser()
    found = read_all(lines, parser)
    assert [f["step"] for k, f in found if k == "step.metrics"] == [3]
    assert any("could not be read" in note for note in parser.notes())


def test_a_store_get_of_the_nccl_unique_id_that_timed_out_is_a_collective_s_timeout() -> None:
    """ProcessGroupNCCL's `broadcastUniqueNCCLID`: a rank could not get the ncclUniqueId rank 0
    puts in the c10d store (corpus19 dev: pytorch#82091's RuntimeError, LlamaFactory#3698's
    DistBackendError) -- the communicator's set-up timed out, at the rank the message names;
    a store error that is no timeout (rank 0 gone: a reset connection) is the catalogue's
    failure alone. JAX's coordination service's barrier timing out (corpus19 dev:
    llama-2-jax#20, levanter#432) is a collective's timeout too."""
    unique = (
        "torch.distributed.DistBackendError: [4] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got "
        "error: Socket Timeout"
    )
    fields = only(read_all([unique]), "collective.timeout")
    assert (fields["backend"], fields["op"], fields["rank"]) == ("nccl", "ncclUniqueId", 4)
    old = unique.replace("retrieving", "retreiving")
    old = old.replace("torch.distributed.DistBackend", "Runtime")
    assert only(read_all([old]), "collective.timeout")["rank"] == 4
    reset = unique.replace("Socket Timeout", "Connection reset by peer")
    found = read_all([reset])
    assert "collective.timeout" not in kinds(found)
    assert "component.failed" in kinds(found)
    barrier = (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "PjRT_Client_Connect. Timed out task names:"
    )
    fields = only(read_all([barrier]), "collective.timeout")
    assert (fields["backend"], fields["op"]) == ("coordination", "barrier PjRT_Client_Connect")
    # later releases: `Barrier timed out. Id: ...` (gpu-recipes#2, corpus20/dev)
    later = (
        "Original error: DEADLINE_EXCEEDED: Barrier timed out. Id: [Init]Wait_for_all_tasks_to_"
        "register::0. This usually happens because a task triggered the barrier too early or too "
        "slowly."
    )
    fields = only(read_all([later]), "collective.timeout")
    assert fields["op"] == "barrier [Init]Wait_for_all_tasks_to_register::0"


def test_ranks_that_failed_to_pass_a_monitored_barrier_timed_out_in_it() -> None:
    """ProcessGroupGloo's `monitoredBarrier` (pytorch#53773, #55010; rendered from its format
    strings): rank 0 names the ranks that did not reach the barrier in its timeout, one rank or
    all of them (`wait_all_ranks`), logged and raised."""
    one = ("[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 1 failed to pass monitoredBarrier in "
           "1800000 ms")  # fmt: skip
    every = "RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 600000 ms"
    got = [only(read_all([line]), "collective.timeout") for line in (one, every)]
    assert [(f["backend"], f["op"], f["timeout_s"], f["group_rank"]) for f in got] == [
        ("gloo", "monitoredBarrier", 1800.0, 0),
        ("gloo", "monitoredBarrier", 600.0, 0),
    ]


def test_the_heartbeat_monitor_ending_a_process_for_a_watchdog_hang_is_the_watchdog_stuck() -> None:
    """ProcessGroupNCCL's heartbeat monitor (torch 2.4 on) ends a process at FATAL "Terminating
    the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang."
    (NVIDIA/Fuser#3055 as posted): the watchdog stuck, its own line cut or not; its abort is the
    collective's, no failure of its own. "due to collective timeout or exception" says neither
    alone: it stays the process's abort."""
    hang = ("[F930 15:23:07.686401350 ProcessGroupNCCL.cpp:1309] [PG ID 6 PG GUID  Rank 0] [PG ID "
            "6 PG GUID  Rank 0] Terminating the process after attempting to dump debug info, due "
            "to ProcessGroupNCCL watchdog hang.")  # fmt: skip
    found = read_all([hang])
    assert kinds(found) == ["collective.timeout"]
    assert only(found, "collective.timeout")["op"] == "watchdog"
    either = hang.replace("ProcessGroupNCCL watchdog hang", "collective timeout or exception")
    assert kinds(read_all([either])) == ["component.failed"]


def test_ray_train_s_worker_group_that_never_started_timed_out() -> None:
    """ray#60376 (corpus21/dev, a log viewer's layout): Ray Train v2's
    WorkerGroupStartupTimeoutError (ray/train/v2/_internal/exceptions.py), raised or logged by
    its controller's failure policy: the worker group never formed within its timeout."""
    line = ("The worker group startup timed out after 30.0 seconds waiting for 8 workers. "
            "Potential causes include: (1) temporary insufficient cluster resources while "
            "waiting for autoscaling")  # fmt: skip
    fields = only(read_all([line]), "collective.timeout")
    assert (fields["backend"], fields["op"], fields["timeout_s"]) == (
        "ray-train", "worker group startup", 30.0)  # fmt: skip


def test_a_prefill_decode_kv_transfer_that_timed_out_is_the_engines_collective_timeout() -> None:
    """sglang#10110 and sglang#11648 (corpus27/dev): SGLang's prefill/decode disaggregation
    (disaggregation/mooncake/conn.py, nixl's and mori's alike) records a request's KV transfer
    that did not complete within its timeout -- the bootstrap hand-shake, or the decode side
    waiting for the prefill's KV -- as "Request N timed out after S s in KVPoll.STATE", inside
    the scheduler's `KVTransferError` line: the two engines' hand-off timed out."""
    prefill = ("Prefill bootstrap failed for request rank=2 req.rid='d3fd6575d3b24b598367fcbdf1bd"
               "d21a' req.bootstrap_room=5975098084415727586 with exception KVTransferError("
               "bootstrap_room=5975098084415727586): Request 5975098084415727586 timed out after "
               "300.0s in KVPoll.Bootstrapping")  # fmt: skip
    fields = only(read_all([prefill]), "collective.timeout")
    assert (fields["backend"], fields["op"], fields["timeout_s"]) == (
        "kv-transfer", "KVPoll.Bootstrapping", 300.0)  # fmt: skip
    decode = ("[2025-10-15 11:03:35 DP6 TP6 EP6] Decode transfer failed for request rank=6 "
              "decode_req.req.rid='cd00baf7d2fc4dcf8535c3a25f0288a3' decode_req.req."
              "bootstrap_room=8360203925601259718 with exception KVTransferError(bootstrap_room="
              "8360203925601259718): Request 8360203925601259718 timed out after 600.0s in "
              "KVPoll.WaitingForInput")  # fmt: skip
    fields = only(read_all([decode]), "collective.timeout")
    assert (fields["op"], fields["timeout_s"]) == ("KVPoll.WaitingForInput", 600.0)
    # the warning the decode side writes beside it names the timeout's setting, no timeout
    warned = ("[2025-10-15 11:03:35 DP6 TP6 EP6] Some requests fail to receive KV Cache transfer "
              "done signal after bootstrapping. If a greater mean TTFT is acceptable, you can "
              "'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' (10 minutes) to relax the "
              "timeout condition. ")  # fmt: skip
    assert "collective.timeout" not in kinds(read_all([warned]))


def test_a_node_that_aborts_itself_over_its_group_s_registration_timing_out_dies_of_it() -> None:
    """Difacto_DMLC#20 (corpus20/dev): ps-lite's `Manager::Run` LOG(FATAL)s "Timeout (500 sec)
    to wait all other nodes initialized" -- the group never formed, a collective's timeout --
    and the node aborts: its own death, not a watchdog's teardown as after NCCL's timeout."""
    found = read_all([
        "F0915 12:14:57.163543  2300 manager.cc:55] Timeout (500 sec) to wait all other nodes "
        "initialized. See commmets for more information",
        "*** Check failure stack trace: ***",
        "    @           0x496a2a  google::LogMessage::Fail()",
    ])  # fmt: skip
    assert sorted(set(kinds(found))) == ["collective.timeout", "component.failed"]
    fields = only(found, "collective.timeout")
    assert (fields["backend"], fields["op"], fields["timeout_s"]) == (
        "ps-lite", "node registration", 500.0)  # fmt: skip

"""Waits a framework declares in its console (`runwatch.emitters.stalls`): Horovod's stall
inspector and torch's store-based barrier read as ranks' phases, `ranks_stalled` firing when
the console's own evidence spans its timeout or the console ends inside the wait (its hang), and
progress ending the wait.

Lines marked with a URL are as users posted them there; the others are the format strings of
horovod/common/stall_inspector.cc and torch/distributed/distributed_c10d.py rendered with
sample values (repeats of a real warning are such renderings: the check repeats it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runwatch.diagnose import diagnose
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found
from runwatch.emitters.stalls import Waits

#: https://github.com/horovod/horovod/issues/534 (Horovod 0.13-era: one op a line)
HVD_534 = (
    " WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
    "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may "
    "indicate that different ranks are trying to submit different tensors or that only subset "
    "of ranks is submitting tensors, which will cause deadlock. \n"
    "Stalled ops:\n"
    "HorovodBroadcast_fully_connected_weights_0 [missing ranks: 0]\n"
    "HorovodBroadcast_fully_connected_1_weights_0 [missing ranks: 0]\n"
)
#: https://github.com/horovod/horovod/issues/1442 (stall_inspector.cc, under mpirun; the
#: terminal wrapped the warning)
HVD_1442 = (
    "[1,0]<stderr>:[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] One "
    "or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
    "and are waiting for remaind\n"
    "er of ranks for more than 60 seconds. This may indicate that different ranks are trying "
    "to submit different tensors or that only subset of ranks is submitting tensors, which "
    "will cause deadlock.\n"
    "[1,0]<stderr>:Stalled ranks:\n"
    "[1,0]<stderr>:6: [horovod_allreduce.0, horovod_allreduce.1, horovod_allreduce.10, "
    "horovod_allreduce.100, horovod_allreduce.101, horovod_allreduce.102 ...]\n"
)
#: https://github.com/horovod/horovod/issues/134 (0.9-era: ready ranks on the warning's line)
HVD_134 = (
    "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
    "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may "
    "indicate that different ranks are trying to submit different tensors or that only subset "
    "of ranks is submitting tensors, which will cause deadlock. Stalled ops: v0/tower_0/"
    "HorovodAllreduce_v0_tower_0_gradients_AddN_23_0 [ready ranks: 2], v0/tower_0/"
    "HorovodAllreduce_v0_tower_0_gradients_AddN_22_0 [ready ranks: 2, 3]\n"
)
#: https://github.com/facebookresearch/metaseq/issues/52 (torch 1.x, two ranks waiting)
BARRIER_52 = (
    "2022-05-10 05:38:33 | INFO | torch.distributed.distributed_c10d | Waiting in store based "
    "barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
    "(world_size=2, worker_count=3, timeout=0:30:00)\n"
)
BARRIER = (
    "{t} | INFO | torch.distributed.distributed_c10d | Waiting in store based barrier to "
    "initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=2, "
    "num_workers_joined=1, timeout=0:30:00)\n"
)
DONE = (
    "{t} | INFO | torch.distributed.distributed_c10d | Rank 0: Completed store-based barrier "
    "for key:store_based_barrier_key:1 with 2 nodes.\n"
)
STEP = "{t} | INFO | train | step {n} | loss 1.25 | lr 1e-05\n"
#: https://github.com/NVIDIA/OpenSeq2Seq/issues/456 (operations.cc, behind a log collector's
#: prefix: the first op glued to `Stalled ops:`)
HVD_456 = (
    "1469.worker.1  | [2019-06-04T16:49:20Z] [2019-06-04 16:49:19.737850: W horovod/common/"
    "operations.cc:588] One or more tensors were submitted to be reduced, gathered or "
    "broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
    "seconds. This may indicate that different ranks are trying to submit different tensors or "
    "that only subset of ranks is submitting tensors, which will cause deadlock.\n"
    "1469.worker.1  | [2019-06-04T16:49:20Z] Stalled ops:Loss_Optimization/all_reduce/"
    "HorovodAllreduce_Loss_Optimization_mul_1_0 [missing ranks: 0]\n"
)
#: https://github.com/s-JoL/Open-Llama/issues/47 (absl's prefix; two ranks of eight wait)
BARRIER_47 = (
    "I0510 07:28:04.417845 139863945226048 distributed_c10d.py:337] Waiting in store based "
    "barrier to initialize process group for rank: 2, key: store_based_barrier_key:2 "
    "(world_size=8, worker_count=7, timeout=0:30:00)\n"
    "I0510 07:28:04.428285 140051304576832 distributed_c10d.py:337] Waiting in store based "
    "barrier to initialize process group for rank: 7, key: store_based_barrier_key:2 "
    "(world_size=8, worker_count=7, timeout=0:30:00)\n"
)


def read(text: str, kind: str) -> list[dict[str, Any]]:
    """The events of one kind a console's lines give, in order."""
    parser = LineParser()
    found: list[Found] = []
    for line in text.splitlines():
        found += parser.parse(line)
    return [f for k, f in found if k == kind]


def statuses(text: str) -> list[dict[str, Any]]:
    return read(text, "rank.status")


def fired(tmp_path: Path, text: str) -> list[str]:
    log = tmp_path / "console.log"
    log.write_text(text)
    return sorted({a.rule for a in diagnose([log]).alerts if a.state == "firing"})


def clock(seconds: int) -> str:
    return f"2022-05-10 05:{38 + seconds // 60:02d}:{seconds % 60:02d}"


def test_horovod_s_warnings_name_the_ranks_missing_or_ready_in_each_version() -> None:
    """The ranks its list names, and no other: a warning whose list a paste cut declares none
    (Horovod warns so while ranks catch up; a held-out healthy console ends in one)."""
    cut = HVD_1442.rsplit("[1,0]<stderr>:6:", 1)[0]
    assert cut.endswith("Stalled ranks:\n")
    assert statuses(cut) == []
    assert statuses(HVD_534) == [
        {"rank": 0, "world_size": 1, "phase": "horovod_collective_not_submitted", "waited": 60.0}
    ]
    assert statuses(HVD_1442) == [
        {"rank": 6, "world_size": 7, "phase": "horovod_collective_not_submitted", "waited": 60.0}
    ]
    assert [(s["rank"], s["phase"]) for s in statuses(HVD_456)] == [
        (0, "horovod_collective_not_submitted")
    ]
    assert [(s["rank"], s["phase"], s["world_size"]) for s in statuses(HVD_134)] == [
        (2, "horovod_collective", 4),
        (3, "horovod_collective", 4),
    ]


def test_an_op_s_item_whose_warning_a_paste_cut_still_names_its_ranks() -> None:
    """horovod#530 (corpus32/dev): the poster's lines of one 0.9-0.12 warning's `Stalled ops:`,
    without the warning. Horovod writes an op's item (`[ready ranks: ...]`, 0.13-0.16's
    `[missing ranks: ...]`) under its warning alone, after the stall-check time, 60 s unless
    set: the ranks it names waited that long. The later list's rank lines (`6: [...]`) are read
    only under their header."""
    items = "".join(f"HorovodBroadcast_InceptionV3_w{k}_0 [ready ranks: 5, 6, 3, 1, 4, 0], \n"
                    for k in range(3))  # fmt: skip
    assert [(s["rank"], s["phase"], s["world_size"], s["waited"]) for s in statuses(items)] == [
        (r, "horovod_collective", 7, 60.0) for r in (0, 1, 3, 4, 5, 6)
    ]
    missing = HVD_534.split("Stalled ops:\n", 1)[1]
    assert [(s["rank"], s["phase"]) for s in statuses(missing)] == [
        (0, "horovod_collective_not_submitted")
    ]
    assert statuses(HVD_1442.split("Stalled ranks:\n", 1)[1]) == []


def test_a_tensor_named_like_a_store_is_horovod_s() -> None:
    text = HVD_534.replace("fully_connected", "restore_global_step")
    assert [s["rank"] for s in statuses(text)] == [0]


def test_the_k_th_warning_of_one_stall_shows_k_check_times() -> None:
    waited = [s["waited"] for s in statuses(HVD_534 * 3)]
    assert waited == [60.0, 120.0, 180.0]


def test_a_horovod_shutdown_line_shows_its_own_time() -> None:
    text = HVD_1442.replace("6: [", "6!: [") + (
        '[1,0]<stderr>:One or more rank (marked by "!") is stalled for longer than 600 '
        "seconds. Will shutdown.\n"
    )
    assert [s["waited"] for s in statuses(text)] == [60.0, 600.0]


def test_the_barrier_s_lines_show_ten_seconds_each_or_the_seconds_they_state() -> None:
    assert statuses(BARRIER_52 * 3) == [
        {"rank": 0, "world_size": 2, "phase": "store_based_barrier", "waited": w}
        for w in (10.0, 20.0, 30.0)
    ]
    assert [(s["rank"], s["world_size"], s["waited"]) for s in statuses(BARRIER_47)] == [
        (2, 8, 10.0),
        (7, 8, 10.0),
    ]
    stated = (  # torch 2.2 on, at DEBUG: "for %s seconds" glued to "rank:"
        "Waiting in store based barrier to initialize process group for 310.5 secondsrank: 3, "
        "key: store_based_barrier_key:1 (world_size=4, num_workers_joined=3, timeout=0:30:00 "
        "error=Socket Timeout)"
    )
    assert statuses(stated) == [
        {"rank": 3, "world_size": 4, "phase": "store_based_barrier", "waited": 310.5}
    ]


def test_since_is_the_earliest_start_any_line_of_the_wait_showed() -> None:
    waits = Waits()
    first = waits.since({"rank": 0, "phase": "p", "waited": 60.0}, 1000.0)
    later = waits.since({"rank": 0, "phase": "p", "waited": 120.0}, 1180.0)
    assert first["since"] == later["since"] == 940.0
    assert "waited" not in later


def firing(tmp_path: Path, text: str) -> list[tuple[float, float]]:
    """(when, since) of each ranks_stalled firing `runwatch diagnose` gives the text."""
    log = tmp_path / "console.log"
    log.write_text(text)
    alerts = diagnose([log]).alerts
    return [(a.ts, a.since) for a in alerts if a.rule == "ranks_stalled" and a.state == "firing"]


def test_a_console_that_ends_in_a_declared_wait_ended_in_its_hang(tmp_path: Path) -> None:
    """One warning shows 60 s of a stall, short of the rule's 300 s; but the console ends in
    it -- no progress, no failure after: the job hung there, and time runs on past the end to
    where the rule decides (`diagnose.hang_window`): 300 s after the wait began. The same
    warning with the job going on after it is no stall."""
    step = "INFO:root:[step 21000]  mlm_loss=1.41707  nsp_loss= 0.02   throughput=16.2K tks/s\n"
    assert fired(tmp_path, HVD_534) == ["ranks_stalled"]
    assert fired(tmp_path, HVD_534 * 3 + step) == []
    waiting = "".join(BARRIER.format(t=clock(s)) for s in range(10, 70, 10))
    ((when, since),) = firing(tmp_path, waiting)
    # the first line, at 05:38:10, showed 10 s of waiting: the wait began at 05:38:00
    assert since == datetime(2022, 5, 10, 5, 38, tzinfo=UTC).timestamp()
    assert when - since == 300.0
    done = DONE.format(t=clock(70))
    assert fired(tmp_path, waiting + done) == []


def test_timestamps_show_a_wait_longer_than_the_warnings_count(tmp_path: Path) -> None:
    """#1442's two warnings three minutes apart show 240 s since the first one's wait began
    (it fires past the console's end, where it hangs); a third three minutes on shows 420 s:
    the rule fired while the console still spoke, 300 s after the wait began."""
    second = HVD_1442.replace("15:36:43", "15:39:43")
    ((when, since),) = firing(tmp_path, HVD_1442 + second)
    first = since + 60  # the first warning's time
    assert when > first + 180
    third = HVD_1442.replace("15:36:43", "15:42:43")
    ((when, since),) = firing(tmp_path, HVD_1442 + second + third)
    assert (when - since, first + 360 - when) == (300.0, 120.0)


def test_progress_after_a_warning_ends_the_stall(tmp_path: Path) -> None:
    step = "INFO:root:[step 21000]  mlm_loss=1.41707  nsp_loss= 0.02   throughput=16.2K tks/s\n"
    # progress resets the count: three warnings and three more are no 300 s of one stall
    later = step.replace("21000", "21001")
    assert fired(tmp_path, HVD_534 * 3 + step + HVD_534 * 3 + later) == []
    found = statuses(HVD_534 + step)
    assert found[-1] == {"rank": 0, "world_size": 1, "phase": "exited"}


def test_a_barrier_waited_on_past_the_timeout_fires_and_its_completion_resolves_it(
    tmp_path: Path,
) -> None:
    waiting = "".join(BARRIER.format(t=clock(s)) for s in range(10, 400, 10))
    assert fired(tmp_path, waiting) == ["ranks_stalled"]
    log = tmp_path / "done.log"
    log.write_text(waiting + DONE.format(t=clock(400)) + STEP.format(t=clock(460), n=1))
    states = [(a.rule, a.state) for a in diagnose([log]).alerts]
    assert states == [("ranks_stalled", "firing"), ("ranks_stalled", "resolved")]


#: https://github.com/pytorch/pytorch/issues/65022 (torch 1.9-era, 2021: the barrier's end as
#: its first releases wrote it, naming no key; the console's own line)
DONE_65022 = (
    "21577 2021-09-14,22:15:42.361 - {distributed_c10d.py (225)} - _store_based_barrier(): "
    "Rank 5: Completed store-based barrier for 8 nodes.\n"
)
#: the waiting line of the same releases under the same logger (rendered: torch 1.9-era
#: distributed_c10d.py's format string, 10 s apart as it writes them)
WAITING_65022 = (
    "21577 2021-09-14,22:15:{s:02d}.361 - {{distributed_c10d.py (212)}} - _store_based_barrier(): "
    "Waiting in store based barrier to initialize process group for rank: 5, key: "
    "store_based_barrier_key:1 (world_size=8, worker_count=7, timeout=0:30:00)\n"
)


def test_the_barrier_s_end_in_its_first_wording_ends_the_rank_s_wait(tmp_path: Path) -> None:
    """The barrier's first releases say its end with no key ("Rank 5: Completed store-based
    barrier for 8 nodes."): it ends the wait as the keyed line does, so a console that ends
    at start-up after its barrier completed did not end in a hang."""
    waiting = "".join(WAITING_65022.format(s=s) for s in range(2, 42, 10))
    assert fired(tmp_path, waiting) == ["ranks_stalled"]
    assert fired(tmp_path, waiting + DONE_65022) == []
    assert statuses(waiting + DONE_65022)[-1]["phase"] == "exited"
    # the barrier completes once every rank joined: another rank's end is rank 5's too
    other = DONE_65022.replace("Rank 5:", "Rank 6:")
    assert fired(tmp_path, waiting + other) == []


def test_a_barrier_completed_within_the_timeout_is_no_stall_after_it(tmp_path: Path) -> None:
    waiting = "".join(BARRIER.format(t=clock(s)) for s in range(10, 200, 10))
    done = DONE.format(t=clock(200))
    # the job trains for ten minutes and goes quiet
    steps = "".join(STEP.format(t=clock(200 + 60 * n), n=n) for n in range(1, 11))
    assert fired(tmp_path, waiting + done + steps) == []
    # ... or the barrier completes and nothing more is said for ten minutes
    assert fired(tmp_path, waiting + done + STEP.format(t=clock(800), n=1)) == []


def test_watch_s_scanner_reads_horovod_s_list_of_ranks_after_its_warning() -> None:
    parser = LineParser()
    found = LineScanner(parser).feed(HVD_1442.encode())
    assert [f["rank"] for k, f in found if k == "rank.status"] == [6]


#: https://github.com/Lightning-AI/pytorch-lightning/pull/5155 (corpus20/dev: horovodrun's own
#: Gloo launcher, `[rank]<stderr>:`, the rank alone; the warning's end cut here)
HVD_5155 = (
    "[0]<stderr>:[2020-12-29 16:50:57.724380: W /tmp/pip-install-uk4q7bn5/horovod/horovod/"
    "common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered "
    "or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
    "seconds. This may indicate that different ranks are trying to submit different tensors.\n"
    "[0]<stderr>:Missing ranks:\n"
    "[0]<stderr>:0: [broadcast.bool.sz]\n"
)


def test_horovodrun_s_own_prefix_is_taken_off_its_stall_warning(tmp_path: Path) -> None:
    """horovodrun's Gloo launcher prefixes each line with `[rank]<stream>:` (safe_shell_exec.py
    `forward_stream`): taken off, the warning and its list of ranks are read as under mpirun's
    `[1,0]<stderr>:`, and a console that ends in them ended in its hang."""
    assert [f["rank"] for f in statuses(HVD_5155)] == [0]
    assert fired(tmp_path, HVD_5155) == ["ranks_stalled"]


def test_hydra_s_rank_prefix_on_horovod_s_list_of_ranks(tmp_path: Path) -> None:
    """MPICH's and Intel MPI's `-prepend-rank` (hydra's pattern `[%r] `) before each line of
    the warning and of its list (horovod#3950, corpus51/dev): the list's ranks are read."""
    text = "".join(f"[0] {line}\n" for line in (
        "[2023-06-26 07:23:58.477178: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
        "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
        "are waiting for remainder of ranks for more than 60 seconds. This may indicate that "
        "different ranks are trying to submit different tensors or that only subset of ranks is "
        "submitting tensors, which will cause deadlock.",
        "Missing ranks:", "0: [broadcast.conv.bias, broadcast.conv.weight]",
        "1: [broadcast.conv.bias, broadcast.conv.weight]"))  # fmt: skip
    missing = "horovod_collective_not_submitted"
    assert [(s["rank"], s["phase"]) for s in statuses(text)] == [(0, missing), (1, missing)]
    assert fired(tmp_path, text) == ["ranks_stalled"]


#: https://github.com/tensorflow/tensorflow/issues/14489 (corpus20/dev: a worker whose
#: parameter server died; TensorFlow's master.cc logs it every 10 s)
TF_14489 = "".join(
    f"2017-11-11 16:06:{s}.524442: I tensorflow/core/distributed_runtime/master.cc:221] "
    "CreateSession still waiting for response from worker: /job:ps/replica:0/task:0\n"
    for s in (12, 22, 32)
)
#: master_session.cc's line once every task answered, rendered
TF_STARTED = (
    "2017-11-11 16:06:40.454152: I tensorflow/core/distributed_runtime/master_session.cc:1004] "
    "Start master session 2feaff26548834a9 with config: \n"
)


def test_tensorflow_s_master_waiting_for_a_task_is_a_wait_it_declares(tmp_path: Path) -> None:
    """The k-th `CreateSession still waiting` line naming a task shows k * 10 s of waiting
    (master.cc `DeviceFinder::Wait`, which never times out); from the second the console shows
    the wait going on: a console ending in them ended in its hang, one where the master session
    then starts did not."""
    assert [f["waited"] for f in statuses(TF_14489)] == [20.0, 30.0]
    assert fired(tmp_path, TF_14489) == ["ranks_stalled"]
    assert fired(tmp_path, TF_14489 + TF_STARTED) == []
    # one line, one period: a task still starting, as a console cut there shows it
    assert fired(tmp_path, TF_14489.splitlines(keepends=True)[0]) == []


#: https://github.com/Lightning-AI/pytorch-lightning/issues/4389 (corpus20/dev: two nodes that
#: both took themselves for the first; ranks 4-7 of 8 never enter)
PL_4389 = "".join(
    f"LOCAL_RANK: {r} - CUDA_VISIBLE_DEVICES: [0,1,2,3]\n"
    f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" * 2
    for r in (1, 2, 3, 0)
)
#: lightning_fabric's wording, rendered, and rank 0's banner once every rank joined
PL_FABRIC = "".join(
    f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2\n" for r in (0, 1)
)
PL_REGISTERED = (
    "----------------------------------------------------------------------------------------------------\n"
    "distributed_backend=nccl\n"
    "All distributed processes registered. Starting with 2 processes\n"
)


def test_lightning_s_ranks_claiming_one_rank_twice_wait_in_a_group_that_cannot_form(
    tmp_path: Path,
) -> None:
    """Each rank logs `initializing ddp: GLOBAL_RANK: R, MEMBER: R+1/W` and blocks in
    init_process_group; rank 0 alone says when all W joined. Two processes entering as one
    global rank, the banner not after them: the group cannot form, the console ended in its
    hang. A console that merely ends after its ranks entered (a paste cut at start-up, as
    corpus14's torch elastic control ends at `Rendezvous'ing worker group`) declares nothing;
    the banner after duplicates ends the wait."""
    assert [(f["rank"], f["world_size"]) for f in statuses(PL_4389)] == [
        (1, 8), (2, 8), (3, 8), (0, 8)]  # fmt: skip
    assert fired(tmp_path, PL_4389) == ["ranks_stalled"]
    assert fired(tmp_path, PL_FABRIC) == []
    assert fired(tmp_path, PL_FABRIC * 2 + PL_REGISTERED) == []


#: https://github.com/gpustack/gpustack/issues/5509 (corpus21/dev: vLLM's Ray executor on two
#: nodes, its second GPU never placed; the line's tail cut here)
PG_5509 = (
    "(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement "
    "group of specs for {n} seconds. specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` "
    "and `ray list nodes` to see if you have enough resources\n"
)


def test_vllm_waiting_for_its_placement_group_is_a_wait_it_declares(tmp_path: Path) -> None:
    """vLLM's `_wait_until_pg_ready` logs the seconds it has waited for Ray to place its
    workers, after 10 s and then at doubling intervals: from its second line (30 s on) the
    console shows the wait going on, and one that ends in it ended in its hang; the first line
    alone is a group still being placed."""
    assert [(f["phase"], f["waited"]) for f in statuses(PG_5509.format(n=150))] == [
        ("ray_placement_group", 150.0)]  # fmt: skip
    assert fired(tmp_path, PG_5509.format(n=150)) == ["ranks_stalled"]
    assert fired(tmp_path, PG_5509.format(n=10)) == []


#: https://github.com/sgl-project/sglang/pull/6555 (quoted in a PR comment, DP attention's
#: prefix; corpus3's development excerpt, its request's input ids shortened here)
SGLANG_6555 = (
    "> [2025-07-11 17:40:16 DP0 TP0] self.cur_batch.batch_size()=1, self.cur_batch.reqs=[Req("
    "rid=8673_5e58f0745bc24ddca4183d2f32b687c9, input_ids=[0, 128803, 17797, 128804], "
    "output_ids=[], self.grammar=None, self.sampling_params=<sglang.srt.sampling.sampling_"
    "params.SamplingParams object at 0x7f71fa9878e0>)], self.token_to_kv_pool_allocator."
    "available_size()=656156, self.tree_cache.evictable_size()=13, \n"
    "> [2025-07-11 17:40:16 DP0 TP0] Pyspy failed to dump PID 544. Error: /bin/sh: 1: py-spy: "
    "not found\n"
    "> \n"
    "> [2025-07-11 17:40:16 DP0 TP0] Watchdog timeout (self.watchdog_timeout=300)\n"
)


def test_sglang_s_watchdog_is_an_engine_stalled_for_its_timeout(tmp_path: Path) -> None:
    parser = LineParser()
    found = [f for line in SGLANG_6555.splitlines() for f in parser.parse(line)]
    assert found == [
        ("inference.stats", {"running": 1, "waiting": 0, "gen_tokens_per_s": 0.0,
                             "prompt_tokens_per_s": 0.0, "waited": 300.0, "server": "sglang"})
    ]  # fmt: skip
    assert fired(tmp_path, SGLANG_6555) == ["inference_stalled"]
    # a watchdog of 60 s shows no stall of inference_stalled's 180 s
    assert fired(tmp_path, SGLANG_6555.replace("=300)", "=60)")) == []


#: https://github.com/sgl-project/sglang/issues/17941 (corpus23/dev: SGLang 0.5.x's watchdog,
#: utils/watchdog.py, after its py-spy dump), and the same with `soft`, rendered
SGLANG_17941 = (
    "[2026-01-29 13:12:37 PP1 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300, "
    "self.soft=False)\n"
)


def test_sglang_s_newer_watchdog_names_its_component_and_whether_it_is_soft(
    tmp_path: Path,
) -> None:
    """0.5.x prefixes the component and says `soft`: the engine stalled 300 s either way; a
    hard one kills the server (no wait left open), a soft one only says so."""
    parser = LineParser()
    (found,) = [f for f in parser.parse(SGLANG_17941.strip()) if f[0] == "inference.stats"]
    assert found[1]["waited"] == 300.0
    assert parser.waits.engine_hung_since is None  # (no `since` given yet: none open)
    assert fired(tmp_path, SGLANG_17941) == ["inference_stalled"]
    soft = LineParser()
    (stats,) = soft.parse(SGLANG_17941.replace("soft=False", "soft=True").strip())
    soft.waits.since(stats[1], 1000.0)
    assert soft.waits.engine_hung_since == 700.0  # open: the server goes on, still stalled


#: https://github.com/vllm-project/vllm/issues/2479 (a Ray worker of vLLM's, tensor parallel 2,
#: stuck: `py-spy dump` of it, the first frames)
PYSPY_2479 = (
    'Thread 96488 (active): "MainThread"\n'
    "    all_gather_into_tensor (torch/distributed/distributed_c10d.py:2897)\n"
    "    wrapper (torch/distributed/c10d_logger.py:47)\n"
    "    tensor_model_parallel_all_gather (vllm/model_executor/parallel_utils/"
    "communication_op.py:40)\n"
    "    _get_logits (vllm/model_executor/layers/sampler.py:105)\n"
)
#: py-spy's format (src/dump.rs) rendered: a process elsewhere (a data loader), and one whose
#: `--native` frames come before its innermost Python frame
PYSPY_LOADER = (
    'Thread 280070 (active): "MainThread"\n'
    "    _sample_batch (data.py:88)\n"
    "    __next__ (data.py:61)\n"
    "    train_step (train.py:170)\n"
)
PYSPY_NATIVE = (
    'Thread 280071 (idle): "MainThread"\n'
    "    ncclGroupEnd (libnccl.so.2)\n"
    "    c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)\n"
    "    all_reduce (torch/distributed/distributed_c10d.py:2050)\n"
    "    _allreduce_grads (train.py:214)\n"
)
#: CPython's faulthandler after `dump_traceback_later(300)` (Modules/faulthandler.c's timeout
#: line, Python/traceback.c's thread header and frames) rendered
FAULT_TIMEOUT = (
    "Timeout (0:05:00)!\n"
    "Thread 0x00007f3a2c1ff700 (most recent call first):\n"
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line '
    "2050 in barrier\n"
    '  File "/opt/train.py", line 88 in main\n'
)


#: https://github.com/deepspeedai/DeepSpeed/issues/1969 (corpus25's development excerpt): gdb's
#: `py-bt` of a ZeRO-2 rank, its innermost frame torch's all_reduce under a C function's
PYBT_1969 = (
    "(gdb) py-bt\n"
    "Traceback (most recent call first):\n"
    "  <built-in method allreduce of PyCapsule object at remote 0x7fb3b12c3f90>\n"
    '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", '
    "line 1209, in all_reduce\n"
    "    work = group.allreduce([tensor], opts)\n"
    '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage2.py", line '
    "1326, in allreduce_bucket\n"
    "    dist.all_reduce(tensor_to_allreduce, group=self.dp_process_group)\n"
)
#: the same command's words (CPython Tools/gdb/libpython.py) for a rank in its data loader
PYBT_LOADER = (
    "Traceback (most recent call first):\n"
    "  Waiting for the GIL\n"
    '  File "/opt/train.py", line 88, in _sample_batch\n'
    "    batch = next(self._iter)\n"
)


def test_gdb_s_py_bt_of_a_process_in_a_collective_is_a_rank_waiting_there(
    tmp_path: Path,
) -> None:
    """gdb's `py-bt` looks at a living process, innermost frame first (its C frames before
    its Python ones): a snapshot like py-spy's, no exception -- its rank waits in the
    collective, and a console ending in it ended in its hang, no component's death."""
    assert statuses(PYBT_1969) == [{"rank": 0, "world_size": 1, "phase": "all_reduce",
                                     "waited": 0.0}]  # fmt: skip
    assert statuses(PYBT_LOADER) == []
    found = statuses(PYBT_1969 + PYBT_LOADER + PYBT_1969)
    assert [(f["rank"], f["phase"]) for f in found] == [(0, "all_reduce"), (1, "all_reduce")]
    assert fired(tmp_path, PYBT_1969) == ["ranks_stalled"]
    assert fired(tmp_path, PYBT_LOADER) == []
    scanner = LineScanner(LineParser())
    watched = scanner.feed(PYBT_1969.encode()) + scanner.finish()
    assert [f for k, f in watched if k == "rank.status"] == statuses(PYBT_1969)


#: https://github.com/vllm-project/vllm/pull/41834 ("Healthy idle worker parked waiting for
#: the next batch over shm-broadcast": a TP worker's py-spy dump; the post dropped the thread's
#: id from py-spy's header, written here as py-spy writes it, src/dump.rs)
PYSPY_41834 = (
    'Thread 861049 (idle): "MainThread"\n'
    "    poll (zmq/sugar/poll.py:106)\n"
    "    wait (vllm/distributed/device_communicators/shm_broadcast.py:198)\n"
    "    acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:698)\n"
    "    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:779)\n"
    "    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:973)\n"
    "    worker_main (vllm/v1/executor/multiproc_executor.py:879)\n"
)


def test_an_engine_s_worker_waiting_on_its_message_queue_is_in_no_collective(
    tmp_path: Path,
) -> None:
    """vLLM's workers wait for their next batch on the engine's message queue (shm_broadcast.py,
    among its device communicators), idle or between steps: no collective. Before the queue
    woke its readers through zmq (vllm#28053) they spun in it, so a dump's innermost frame was
    the queue's own (vllm#19036's profile of an idle worker: acquire_read, get_metadata); a
    worker in the engine's all-reduce is still a rank waiting."""
    assert statuses(PYSPY_41834) == []
    spinning = PYSPY_41834.replace("    poll (zmq/sugar/poll.py:106)\n", "").replace(
        "    wait (vllm/distributed/device_communicators/shm_broadcast.py:198)\n", ""
    )
    assert statuses(spinning) == []
    assert fired(tmp_path, spinning) == []
    reducing = spinning.replace("acquire_read (vllm/distributed/device_communicators/"
                                "shm_broadcast.py:698)",
                                "all_reduce (vllm/distributed/device_communicators/"
                                "pynccl.py:121)")  # fmt: skip
    assert [s["phase"] for s in statuses(reducing)] == ["all_reduce"]


def test_a_stack_dump_of_a_process_in_a_collective_is_a_rank_waiting_there() -> None:
    """py-spy's dump (a snapshot: 0 s shown) and faulthandler's after its timeout (the timeout
    shown): the innermost Python frame a collective's, the process waits in it; a process
    elsewhere (the rank the others wait for) is no wait; ranks in the order dumped."""
    assert statuses(PYSPY_2479) == [
        {"rank": 0, "world_size": 1, "phase": "all_gather_into_tensor", "waited": 0.0}
    ]
    assert statuses(PYSPY_LOADER) == []
    found = statuses(PYSPY_2479 + PYSPY_LOADER + PYSPY_NATIVE)
    assert [(f["rank"], f["phase"]) for f in found] == [
        (0, "all_gather_into_tensor"), (1, "all_reduce")]  # fmt: skip
    (fault,) = statuses(FAULT_TIMEOUT)
    assert (fault["phase"], fault["waited"]) == ("barrier", 300.0)
    # faulthandler's dump of a crash, and one with no timeout before it: no wait
    assert statuses("Fatal Python error: Aborted\n\n" + FAULT_TIMEOUT.split("\n", 1)[1]) == []
    assert statuses(FAULT_TIMEOUT.split("\n", 1)[1]) == []


def test_a_console_that_ends_in_a_dump_of_ranks_in_a_collective_ended_in_its_hang(
    tmp_path: Path,
) -> None:
    step = "INFO:root:[step 21000]  mlm_loss=1.41707  nsp_loss= 0.02   throughput=16.2K tks/s\n"
    assert fired(tmp_path, PYSPY_2479) == ["ranks_stalled"]
    assert fired(tmp_path, PYSPY_2479 + step) == []
    assert fired(tmp_path, PYSPY_LOADER) == []


#: https://github.com/deepspeedai/DeepSpeedExamples/issues/302 (corpus27's development
#: excerpt): DeepSpeed-Chat stuck at start, py-spy's dump of its main thread blocked on the
#: lock file of torch's JIT build (a build another process began and never finished)
PYSPY_BATON = (
    'Thread 46930 (idle): "MainThread"\n'
    "    wait (torch/utils/file_baton.py:42)\n"
    "    _jit_compile (torch/utils/cpp_extension.py:1522)\n"
    "    load (torch/utils/cpp_extension.py:1284)\n"
    "    jit_load (deepspeed/ops/op_builder/builder.py:480)\n"
    'Thread 47073 (idle): "Thread-1"\n'
    "    wait (threading.py:324)\n"
    "    wait (threading.py:622)\n"
    "    run (tqdm/_monitor.py:60)\n"
)


def test_a_main_thread_py_spy_found_blocked_on_another_s_work_waits_there(
    tmp_path: Path,
) -> None:
    """A main thread py-spy says is idle, its innermost Python frame a call that blocks until
    another thread, process or machine acts (a lock file, an event, a future, Ray's get), is
    its process's wait; another thread blocked so (tqdm's monitor) is a helper's idling, a
    main thread running, or idle in an event loop's select (a server between requests), none."""
    assert statuses(PYSPY_BATON) == [
        {"rank": 0, "world_size": 1, "phase": "wait (torch/utils/file_baton.py)", "waited": 0.0}
    ]
    assert fired(tmp_path, PYSPY_BATON) == ["ranks_stalled"]
    running = PYSPY_BATON.replace('(idle): "MainThread"', '(active): "MainThread"')
    assert statuses(running) == []
    helper = PYSPY_BATON.split("Thread 47073")[1]
    assert statuses("Thread 47073" + helper) == []
    # a driver in `ray.get` (ray/_private/worker.py: `get` calls `get_objects`, which calls
    # the core worker in C), its path whole as faulthandler's or gdb's would print it
    ray_get = (
        'Thread 1 (idle): "MainThread"\n'
        "    get_objects (/opt/conda/lib/python3.10/site-packages/ray/_private/worker.py:873)\n"
        "    get (/opt/conda/lib/python3.10/site-packages/ray/_private/worker.py:2613)\n"
    )
    assert [s["phase"] for s in statuses(ray_get)] == ["get_objects (ray/_private/worker.py)"]
    serving = 'Thread 1 (idle): "MainThread"\n    select (selectors.py:468)\n'
    assert statuses(serving) == []


#: https://github.com/dmlc/xgboost/issues/6604 (corpus31/dev): XGBoost's Dask fit hanging,
#: the poster's faulthandler dump of where it is stuck (no timeout asked for it), as posted
FAULT_ASKED = (
    "Current thread 0x0000148bdd769700 (most recent call first):\n"
    '  File "/home/ubuntu/dai-1.9.1-linux-x86_64/python/lib/python3.6/threading.py", line 299 '
    "in wait\n"
    '  File "/home/ubuntu/dai-1.9.1-linux-x86_64/python/lib/python3.6/threading.py", line 551 '
    "in wait\n"
    '  File "/home/ubuntu/dai-1.9.1-linux-x86_64/cpu-only/lib/python3.6/site-packages/'
    'distributed/utils.py", line 336 in sync\n'
)


def test_faulthandler_s_dump_asked_for_of_a_thread_blocked_is_its_wait(tmp_path: Path) -> None:
    """faulthandler's dump made on request (`dump_traceback()`, a `register`ed signal) marks
    the thread it was asked from, `Current thread`: blocked on another's work, it waits; the
    same dump after a fatal error is a crash's stacks, and the other threads' are not read."""
    assert [s["phase"] for s in statuses(FAULT_ASKED)] == ["wait (threading.py)"]
    assert fired(tmp_path, FAULT_ASKED) == ["ranks_stalled"]
    assert statuses("Fatal Python error: Segmentation fault\n\n" + FAULT_ASKED) == []
    other = FAULT_ASKED.replace("Current thread", "Thread")
    assert statuses(other) == []


def test_watch_s_scanner_reads_a_stack_dump_as_every_line_read() -> None:
    text = PYSPY_2479 + PYSPY_LOADER + PYSPY_NATIVE + FAULT_TIMEOUT + PYSPY_BATON + FAULT_ASKED
    scanner = LineScanner(LineParser())
    found = scanner.feed(text.encode()) + scanner.finish()
    assert [f for k, f in found if k == "rank.status"] == statuses(text)


#: https://github.com/vllm-project/vllm-ascend/issues/3717 (corpus13's development excerpt):
#: offline generation, its bar at 0/4, then the engine core's queue waiting minute by minute
SHM_BAR = (
    "Processed prompts:   0%|          | 0/4 [00:00<?, ?it/s, est. speed input: 0.00 toks/s, "
    "output: 0.00 toks/s]\n"
)
SHM_WAIT = (
    "(EngineCore_DP0 pid=323240) INFO 12-09 11:{m:02d}:53 [shm_broadcast.py:466] No available "
    "shared memory broadcast block found in 60 seconds. This typically happens when some "
    "processes are hanging or doing some time-consuming work (e.g. compilation).\n"
)
#: https://github.com/OpenPipe/ART/issues/201 (corpus4's development excerpt): the same wait at
#: DEBUG (vLLM to 0.9, its older wording), nothing served before it
SHM_START = (
    "DEBUG 07-04 17:35:10 [shm_broadcast.py:456] No available shared memory broadcast block "
    "found in 60 second.\n"
)
#: vLLM's stats line (v1/metrics/loggers.py's format, rendered): an idle engine
IDLE = (
    "INFO 12-09 11:24:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 0.0%, Prefix cache hit rate: 0.0%\n"
)


def engine_waits(text: str) -> list[tuple[int, float]]:
    return [(f["running"], f["waited"]) for f in read(text, "inference.stats") if "waited" in f]


def test_vllm_s_queue_waiting_while_it_serves_is_an_engine_stalled_that_long(
    tmp_path: Path,
) -> None:
    """The k-th warning shows k minutes of one wait; the requests pending are the bar's. Three
    minutes of it is inference_stalled's 180 s."""
    waits = "".join(SHM_WAIT.format(m=m) for m in (25, 26, 27))
    assert engine_waits(SHM_BAR + waits) == [(4, 60.0), (4, 120.0), (4, 180.0)]
    assert fired(tmp_path, SHM_BAR + waits) == ["inference_stalled"]
    # two minutes of it, then the bar advances: no stall of 180 s
    advanced = SHM_BAR.replace("0/4", "1/4").replace("  0%", " 25%")
    assert fired(tmp_path, SHM_BAR + waits[: len(waits) * 2 // 3] + advanced) == []


def test_vllm_s_queue_waiting_before_it_serves_or_while_idle_is_no_stall() -> None:
    """At start-up the same words are compilation's, a profile run's or weights loading's (a
    held-out healthy start-up says them for minutes: no rank's wait either); an idle engine's
    workers wait for work. The bar's advance ends a wait: the count starts again."""
    assert engine_waits(SHM_START * 4) == []
    assert statuses(SHM_START * 4) == []
    assert engine_waits(IDLE + SHM_WAIT.format(m=25) * 4) == []
    advanced = SHM_BAR.replace("0/4", "1/4").replace("  0%", " 25%")
    found = engine_waits(SHM_BAR + SHM_WAIT.format(m=25) + advanced + SHM_WAIT.format(m=27))
    assert found == [(4, 60.0), (3, 60.0)]


def test_a_console_that_ends_in_an_engine_s_declared_wait_ended_in_its_hang(
    tmp_path: Path,
) -> None:
    """One minute of vLLM's queue waiting while it serves, and the console ends: the engine
    hung there, and time runs on to where inference_stalled's 180 s after the wait began
    ends. Its stats after the wait (it reports again) leave the rule to judge them."""
    assert fired(tmp_path, SHM_BAR + SHM_WAIT.format(m=25)) == ["inference_stalled"]
    after = IDLE.replace("11:24:00", "11:25:55")
    assert fired(tmp_path, SHM_BAR + SHM_WAIT.format(m=25) + after) == []


#: a process's uncaught exception (Python's own report, as every console shows it)
CRASH = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 10, in <module>\n'
    "    main()\n"
    '  File "train.py", line 5, in main\n'
    "    model = load()\n"
    "RuntimeError: CUDA error: out of memory\n"
)


def test_a_console_that_shows_a_failure_did_not_end_in_a_hang(tmp_path: Path) -> None:
    """A wait the console ends in ran on to its rule's decision because a job that went on
    would have said so; a job that failed said something else: its processes died, they did
    not hang there. The failure is what fires, as `runwatch watch` of the same output says
    (the command ends with it), not a stall after the console's end."""
    waiting = "".join(BARRIER.format(t=clock(s)) for s in range(10, 70, 10))
    assert fired(tmp_path, waiting) == ["ranks_stalled"]
    assert fired(tmp_path, waiting + CRASH) == ["component_failed"]
    assert fired(tmp_path, HVD_1442 + CRASH) == ["component_failed"]
    assert fired(tmp_path, SHM_BAR + SHM_WAIT.format(m=25)) == ["inference_stalled"]
    assert fired(tmp_path, SHM_BAR + SHM_WAIT.format(m=25) + CRASH) == ["component_failed"]
    # a wait its console shows past the rule's limit is a stall whatever came after
    long = "".join(BARRIER.format(t=clock(s)) for s in range(10, 400, 10))
    assert fired(tmp_path, long + CRASH) == ["component_failed", "ranks_stalled"]


#: https://github.com/ChenRocks/UNITER/issues/33 (Horovod's stall warnings while rank 0 evaluated
#: alone; the bar then reached its end and the evaluation finished: whole lines as posted)
HVD_UNITER_33 = (
    "[1,0]<stderr>:Stalled ranks:\n"
    "[1,0]<stderr>:0: [allgather.noname.1]\n"
    " 97%|█████████▋| 1222/1264 [18:55<00:35,  1.19it/s][1,0]<stderr>:[2020-09-22 "
    "17:25:14.668682: W horovod/common/operations.cc:779] One or more tensors were submitted to "
    "be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
    "ranks for more than 60 seconds. This may indicate that different ranks are trying to "
    "submit different tensors or that only subset of ranks is submitting tensors, which will "
    "cause deadlock. \n"
    "[1,0]<stderr>:Stalled ranks:\n"
    "[1,0]<stderr>:0: [allgather.noname.1]\n"
    "100%|██████████| 1264/1264 [19:28<00:00,  1.76it/s][1,0]<stderr>:09/22/2020 17:25:47 - INFO "
    "- __main__ -   **evaluation finished in 1168 seconds, score_qa: 0.00 score_qar: 0.00 "
    "score: 0.00** \n"
)
#: https://github.com/horovod/horovod/issues/1737 (a stall warning naming rank 1, then both
#: ranks' TensorFlow metrics and step lines: training went on; whole lines as posted)
HVD_1737 = (
    "[1,0]<stderr>:[2020-02-25 11:13:55.899666: W horovod/common/stall_inspector.cc:105] One or "
    "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
    "are waiting for remainder of ranks for more than 60 seconds. This may indicate that "
    "different ranks are trying to submit different tensors or that only subset of ranks is "
    "submitting tensors, which will cause deadlock. \n"
    "[1,0]<stderr>:Stalled ranks:\n"
    "[1,0]<stderr>:1: [DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_0, "
    "DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_100_0, "
    "DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_101_0, "
    "DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_102_0, "
    "DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_103_0, "
    "DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_104_0 ...]\n"
    "[1,1]<stderr>:INFO:tensorflow:cross_entropy = 3.216353, learning_rate = 0.014, "
    "train_mean_iou = 0.0036734608, train_px_accuracy = 0.016648313\n"
    "[1,0]<stderr>:INFO:tensorflow:cross_entropy = 3.7933412, learning_rate = 0.014, "
    "train_mean_iou = 0.008086117, train_px_accuracy = 0.031079648\n"
    "[1,1]<stderr>:INFO:tensorflow:loss = 25.564167, step = 0\n"
)


def test_a_horovod_stall_the_job_went_on_after_is_no_stall(tmp_path: Path) -> None:
    """Healthy controls from real consoles: Horovod warns while one rank evaluates alone (its
    maintainers: a recoverable stall) and the job goes on -- the bar's advance, a step line
    after the warning end the wait, so the console's end is no hang."""
    assert fired(tmp_path, HVD_UNITER_33) == []
    assert fired(tmp_path, HVD_1737) == []
    assert statuses(HVD_1737)[-1]["phase"] == "exited"


#: https://github.com/jax-ml/jax/issues/22740 (corpus19 dev): XLA's rendezvous waiting for the
#: other host's participants
XLA_22740 = (
    "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has "
    "been waiting for `initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7,8,9,10,11,"
    "12,13,14,15]; stream=0; run_id=724296073` for 10 seconds and may be stuck. Expected 8 "
    "threads to join the rendezvous, but not all of them arrived on time.\n"
)


def test_xla_s_rendezvous_that_may_be_stuck_is_a_rank_waiting(tmp_path: Path) -> None:
    """xla/service/rendezvous.cc `AwaitAndLogIfStuck`: the rank its clique names waits, of as
    many ranks as the clique's devices; a console that ends there ended in its hang; XLA's
    `Thread is unstuck!` ends the wait (rendered from its format string)."""
    (status,) = statuses(XLA_22740)
    assert (status["rank"], status["world_size"], status["phase"], status["waited"]) == (
        6, 16, "xla_rendezvous", 10.0)  # fmt: skip
    assert fired(tmp_path, XLA_22740) == ["ranks_stalled"]
    unstuck = (
        "2024-07-29 17:15:20.000000: E external/xla/xla/service/rendezvous.cc:46] Thread is "
        "unstuck! Warning above was a false-positive. Perhaps the timeout is too short.\n"
    )
    assert fired(tmp_path, XLA_22740 + unstuck) == []


#: https://github.com/jax-ml/jax/issues/6896 (corpus31/dev: JAX's pmap on four GPUs, XLA's older
#: copy of the wait, collective_ops_utils.h `WaitAndLogIfStuck`, each line as posted)
XLA_6896 = "".join(
    "2021-06-01 12:09:{t}: E external/org_tensorflow/tensorflow/compiler/xla/service/"
    "collective_ops_utils.h:209] This thread has been waiting for 5000ms for and may be stuck: "
    f"participant for device ordinal {ordinal}, stream 0x5594682cb160 waiting for all "
    "participants to arrive at rendezvous RendezvousKey{run_id=RunId: 5, global_devices=[0,1,2,"
    "3], num_local_participants=4, collective_op_kind=cross_module, op_id=1}\n".replace("{t}", t)
    for ordinal, t in ((1, "19.912475"), (0, "19.977384"))
)


def test_xla_s_older_wait_in_ms_names_its_participant_s_ordinal(tmp_path: Path) -> None:
    """The older copy says the wait in ms and the rank by device ordinal (or `rank=`), the
    devices as `global_devices`: the same wait, ended by the same `Thread is unstuck!`."""
    found = statuses(XLA_6896)
    assert [(s["rank"], s["world_size"], s["phase"], s["waited"]) for s in found] == [
        (1, 4, "xla_rendezvous", 5.0), (0, 4, "xla_rendezvous", 5.0)]  # fmt: skip
    assert fired(tmp_path, XLA_6896) == ["ranks_stalled"]
    unstuck = (
        "2021-06-01 12:09:25.000000: E external/org_tensorflow/tensorflow/compiler/xla/service/"
        "collective_ops_utils.h:216] Thread is unstuck!  Warning above was a false-positive.  "
        "Perhaps the timeout is too short: participant for device ordinal 1\n"
    )
    assert fired(tmp_path, XLA_6896 + unstuck) == []


#: https://github.com/real-stanford/scalingup/issues/6 (corpus23/dev: Ray's autoscaler v1,
#: quoted in a reply), and v2's wording (autoscaler/v2/event_logger.py) rendered
RAY_INFEASIBLE_6 = (
    "(autoscaler +32s) Error: No available node types can fulfill resource request {'CPU': 1.0, "
    "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.\n"
)
RAY_INFEASIBLE_V2 = (
    "(autoscaler +1m4s) No available node types can fulfill resource requests {'GPU': 8.0}*2. "
    "Add suitable node types to this cluster to resolve this issue.\n"
)


def test_a_request_no_node_type_can_fulfill_is_a_wait_ray_declares(tmp_path: Path) -> None:
    """The work that asked for it cannot be placed on any node the cluster may have: a console
    that ends in it hung there; steps after it (the cluster was changed) end the wait."""
    for line in (RAY_INFEASIBLE_6, RAY_INFEASIBLE_V2):
        assert statuses(line) == [
            {"rank": 0, "world_size": 1, "phase": "ray_infeasible_request", "waited": 0.0}
        ]
        assert fired(tmp_path, line) == ["ranks_stalled"]
    step = "step:1 - actor/loss:0.5 - critic/score/mean:0.3\n"
    assert fired(tmp_path, RAY_INFEASIBLE_6 + step) == []


#: https://github.com/ray-project/ray/issues/16549 (corpus29/dev: a KubeRay-era operator's
#: autoscaler at DEBUG), the resource demand scheduler's older wording; and its later one
#: (resource_demand_scheduler.py `get_nodes_for`), as ray#48471 posted it (corpus29/dev)
RAY_NO_NODE_TYPE_16549 = (
    "test,dev:2021-06-29 11:07:07,666\tWARNING resource_demand_scheduler.py:712 -- The autoscaler "
    "could not find a node type to satisfy the request: [{'CPU': 1.0}, {'CPU': 1.0}]. If this "
    "request is related to placement groups the resource request will resolve itself, otherwise "
    "please specify a node type with the necessary resource https://docs.ray.io/en/master/"
    "cluster/autoscaling.html#multiple-node-type-autoscaling.\n"
)
RAY_NO_NODE_TYPE_48471 = (
    "resource_demand_scheduler.py:782 -- The autoscaler could not find a node type to satisfy "
    "the request: [{'node:__internal_implicit_resource_my-deployment:my-deployment': 0.5, "
    "'GPU': 0.32}]. Please specify a node type with the necessary resources.\n"
)
#: ray#48471's Serve controller before it, and the autoscaler's demand after it
SERVE_48471 = (
    "Deployment 'my-deployment' in application 'my-deployment' 1 replicas that have taken more "
    "than 30s to be scheduled. This may be due to waiting for the cluster to auto-scale or for a "
    'runtime environment to be installed. Resources required for each replica: {"GPU": 0.32}, '
    'total resources available: {"GPU": 0.36}. Use `ray status` for more details.\n'
)
PENDING_48471 = (
    "{'GPU': 0.32, 'node:__internal_implicit_resource_my-deployment:my-deployment': 0.5}: "
    "1+ pending tasks/actors\n"
)


def test_the_autoscaler_s_own_log_saying_no_node_type_can_satisfy_is_the_same_wait(
    tmp_path: Path,
) -> None:
    """The resource demand scheduler's "could not find a node type to satisfy the request" is
    the driver's "No available node types can fulfill" in the autoscaler's own log: the same
    declared wait. A placement group's bundles (`GPU_group_0_<id>`) are no such request: the
    older copies say it "will resolve itself", the later leave it unsaid."""
    for line in (RAY_NO_NODE_TYPE_16549, RAY_NO_NODE_TYPE_48471):
        assert statuses(line) == [
            {"rank": 0, "world_size": 1, "phase": "ray_infeasible_request", "waited": 0.0}
        ]
        assert fired(tmp_path, line) == ["ranks_stalled"]
    bundles = RAY_NO_NODE_TYPE_16549.replace(
        "{'CPU': 1.0}, {'CPU': 1.0}",
        "{'GPU_group_0_e899f4053aa6b3027ebf14aaf4d760f2': 0.0101, "
        "'GPU_group_e899f4053aa6b3027ebf14aaf4d760f2': 0.0101}",
    )
    assert statuses(bundles) == []
    step = "step:1 - actor/loss:0.5 - critic/score/mean:0.3\n"
    assert fired(tmp_path, RAY_NO_NODE_TYPE_48471 + step) == []


def test_a_framework_s_wait_outlives_a_catalogue_wait_of_the_same_rank_ending(
    tmp_path: Path,
) -> None:
    """ray#48471: Serve's replica past 30 s unscheduled (a catalogue wait of rank 0), then the
    autoscaler's no-node-type (a framework reader's, rank 0 too), then a line of neither: it
    ends the catalogue's wait, not the autoscaler's -- the console ends inside that one. A step
    after it ends both."""
    text = SERVE_48471 + RAY_NO_NODE_TYPE_48471 + PENDING_48471
    assert statuses(text)[-1]["phase"] == "ray_infeasible_request"
    assert fired(tmp_path, text) == ["ranks_stalled"]
    step = "step:1 - actor/loss:0.5 - critic/score/mean:0.3\n"
    assert fired(tmp_path, text + step) == []


#: vLLM V0's stats line (vllm/engine/metrics.py `LoggingStatLogger.log`, metrics.py:467), as
#: vllm#12795's CPU-mode engine wrote it every 31 s (corpus24/dev)
V0_STATS = (
    "INFO 02-06 00:{m:02d}:{s:02d} metrics.py:467] Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: {gen} tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, "
    "GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.\n"
)


def v0_stats(start: int, lines: int, gen: str = "0.0") -> str:
    times = [start + 31 * k for k in range(lines)]
    return "".join(V0_STATS.format(m=t // 60, s=t % 60, gen=gen) for t in times)


def test_a_console_that_ends_in_its_engine_s_stall_ended_in_its_hang(tmp_path: Path) -> None:
    """vllm#12795: the engine's stats lines, to its last, say one request runs and no token
    comes, for two and a half minutes: the console ended inside the engine's stall, and time
    runs on to where inference_stalled's 180 s decides it. Less than a minute of it, the
    engine moving at the end, a failure, or the job's step after it: no stall."""
    assert fired(tmp_path, v0_stats(2443, 6)) == ["inference_stalled"]
    assert fired(tmp_path, v0_stats(2443, 2)) == []
    assert fired(tmp_path, v0_stats(2443, 4)) == ["inference_stalled"]
    assert fired(tmp_path, v0_stats(2443, 4) + v0_stats(2443 + 31 * 4, 1, "12.5")) == []
    assert fired(tmp_path, v0_stats(2443, 4) + CRASH) == ["component_failed"]
    step = "INFO 02-06 00:42:40 trainer.py:1] step:7 - critic/score/mean:0.5 - actor/loss:0.1\n"
    assert fired(tmp_path, v0_stats(2443, 4) + step) == []


def test_an_engine_stall_from_a_log_s_clock_at_zero_began_there() -> None:
    """A log whose clock starts at midnight (00:00:00, 0.0 s of its day): the stall began at
    its first stalled line, not at the next."""
    from runwatch.emitters.console import LineParser

    parser = LineParser()
    for line in v0_stats(0, 4).splitlines():  # (00:00:00, 00:00:31, 00:01:02, 00:01:33)
        parser.read(line)
    ((kind, fields),) = parser.waits.stalled_engines()
    assert (kind, fields["waited"], fields["running"]) == ("inference.stats", 93.0, 1)
    assert parser.waits.stalled_engines() == []  # (told once)
    for line in v0_stats(124, 1, "12.5").splitlines() + v0_stats(155, 4).splitlines():
        parser.read(line)  # (it made tokens again, then stalled anew)
    ((_, again),) = parser.waits.stalled_engines()
    assert again["waited"] == 93.0


#: https://github.com/openpmix/openpmix/issues/17 (corpus26 dev): gdb's `bt` of two ranks of
#: Open MPI's ring_c hanging at launch, both parked in the start-up fence
GDB_FENCE = (
    "(gdb) bt\n"
    "#0  0x00000037694ac9fd in nanosleep () from /lib64/libc.so.6\n"
    "#1  0x00000037694e1b54 in usleep () from /lib64/libc.so.6\n"
    "#2  0x00007ffff67cb330 in OPAL_PMIX_PMIX1XX_PMIx_Fence (procs=0x0, nprocs=0, "
    "info=0x7fffffffca10, ninfo=1)\n"
    "    at src/client/pmix_client_fence.c:100\n"
    "#3  0x00007ffff69fbf1c in pmix1_fence (procs=0x0, collect_data=1) at pmix1_client.c:306\n"
    "#4  0x00007ffff7cd03e7 in ompi_mpi_init (argc=1, argv=0x7fffffffced8, requested=0, "
    "provided=0x7fffffffcd58) at runtime/ompi_mpi_init.c:644\n"
    "#5  0x00007ffff7d069d5 in PMPI_Init (argc=0x7fffffffcdbc, argv=0x7fffffffcdb0) at "
    "pinit.c:66\n"
    "#6  0x000000000040086e in main (argc=1, argv=0x7fffffffced8) at ring_c.c:19\n"
)
#: the same shape rendered for a rank spinning in Open MPI's progress engine under a barrier
GDB_BARRIER = (
    "#0  0x00007f3c1a2b4c10 in opal_progress () at runtime/opal_progress.c:231\n"
    "#1  0x00007f3c1a9d2e45 in ompi_request_default_wait (req_ptr=0x7ffd, status=0x0) at "
    "request/req_wait.c:42\n"
    "#2  0x00007f3c1aa31b5e in ompi_coll_base_barrier_intra_recursivedoubling (comm=0x6020a0) "
    "at base/coll_base_barrier.c:218\n"
    "#3  0x00007f3c1a9e6f1a in PMPI_Barrier (comm=0x6020a0) at pbarrier.c:66\n"
    "#4  0x0000000000400a3e in main (argc=1, argv=0x7ffd) at hang.c:12\n"
)


def test_gdb_s_native_backtrace_of_ranks_parked_in_a_fence_is_their_wait(tmp_path: Path) -> None:
    """gdb's `bt` (gdb/stack.c print_frame), innermost first: a thread parked -- asleep,
    polling, spinning in a progress engine -- under a fence's or a collective's frame waits
    there, in the order the stacks come; a console that ends in them ended in its hang."""
    assert [(s["rank"], s["phase"]) for s in statuses(GDB_FENCE + GDB_FENCE)] == [
        (0, "PMIx_Fence"), (1, "PMIx_Fence")]  # fmt: skip
    assert [s["phase"] for s in statuses(GDB_BARRIER)] == ["PMPI_Barrier"]
    assert fired(tmp_path, GDB_FENCE + GDB_FENCE) == ["ranks_stalled"]
    scanner = LineScanner(LineParser())
    watched = scanner.feed((GDB_FENCE + GDB_BARRIER).encode()) + scanner.finish()
    assert [f for k, f in watched if k == "rank.status"] == statuses(GDB_FENCE + GDB_BARRIER)


#: MPICH's rank blocked under mpi4py's broadcast (dlio_benchmark's hang, corpus51/dev, its
#: frames as gdb printed them): MPICH's progress engine in its own case, and MPI 4's
#: large-count binding `PMPI_Bcast_c` that MPICH 4 gives mpi4py
GDB_MPICH = (
    "#0  0x00007f8791658967 in MPIDI_CH3I_Progress () from /usr/lib64/mpich/lib/libmpi.so.12\n"
    "#1  0x00007f87916ff592 in MPIR_Wait_impl.isra.0 () from /usr/lib64/mpich/lib/libmpi.so.12\n"
    "#2  0x00007f87915e4ce3 in MPIC_Wait () from /usr/lib64/mpich/lib/libmpi.so.12\n"
    "#3  0x00007f87915e516a in MPIC_Recv () from /usr/lib64/mpich/lib/libmpi.so.12\n"
    "#4  0x00007f879157703 in MPIR_Bcast_intra_binomial () from /usr/lib64/mpich/lib/libmpi.so.12\n"
    "#5  0x00007f8791454a5b in PMPI_Bcast_c () from /usr/lib64/mpich/lib/libmpi.so.12\n"
)


def test_mpich_s_rank_parked_in_its_progress_engine_under_a_large_count_bcast(
    tmp_path: Path,
) -> None:
    assert [s["phase"] for s in statuses(GDB_MPICH)] == ["PMPI_Bcast_c"]
    assert fired(tmp_path, GDB_MPICH) == ["ranks_stalled"]
    # quoted, under a launcher's prefix that came first: the quote's marks stay before `#0`
    quoted = "".join(f"[default0]:> {line}\n" for line in GDB_MPICH.splitlines())
    assert [s["phase"] for s in statuses(quoted)] == ["PMPI_Bcast_c"]


def test_horovod_s_list_of_ranks_with_no_prefix_before_it() -> None:
    """`1: [allreduce.x]` alone looks like srun's label before `[allreduce.x]`: inside the
    warning's list it is the list's rank line."""
    text = (
        "[2024-01-01 10:00:21.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
        "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
        "waiting for remainder of ranks for more than 60 seconds. This may indicate that "
        "different ranks are trying to submit different tensors or that only subset of ranks is "
        "submitting tensors, which will cause deadlock.\nMissing ranks:\n1: [allreduce.x]\n"
    )
    assert [(s["rank"], s["phase"]) for s in statuses(text)] == [
        (1, "horovod_collective_not_submitted")
    ]


def test_a_native_stack_that_works_or_crashed_is_no_wait(tmp_path: Path) -> None:
    """A thread whose innermost frame is at work (computing, copying) is where the others
    wait for it, not a wait; after a crash's signal (a core's `Program terminated with signal
    SIGSEGV`) every stack is the crash's; a person's Ctrl-C at gdb (SIGINT) stops a living
    process to look at it."""
    working = GDB_BARRIER.replace("opal_progress ()", "dgemm_kernel (a=0x1)")
    assert statuses(working) == []
    crashed = "Program terminated with signal SIGSEGV, Segmentation fault.\n" + GDB_BARRIER
    assert statuses(crashed) == []
    assert "ranks_stalled" not in fired(tmp_path, crashed)  # (its death is the catalogue's)
    looked = 'Thread 1 "ring_c" received signal SIGINT, Interrupt.\n' + GDB_FENCE
    assert [s["phase"] for s in statuses(looked)] == ["PMIx_Fence"]
    going_on = GDB_FENCE + "Iteration 12: loss 0.41\n"  # (the job went on after the look)
    assert statuses(going_on)[-1]["phase"] == "exited"
    assert fired(tmp_path, going_on) == []
    cut = GDB_FENCE.replace("#3 ", "#9 ")  # (a frame out of order ends the stack's reading)
    assert [s["phase"] for s in statuses(cut)] == ["PMIx_Fence"]


#: https://github.com/pytorch/pytorch/pull/140969 (corpus49/dev: the flight-recorder analyzer's
#: verdict on an 8-rank job's dumps, `EntryState.log`'s fields; the frames cut here)
FR_140969 = (
    "Not all ranks joining collective: sequence number: 31117\n"
    "internal record id: 31116\n"
    "group info: 0:default_pg\n"
    "collective: nccl:all_reduce\n"
    "missing ranks: {3, 4, 5, 6, 7}\n"
    "input sizes: [[1571911]]\n"
    "output sizes: [[1571911]]\n"
    "world size: 8\n"
    "expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}\n"
    "collective state: scheduled\n"
    "collective stack trace:\n"
    " all_reduce at /packages/torch/distributed/distributed_c10d.py:2707\n"
)
#: its first copy (tools/flight_recorder/components/builder.py, logger.info's format strings
#: rendered): the entry's number, `expected ranks` a count
FR_BUILDER = (
    "Not all ranks joining collective 5 at entry 4\n"
    "group info: 0:default_pg\n"
    "collective: nccl:all_reduce\n"
    "missing ranks: {1}\n"
    "input sizes: [[3, 4]]\n"
    "output sizes: [[3, 4]]\n"
    "expected ranks: 2\n"
    "collective state: scheduled\n"
)
#: ... and its oldest, one print() of several arguments (the format strings rendered)
FR_PRINT = (
    "Not all ranks joining collective for group 0:default_pg collective nccl:_allgather_base  "
    "Missing ranks are {2, 3}\n"
)


def test_the_flight_recorder_s_verdict_is_ranks_waiting_for_those_that_did_not_join(
    tmp_path: Path,
) -> None:
    """Its every form: the missing ranks not joined, the rest (where it says them) waiting in
    the collective; a console that ends in it ended in its hang, read line by line or by the
    scanner."""
    got = {(f["rank"], f["phase"]) for f in statuses(FR_140969)}
    assert got == {(r, "all_reduce") for r in range(3)} | {
        (r, "all_reduce_not_joined") for r in range(3, 8)
    }
    assert {(f["rank"], f["phase"]) for f in statuses(FR_BUILDER)} == {
        (0, "all_reduce"), (1, "all_reduce_not_joined")}  # fmt: skip
    assert {(f["rank"], f["phase"]) for f in statuses(FR_PRINT)} == {
        (2, "_allgather_base_not_joined"), (3, "_allgather_base_not_joined")}  # fmt: skip
    scanned = LineScanner(LineParser()).feed(FR_140969.encode())
    assert len([f for k, f in scanned if k == "rank.status"]) == 8
    for text in (FR_140969, FR_BUILDER, FR_PRINT):
        assert fired(tmp_path, text) == ["ranks_stalled"]


def test_a_field_of_the_flight_recorder_s_outside_its_verdict_is_no_wait(tmp_path: Path) -> None:
    """`missing ranks: {...}` and `world size: N` alone (another tool's, a config dump) name no
    rank: only under the verdict's head are they its fields."""
    text = "world size: 8\nmissing ranks: {3}\ncollective: nccl:all_reduce\n"
    assert statuses(text) == []
    assert fired(tmp_path, text) == []

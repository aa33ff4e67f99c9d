"""Collective timeouts read from more frameworks' sources (corpus22 dev, issue 41): XLA's wait
for an NCCL clique's unique id in the coordination service, the gloo PaddlePaddle builds, the
master of ytk-mp4j, and torch's watchdog line cut right after its head. Each is read from a
real console line (the fixture named) through the readers and the scanner; lines that share
the words and say no timeout are read as none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import read_all, scanned

from runwatch.emitters import collectives
from runwatch.emitters.collectives import parse

DEV = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "corpus22" / "dev"
CLIQUE = "timeout_enzyme_jax_multinode_execution_failed_getkeyvalue_timed_out_clique_key_10m"
GLOO = "timeout_paddleocr_cpu_distributed_after_eval_gloo_timeoutexception_self_rank_none_sigabrt"
MP4J = "timeout_ytk_learn_mp4j_master_waiting_for_heartbeat_timeout_600000_shutdown_one_line"
SPLIT = "timeout_nemo_rl_gb200_grpo_offload_after_refit_4106s_then_allgather_watchdog_split_line"


CORPUS25 = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "corpus25" / "dev"
HCCL = CORPUS25 / "torch_npu_hccl_watchdog_allreduce_seqnum_196_ran_3600185_ms_terminate_called.log"


def _lines(name: str) -> list[str]:
    return [x for x in (DEV / f"{name}.log").read_text().splitlines() if not x.startswith("# ")]


def _timeouts(found: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [f for k, f in found if k == "collective.timeout"]


def _said(fields: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    return tuple(fields.get(k) for k in keys)


def test_xla_waiting_for_the_nccl_clique_id_timed_out() -> None:
    lines = _lines(CLIQUE)
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        said = _said(fields, "backend", "op", "timeout_s")
        assert said == ("nccl", "ncclUniqueId", 600.0)


@pytest.mark.parametrize(("said", "seconds"), [("10m", 600.0), ("1h30m", 5400.0), ("2.5s", 2.5)])
def test_the_clique_wait_s_duration_is_absl_s(said: str, seconds: float) -> None:
    line = ("Execution of replica 0 failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
            f"devices=[0,1]; stream=0; root_device=0 and duration: {said}")  # fmt: skip
    found = parse(line)
    assert found is not None
    assert found[1]["timeout_s"] == seconds


@pytest.mark.parametrize(("key", "op"), [
    ("cuda:local_topology/cuda/1", "local topology exchange"),
    ("local_topology:3", "local topology exchange"),
    ("cuda:global_topology/cuda", "global topology exchange"),
])  # fmt: skip
def test_a_pjrt_client_s_topology_exchange_timing_out_is_the_group_never_formed(
    key: str, op: str
) -> None:
    """topology_util.cc's ExchangeTopologies: a node that never published its topology."""
    line = ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Getting local topologies failed: "
            f"Error 1: GetKeyValue() timed out with key: {key} and duration: 2m")  # fmt: skip
    found = parse(line)
    assert found is not None
    assert _said(found[1], "backend", "op", "timeout_s") == ("coordination", op, 120.0)


def test_a_key_of_the_program_s_own_is_no_collective() -> None:
    """A program's own key-value wait (`blocking_key_value_get`) is the program's."""
    line = ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out "
            "with key: my_app/checkpoint_done and duration: 5m")  # fmt: skip
    assert parse(line) is None


def test_paddle_s_gloo_timeout_is_a_collective_s_and_the_abort_stands() -> None:
    found = read_all(_lines(GLOO))
    (fields,) = _timeouts(found)
    assert _said(fields, "backend", "op") == ("gloo", "recv")
    assert "component.failed" in {k for k, _ in found}  # gloo has no watchdog that aborts


@pytest.mark.parametrize(("ranks", "op"), [
    ("self_rank = none pair_rank = -1", "recv"),
    ("self_rank = 3 pair_rank = none", "send"),
    ("self_rank = 3 pair_rank = 1", "transfer"),
])  # fmt: skip
def test_paddle_s_gloo_says_which_way_by_the_rank_it_knows(ranks: str, op: str) -> None:
    line = ("  what():  [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:366] "
            f"TIMEOUT {ranks} peer_str = none")  # fmt: skip
    found = parse(line)
    assert found is not None
    assert found[1]["op"] == op


def test_mp4j_s_master_giving_up_on_a_heartbeat_is_a_timeout_and_its_end() -> None:
    lines = _lines(MP4J)
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op", "timeout_s") == ("mp4j", "heartbeat", 600.0)
        assert "component.failed" in {k for k, _ in found}


@pytest.mark.parametrize("line", [
    "2017.12.27 12:19:28 com.fenbi.mp4j.rpc.Server - waiting for connecting check...",
    "2017.12.27 12:19:28 com.fenbi.mp4j.rpc.Server - connecting check ok!",
    "2017.12.27 12:19:58 com.fenbi.mp4j.rpc.Server - heart beat check ok!",
    "2017.12.27 14:19:28 com.fenbi.mp4j.rpc.Server - all slaves have sent close messages! server "
    "will be closed right now!",
])  # fmt: skip
def test_mp4j_s_checks_that_pass_are_none(line: str) -> None:
    assert parse(line) is None
    assert read_all([line]) == []


def test_a_watchdog_line_cut_after_its_head_is_the_timeout_it_names() -> None:
    lines = _lines(SPLIT)
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        assert _said(fields, "seq", "op", "timeout_s") == (64214, "ALLGATHER", 600.0)


def test_a_work_s_description_alone_is_no_timeout() -> None:
    """A work's description names no timeout: only the watchdog's words, before or after it,
    make the work a timed-out one."""
    line = "WorkNCCL(SeqNum=64214, OpType=ALLGATHER, NumelIn=1, NumelOut=32, Timeout(ms)=600000)"
    assert parse(line) is None
    assert collectives.starts_unfinished(line)  # (and a reader holds it for its tail)


@pytest.mark.parametrize(("said", "op"), [
    ("during execution", "execution"),
    ("waiting for other workers", "group resolution"),
])  # fmt: skip
def test_tensorflow_s_collective_ops_timing_out(said: str, op: str) -> None:
    """base_collective_executor.cc's DEADLINE_EXCEEDED of a collective given a timeout."""
    line = (f"tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective has timed "
            f"out {said}. [Op:CollectiveReduceV2]")  # fmt: skip
    for found in (read_all([line]), scanned([line])):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op") == ("tensorflow", op)


def test_torch_npu_s_hccl_watchdog_timeout_is_the_collective_s_and_its_abort_stands() -> None:
    """torch_npu's ProcessGroupHCCL words its watchdog's timeout as torch's, its work
    `WorkHCCL(...)`; the `terminate called` after it is the watchdog's teardown."""
    lines = [x for x in HCCL.read_text().splitlines() if not x.startswith("# ")]
    for found in (read_all(lines), scanned(lines)):
        timeouts = _timeouts(found)
        assert timeouts
        said = _said(timeouts[0], "backend", "seq", "op", "timeout_s", "ran_s", "rank")
        assert said == ("hccl", 196, "ALLREDUCE", 3600.0, 3600.185, 1)
        assert not [f for k, f in found if k == "component.failed"]


def test_a_newer_hccl_work_with_its_sizes_is_read_alike() -> None:
    """Newer torch_npu prints the work's element counts between its op and its timeout."""
    line = (
        "[rank0]:[E1107 10:01:02.000000000 compiler_depend.ts:574] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkHCCL(SeqNum=7, OpType=BROADCAST, NumelIn=16, "
        "NumelOut=16, Timeout(ms)=1800000) ran for 1800042 milliseconds before timing out."
    )
    found = parse(line, rank=0)
    assert found is not None
    assert _said(found[1], "backend", "seq", "op", "timeout_s") == ("hccl", 7, "BROADCAST", 1800.0)


@pytest.mark.parametrize("timeout", ["120 s", "120"], ids=["hccl-docs", "cann-8"])
def test_hccl_s_link_setup_timeout_is_a_collective_s_at_connect(timeout: str) -> None:
    """HCCL's own log line for EI0006: the link to a peer not set up within
    HCCL_CONNECT_TIMEOUT (hicann/hccl's fault-diagnosis guide's line; CANN 8's as vllm-ascend
    printed it, corpus43) -- a collective timeout of rank 12, not a failure the catalogue
    names. CANN's own code `EI0006: ...` before a time is no pdsh host's label."""
    line = (
        "[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [hccl_socket_manager.cc:778] "
        "[2734049][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12] "
        f"timeout[{timeout}]"
    )
    for found in (read_all([line]), scanned([line])):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op", "group_rank", "timeout_s") == (
            "hccl", "socket", 12, 120.0)  # fmt: skip
    code = "EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out. Reason: Remote Rank"
    (fields,) = _timeouts(read_all([code]))
    assert _said(fields, "backend", "op") == ("hccl", "socket")


CORPUS26 = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "corpus26" / "dev"
JAX_REGISTER = "jax_0_8_1_tpu_v6e_multislice_initialize_registertask_deadline_exceeded"
PRRTE_DMDX = "openmpi_prrte_dmdx_request_timed_out_pmix_server_max_wait_mtt_killed_mpirun"


def _lines26(name: str) -> list[str]:
    text = (CORPUS26 / f"{name}.log").read_text()
    return [x for x in text.splitlines() if not x.startswith("# ")]


def test_a_coordination_service_registration_past_its_deadline_is_the_group_never_formed() -> None:
    """JAX renders the status over lines (`DEADLINE_EXCEEDED: Deadline Exceeded`, then `RPC:
    /tensorflow.CoordinationService/RegisterTask`, jax#35905): the task's registration, which
    the service answers once every task registered, ran past its deadline."""
    lines = _lines26(JAX_REGISTER)
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op") == ("coordination", "RegisterTask")
    older = [
        "DEADLINE_EXCEEDED: Deadline Exceeded",
        "Additional GRPC error information from remote target unknown_target_for_coordination_"
        "leader while calling /tensorflow.CoordinationService/WaitForAllTasks:",
    ]
    assert [f["op"] for f in _timeouts(read_all(older))] == ["WaitForAllTasks"]


@pytest.mark.parametrize("lines", [
    # a heartbeat's or error poll's status is a peer gone, no rendezvous (the catalogue's)
    ["DEADLINE_EXCEEDED: Deadline Exceeded", "RPC: /tensorflow.CoordinationService/Heartbeat"],
    ["UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
     "RPC: /tensorflow.CoordinationService/PollForError"],
    # another status code: the coordinator refused, it did not wait
    ["ALREADY_EXISTS: task restarted", "RPC: /tensorflow.CoordinationService/RegisterTask"],
    # the call named too far from its status: another message's
    ["DEADLINE_EXCEEDED: Deadline Exceeded", "a", "b", "c", "d",
     "RPC: /tensorflow.CoordinationService/RegisterTask"],
])  # fmt: skip
def test_a_coordination_call_without_its_deadline_is_none(lines: list[str]) -> None:
    assert _timeouts(read_all(lines)) == []
    assert _timeouts(scanned(lines)) == []


def test_a_barrier_s_timeout_said_whole_is_read_once_though_its_call_follows() -> None:
    lines = [
        "XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect",
        "",
        "RPC: /tensorflow.CoordinationService/Barrier",
    ]
    assert [f["op"] for f in _timeouts(read_all(lines))] == ["barrier PjRT_Client_Connect"]


def test_prrte_s_direct_modex_request_timing_out_is_the_ranks_exchange_timing_out() -> None:
    """PRRTE's `timedout` help (pmix_server.c's eviction callback): the operation `DMDX: ...`
    is one process's request for a peer's published data that never came; MTT's kill of the
    run after it is the run's death (the catalogue's)."""
    lines = _lines26(PRRTE_DMDX)
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op") == ("pmix", "direct modex")
        assert any(k == "component.failed" for k, _ in found)


def test_prrte_s_other_help_naming_a_dmdx_operation_is_no_timeout() -> None:
    """`noroom` (help-prted.txt): the daemon's tracking array was full -- no wait timed out."""
    lines = [
        "A request for an asynchronous runtime operation cannot be fulfilled",
        "because of a lack of room in the tracking array:",
        "",
        "  Operation:  DMDX: prted/pmix/pmix_server.c:861",
        "  Number of rooms:  1024",
    ]
    assert _timeouts(read_all(lines)) == []


def test_the_call_said_before_its_deadline_is_read_alike() -> None:
    """https://github.com/google/paxml/issues/77: the paste begins at the call, then gRPC's
    debug string (`"description":"Deadline Exceeded"`, `"grpc_status":4`) and the agent's
    error status -- one timeout."""
    lines = [
        "> > Additional GRPC error information from remote target unknown_target_for_coordination"
        "_leader while calling /tensorflow.CoordinationService/RegisterTask:",
        '> :{"created":"@1712965181.656280441","description":"Deadline Exceeded","file":"external/'
        'com_github_grpc_grpc/src/core/ext/filters/deadline/deadline_filter.cc","file_line":69,'
        '"grpc_status":4}',
        "> 2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] "
        "Coordination service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded",
    ]
    for found in (read_all(lines), scanned(lines)):
        assert [f["op"] for f in _timeouts(found)] == ["RegisterTask"]
    unavailable = [lines[0], lines[1].replace("Deadline Exceeded", "failed to connect")
                   .replace('"grpc_status":4', '"grpc_status":14')]  # fmt: skip
    assert _timeouts(read_all(unavailable)) == []


def test_an_older_torch_s_watchdog_line_without_a_sequence_number() -> None:
    """yolov7#714 (corpus52/dev), as posted: older torch's WorkNCCL printed no `SeqNum`; the
    timeout, its op and the rank are read all the same, no sequence number made up."""
    line = ("[E ProcessGroupNCCL.cpp:587] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1803170 milliseconds before "
            "timing out")  # fmt: skip
    found = parse(line)
    assert found is not None
    _, fields = found
    assert (fields["op"], fields["timeout_s"], fields["ran_s"]) == ("ALLREDUCE", 1800.0, 1803.17)
    assert "seq" not in fields
    assert [k for k, _ in read_all([f"`{line}`"])] == ["collective.timeout"]


COSMOS = (
    Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "corpus53" / "dev"
    / "cosmos_rl_rollout_mesh_rebuild_three_survivors_timed_out_building_communicator.log"
)  # fmt: skip


def test_any_stack_s_words_that_a_group_s_set_up_timed_out() -> None:
    """cosmos-rl's replicas rebuilding their mesh (corpus53): three survivors each say their
    communicator's building timed out -- words no stack's own reading knows; one timeout a
    rank, the rank the line names."""
    lines = [x for x in COSMOS.read_text().splitlines() if not x.startswith("# ")]
    for found in (read_all(lines), scanned(lines)):
        said = [_said(f, "backend", "op", "rank") for f in _timeouts(found)]
        assert said == [("nccl", "communicator set-up", r) for r in (0, 2, 3)]


@pytest.mark.parametrize(
    ("line", "backend", "op", "rank"),
    [
        # cosmos_rl/utils/distributed.py's own wait
        (
            "[Rank 1] wait for nccl comm ready timeout, current time: 1.0, start time: 0.0",
            "nccl",
            "comm set-up",
            None,
        ),
        ("wait for nccl comm ready has timed out", "nccl", "comm set-up", None),
        ("Timed out initializing the process group", "nccl", "process group set-up", None),
        (
            "RuntimeError: timed out while creating the HCCL communicator",
            "hccl",
            "communicator set-up",
            None,
        ),
        ("NCCL communicator init timed out", "nccl", "communicator set-up", None),
        (
            "Process group initialization timed out after 1800 seconds",
            "nccl",
            "process group set-up",
            None,
        ),
        ("TIMED OUT CREATING NCCL COMMUNICATOR", "nccl", "communicator set-up", None),
        # the rank a `rank=N` names, not a peer's before it; the backend the words name
        (
            "[gloo] Timed out building the NCCL communicator for peer rank 5 (rank=2)",
            "nccl",
            "communicator set-up",
            2,
        ),
    ],
)
def test_a_group_s_set_up_timing_out_in_other_words(
    line: str, backend: str, op: str, rank: int | None
) -> None:
    for found in (read_all([line]), scanned([line])):  # `runwatch watch` finds the line too
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op", "rank") == (backend, op, rank)


@pytest.mark.parametrize(
    "line",
    [
        "NCCL timeout: 1800s",  # a setting
        "waiting for the nccl communicator timeout=1800",
        "wait for nccl comm ready timeout set to 600 seconds",
        "Waiting for rendezvous timeout of 900 seconds",
        "  --dist-timeout MINUTES  wait for process group timeout in minutes (default: 30)",
        # argparse's help: a condition
        "  --pg-timeout S  raise an error if timed out waiting for the process group (default: 1)",
        "Timed out waiting for engine core processes to start",  # no group's
        "Timed out waiting for comm message reply",  # a message's, no backend's comm
        "Retrying: timed out waiting for reply from rendezvous server (attempt 1/5)",  # a retry
        "timed out joining rendezvous, retrying (attempt 1 of 3)",
        # a teardown's wait
        "[rank0]:[W ProcessGroupNCCL.cpp:1234] Timed out waiting for the process group to shut "
        "down cleanly",
        "set NCCL communicator timeout to 30 min",
        "init_process_group(backend='nccl', timeout=timedelta(minutes=30))",
        "Timed out waiting for reply from rendezvous",  # a message's, no group's set-up
        # a way on after it, a count, a question, a test's
        "NCCL communicator init timed out, re-initializing",
        "Communicator creation timed out, falling back to gloo",
        "INFO: rendezvous timed out waiting for more nodes; starting with 2 of 4 (min_nodes=2)",
        "communicator timed out? no",
        '"collective communicator timed out" counter: 0',
        "Test test_pg: process group timed out as expected PASSED",
        "gRPC mesh timed out while resolving DNS for svc",  # a service mesh
    ],
)
def test_a_group_s_timeout_setting_is_no_timeout(line: str) -> None:
    assert parse(line) is None
    assert _timeouts(read_all([line])) == []


CORPUS54 = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "corpus54" / "dev"
CLIENTS = (
    CORPUS54
    / "vllm_dp_embed_task_init_process_group_tcpstore_diststoreerror_601s_1_of_4_clients.log"
)


def test_the_tcp_store_s_server_waiting_for_clients_timed_out() -> None:
    """torch's TCPStore server at init_process_group's rendezvous: `DistStoreError: Timed out
    after 601 seconds waiting for clients. 1/4 clients joined.` (TCPStore.cpp `waitForWorkers`;
    corpus54): the group never formed."""
    lines = [x for x in CLIENTS.read_text().splitlines() if not x.startswith("# ")]
    for found in (read_all(lines), scanned(lines)):
        (fields,) = _timeouts(found)
        assert _said(fields, "backend", "op", "timeout_s") == ("c10d", "wait for clients", 601.0)

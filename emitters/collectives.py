"""Timed-out collectives read from a console: torch's NCCL watchdog, gloo and the c10d store,
and the other stacks' collectives and group set-ups that time out (XLA's coordination service,
Ascend's HCCL, TensorFlow's collective ops, the gloo Paddle builds, ps-lite, ytk-mp4j, Ray
Train's worker group), as `collective.timeout` events -- each cited from its source below.

The wordings it reads, torch release by torch release (the NCCL watchdog, the process
group's status line, the heartbeat monitor, the c10d store, gloo), are listed beside the
fixtures (tests/fixtures/consoles/README.md).

A terminal that hard-wraps at ~140 columns cuts a watchdog line anywhere, mid-number too
(`SeqNum=385` / `6, OpType=...`): a line that starts a watchdog message without ending it
is joined with the lines after it (`Collectives.open`).
"""

from __future__ import annotations

import re
from typing import Any

from runwatch.emitters.prefixes import launcher_lead, lead_form

Found = tuple[str, dict[str, Any]]

#: the heads and calls of a timeout a program words over lines (`Spread`)
_DEADLINE = "DEADLINE_EXCEEDED"
_TIMEDOUT = "A request has timed out and will therefore fail"
#: gRPC's words for the code besides its name: the status's message, and the debug string's
#: `"grpc_status":4` (DEADLINE_EXCEEDED is 4)
_DEADLINE_SAID = (_DEADLINE, "Deadline Exceeded", '"grpc_status":4,', '"grpc_status":4}')
SPREAD_MARKERS = (*_DEADLINE_SAID, _TIMEDOUT, "CoordinationService/", "Operation:  DMDX")
#: literal pieces a line must hold for `parse` to look at it (the scanner's markers)
MARKERS = ("WorkNCCL(", "WorkHCCL(", "detected by watchdog", "Timeout at NCCL work",
           "watchdog got stuck", "[c10d]", "timed out after", "Timed out waiting",
           "wait timeout after", "Connect timeout", "Read timeout", "Write timeout",
           "WorkNCCL::checkTimeout",
           "Some NCCL operations have failed", "Heartbeat monitor timed out",
           "Notify register times out", "Getting socket times out",
           "wait socket establish timeout",
           "hccl fftsplus task timeout", "store based barrier", ": Wait timeout",
           "store->get(", "Barrier timed out", "failed to pass monitoredBarrier",
           "Terminating the process after attempting to dump",
           "to wait all other nodes initialized", "worker group startup timed out",
           "Watchdog caught collective operation timeout",
           "GetKeyValue() timed out with key", "TIMEOUT self_rank = ",
           "master will be shutdowned", "Collective has timed out",
           "Received a dump signal due to a collective timeout", "imed out", "IMED OUT",
           "ready timeout", *SPREAD_MARKERS)  # fmt: skip

#: the work a watchdog timed out: ProcessGroupNCCL.cpp's `WorkNCCL` and torch_npu's own
#: (Ascend/pytorch@c3a1c96 : torch_npu/csrc/distributed/ProcessGroupHCCL.cpp, `operator<<` of
#: `WorkHCCL`: "WorkHCCL(SeqNum=", seq, ", OpType=", op[, ", NumelIn=", ", NumelOut="],
#: ", Timeout(ms)=", ms, ")"; `WorkHCCL::checkTimeout` words its timeout as torch's); older
#: torch wrote no SeqNum (`WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000)`, yolov7#714)
_WORK = re.compile(
    r"Work(?P<backend>NCCL|HCCL)\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)[^)]*?"
    r"Timeout\(ms\)=(?P<timeout>\d+)\)"
    r"(?: ran for (?P<ran>\d+) milliseconds)?"
)
_PG = re.compile(r"\[PG (?:ID )?(?P<id>\d+)(?: PG GUID (?P<guid>[^\]\s]+))? Rank (?P<grank>\d+)\]")
_RANK = re.compile(r"\[Rank (?P<grank>\d+)\]")
_STATUS = re.compile(
    r"(?:detected by watchdog at work(?: sequence id)?|Timeout at NCCL work): (?P<seq>-?\d+)"
    r"(?:.*?last enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: "
    r"(?P<done>-?\d+))?"
)
#: the head of the watchdog's timeout message (ProcessGroupNCCL.cpp `WorkNCCL::checkTimeout`:
#: logPrefix(), "Watchdog caught collective operation timeout: ", the work, " ran for N
#: milliseconds before timing out."): a work after it timed out even where a paste cut its tail
_CAUGHT = "Watchdog caught collective operation timeout:"
_STUCK = re.compile(r"watchdog got stuck for (?P<s>\d+) seconds")
#: the frame of a c10 backtrace (`frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(...)`)
#: right under the error's constructor: torch's watchdog builds its DistBackendError there only
#: when a work timed out (ProcessGroupNCCL.cpp, `WorkNCCL::checkTimeout`), so its frames name
#: a timeout where the paste lost the message
_CHECK_TIMEOUT = re.compile(r"^frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\(")
#: the c10d store's timeouts (torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp): the
#: `[c10d] ` is the C++ log's prefix; Python's `TimeoutError` carries the same message bare
#: (no `.*?` before the op -- `search` tries every start already -- and a bounded gap after
#: it: the socket's addresses, a few hundred characters; unbounded, a long line of ops was
#: cubic)
_C10D = re.compile(
    r"(?:\[c10d\] )?(?:The client socket has timed out after (?P<after>\d+)(?P<unit>ms|s) while "
    r"trying to (?P<op>connect)|(?P<op2>waitForInput|recvValue|recvBytes|sendBytes)"
    r".{0,600}?timed out after (?P<after2>\d+)(?P<unit2>ms|s))"
)
_STORE_WAIT = re.compile(r"wait timeout after (?P<ms>\d+)ms, keys:")
#: the TCPStore's server (rank 0's) waiting for the other ranks to connect at
#: init_process_group's rendezvous (torch/csrc/distributed/c10d/TCPStore.cpp `waitForWorkers`:
#: DistStoreError "Timed out after {} seconds waiting for clients. {}/{} clients joined."): the
#: group never formed
_STORE_CLIENTS = re.compile(
    r"Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<n>\d+) "
    r"clients joined"
)
#: the file store's wait giving up (torch/csrc/distributed/c10d/FileStore.cpp `FileStore::wait`:
#: `throw std::runtime_error("Wait timeout")`, the string beside its `flock` in torch 2.15.0's
#: libtorch_cpu.so): a rank waited for keys the other ranks never wrote -- init_process_group's
#: rendezvous over a `file://` init method; Python's exception line, nothing after it
_FILE_STORE_WAIT = re.compile(r"^(?:[\w.]*\.)?(?:RuntimeError|DistStoreError): Wait timeout\s*$")
#: init_process_group's barrier on the c10d store (torch/distributed/distributed_c10d.py
#: `_store_based_barrier`, torch 1.8-2.x): not every rank joined the new group within its
#: timeout -- `on rank: N ... worker_count=C` (1.x, a RuntimeError), `on rank N ...
#: num_workers_joined=C` (2.x, a DistStoreError); the timeout is a `timedelta`'s str
_STORE_BARRIER = re.compile(
    r"Timed out initializing process group in store based barrier on rank:? (?P<rank>\d+)"
    r"(?:, for key: \S+ \(world_size=\d+, (?:worker_count|num_workers_joined)=\d+, "
    r"timeout=(?:(?P<days>\d+) days?, )?(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?))?"
)
#: a rank setting up its NCCL communicator could not get the ncclUniqueId rank 0 puts in the
#: c10d store in time (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp `broadcastUniqueNCCLID`:
#: "[R] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value
#: store by key 'K', but store->get('K') got error: " and the store's own error -- "Socket
#: Timeout" from its recv (torch 1.x), a `wait timeout after ...` (`_STORE_WAIT`); older
#: releases spell it "retreiving"): a collective's set-up timed out. Any other error (a
#: connection reset: rank 0 died) is the catalogue's (torch-nccl-unique-id-store)
_UNIQUE_ID = re.compile(
    r"\[(?P<rank>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
    r"\[\d+\] via c10d key-value store by key '[^']*', but store->get\('[^']*'\) got error: "
    r"(?:Socket Timeout|.*?\btimed out\b)"
)
#: the barrier of JAX's (and TensorFlow's) coordination service timed out (tsl's
#: coordination_service.cc, raised in JAX as `XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed
#: out. Barrier_id: ID. Timed out task names:` then one `/job:.../task:N` a line; later releases
#: `Barrier timed out. Id: ID. ... # of tasks that reached the barrier: K/N`): tasks never
#: arrived -- `jax.distributed.initialize`'s connect barrier (`PjRT_Client_Connect`), a
#: `wait_at_barrier` of the program's
_COORDINATION_BARRIER = re.compile(
    r"Barrier timed out\. (?:Barrier_id|Id): (?P<id>[^\s.]+(?:\.[^\s.]+)*)"
)
#: a process of an XLA program waiting for the NCCL clique's unique id that the clique's
#: first node puts in the coordination service's key-value store (openxla/xla
#: xla/pjrt/gpu/nccl_id_store.cc `NcclIdStore::GetNcclUniqueId`: `kv_store->Get(key.ToString(),
#: 5, later 10 minutes)`, the key a `GpuCliqueKey`'s ToString, "devices=[%s]; stream=%d%s;
#: root_device=%lld..." in xla/backends/gpu/collectives/gpu_clique_key.cc) and giving up:
#: tsl's coordination_service_agent.cc `GetKeyValue`, "GetKeyValue() timed out with key: $0 and
#: duration: $1" (absl::FormatDuration: `10m`, `1h30m`, `2.5s`): a collective's set-up timed
#: out, the other nodes never came to it. So too the topology exchange of a distributed PJRT
#: client's start (openxla/xla xla/pjrt/distributed/topology_util.cc `ExchangeTopologies`: each
#: node's "local_topology/PLATFORM/N" -- "local_topology:N" before -- within 2 minutes, then node
#: 0's "global_topology/PLATFORM"; "Getting local topologies failed: Error 1: GetKeyValue() ..."):
#: the group never formed. Other keys (a program's own) are no collective's
_KEY_VALUE = re.compile(
    r"GetKeyValue\(\) timed out with key: (?:(?P<clique>devices=\[[\d,\s]*\]; stream=\d+\b)"
    r"|(?:\w+:)?(?P<topology>local|global)_topology\b[:/]?\S*).*? and duration: "
    r"(?P<duration>(?:\d+h)?(?:\d+m(?!s))?(?:\d+(?:\.\d+)?s)?)"
)
#: TensorFlow's collective ops given a timeout (CommunicationOptions' timeout_seconds):
#: tensorflow/tensorflow@017fb013 tensorflow/core/common_runtime/base_collective_executor.cc
#: -- `ExecuteAsync`, DEADLINE_EXCEEDED "Collective has timed out during execution.", and
#: `CompleteParamsAsync`, "Collective has timed out waiting for other workers." (the group's
#: members never came to resolve it); the executor aborts so the others fail too
_TF_COLLECTIVE = re.compile(
    r"Collective has timed out (?P<when>during execution|waiting for other workers)\."
)
_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?")
_GLOO = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>\w+) operation to complete")
#: ProcessGroupGloo's `monitoredBarrier` (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp; what
#: `TORCH_DISTRIBUTED_DEBUG=DETAIL` runs before collectives, and `dist.monitored_barrier`): rank 0
#: names the ranks that did not reach it in time -- "[Rank 0]: Rank R failed to pass
#: monitoredBarrier in T ms", or with `wait_all_ranks` "[Rank 0]: Ranks R, S failed to pass ..."
_MONITORED_BARRIER = re.compile(
    r"\bRanks? [\d, ]+ failed to pass monitoredBarrier in (?P<ms>\d+) ms"
)
#: gloo's transport gives up on a peer (GLOO_ERROR_MSG's `[file:line] ` then the words and the
#: peer): connecting (gloo/transport/tcp/pair.h `waitUntil`: "Connect timeout ": the process
#: group never formed), or reading or writing a collective's data (tcp/pair.cc `read`/`write`,
#: tcp/buffer.cc and unbound_buffer.cc `waitRecv`/`waitSend`: "Read timeout ", "Write timeout
#: " -- the peer never sent or took it within the group's timeout), under torch's ProcessGroupGloo
#: as under JAX's CPU collectives (`Gloo ReduceScatter failed: [.../buffer.cc:72] Read timeout`)
_GLOO_CONNECT = re.compile(
    r"gloo/transport/\w+/(?:pair|buffer|unbound_buffer)\.\w+:\d+\] "
    r"(?P<what>Connect|Read|Write) timeout\b"
)
_GLOO_OPS = {"Connect": "connect", "Read": "recv", "Write": "send"}
#: the same timeouts in the gloo that PaddlePaddle builds (its third_party/gloo, ziyoujiyi/gloo
#: branch gloo_fleet @88e71d6: gloo/transport/tcp/unbound_buffer.cc `waitRecv`/`waitSend`,
#: buffer.cc, pair.cc throw a `gloo::TimeoutException` of GLOO_ERROR_MSG("TIMEOUT self_rank =
#: ", ..., " pair_rank = ", ..., " peer_str = ", ...), "none" for what the site does not know):
#: the peer never sent or took a collective's data within the group's timeout
_GLOO_FLEET = re.compile(
    r"gloo/transport/\w+/(?:pair|buffer|unbound_buffer)\.\w+:\d+\] "
    r"TIMEOUT self_rank = (?P<self>\S+) pair_rank = (?P<pair>\S+) peer_str = "
)
#: ytk-mp4j's master (the server of its allreduce and barrier, com.fenbi.mp4j.rpc.Server
#: `timeoutCheck`, kanyun-inc/ytk-mp4j@34e0f4a): not every slave connected within
#: WAIT_FOR_CONNECTING_TIMEOUT, or one's heartbeat stopped for WAIT_FOR_HEARTBEAT_TIMEOUT
#: (milliseconds) -- LOG.info("[ERROR] waiting for heartbeat timeout > " + N + ", master will be
#: shutdowned!"), then System.exit: the group never formed, or a member is gone
_MP4J = re.compile(
    r"\[ERROR\] waiting for (?P<what>connecting check|heartbeat) timeout > (?P<ms>\d+), "
    r"master will be shutdowned!"
)
#: ps-lite's (DMLC's parameter server: DiFacto, MXNet's early kvstore) nodes waiting for every
#: other node to register with the scheduler (ps-lite's src/system/manager.cc `Manager::Run`:
#: LOG(FATAL) "Timeout (N sec) to wait all other nodes initialized. See commmets for more
#: information", N its `-sync_timeout`): the group never formed, and the node aborts
_PS_LITE = re.compile(r"Timeout \((?P<s>\d+) sec\) to wait all other nodes initialized")
#: Ray Train v2's controller starting its worker group: not every worker's actor came up within
#: RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S (ray/train/v2/_internal/exceptions.py
#: `WorkerGroupStartupTimeoutError`: "The worker group startup timed out after T seconds
#: waiting for N workers."): the group never formed
_RAY_TRAIN_GROUP = re.compile(
    r"worker group startup timed out after (?P<s>\d+(?:\.\d+)?) seconds waiting for \d+ workers"
)
#: SGLang's prefill/decode disaggregation: a request's KV transfer between the prefill and the
#: decode engine that did not complete within its timeout (sglang python/sglang/srt/
#: disaggregation/mooncake/conn.py, and nixl/conn.py and mori/conn.py alike: the sender's and
#: receiver's `poll()` -- `kv_mgr.record_failure(room, f"Request {room} timed out after
#: {elapsed:.1f}s in KVPoll.Bootstrapping")` past SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT, and
#: `... in KVPoll.WaitingForInput` past SGLANG_DISAGGREGATION_WAITING_TIMEOUT, 300 s each by
#: default -- logged by the scheduler as "Prefill bootstrap failed ..." or "Decode transfer
#: failed ... with exception KVTransferError(bootstrap_room=...): ..."): the two engines' hand-off
#: of one request's KV cache, which each waited on for the other, never completed
_KV_TRANSFER = re.compile(
    r"\bRequest \d+ timed out after (?P<s>\d+(?:\.\d+)?)s in KVPoll\.(?P<state>\w+)"
)
#: the heartbeat monitor of ProcessGroupNCCL (torch 2.3-2.6, `heartbeatMonitor`): the watchdog
#: thread made no progress for TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, the process is dumped and
#: killed -- the watchdog stuck, as `_STUCK` says it when the fatal line after it survives
_HEARTBEAT = re.compile(r"Heartbeat monitor timed out! Process will be terminated")
#: the heartbeat monitor ending the process (torch 2.4 on, `getNCCLWatchdogTimeoutExitMsg`, at
#: FATAL: "Terminating the process after attempting to dump debug info, due to REASON."):
#: REASON "ProcessGroupNCCL watchdog hang" is the watchdog stuck (`_STUCK`, the line before it,
#: may be cut from a paste). REASON "collective timeout or exception" (a dump signal after a
#: collective timed out or failed) says neither alone: the process's abort (the catalogue's
#: glog-fatal), a timeout only where the watchdog's own line says one
_TERMINATING = re.compile(
    r"Terminating the process after attempting to dump debug info, due to "
    r"ProcessGroupNCCL watchdog hang"
)
#: Ascend's HCCL (CANN) timeouts, as torch_npu, vllm-ascend and lmdeploy consoles print them:
#: EI0002, a collective's Notify wait timed out (its op leads the task's tag:
#: `tag[AllReduce_group_name_1654...]`), EI0006, a peer's data never came on the socket, and
#: the device's `hccl fftsplus task timeout ... timeout:1836.`
_HCCL_NOTIFY = re.compile(
    r"The wait execution of the Notify register times out\b(?:.*?\btag\[(?P<op>[A-Za-z]+)_)?"
    r"(?:.*?\bgroup:\[(?P<group>[^\]\s]+)\])?"
)
#: the heartbeat monitor of ProcessGroupNCCL taking the dump signal (torch 2.4 on,
#: `getNCCLWatchdogTimeoutErrorMsg`, as stored at pytorch/pytorch torch/csrc/distributed/c10d/
#: ProcessGroupNCCL.cpp: logPrefix(), "Received a dump signal due to a collective timeout from
#: " + "this local rank" or " rank N" + " and we will try our best to dump the debug info.
#: Last enqueued NCCL work: E, last completed NCCL work: C." ...), then it ends the process
#: ("Terminating the process after attempting to dump debug info, due to collective timeout or
#: exception."). The watchdog sets the signal for a work's exception too (`dumpOnTimeoutOrEx_`:
#: an NCCL error, which its own lines word), so the line is `undecided`: a collective's timeout
#: unless the output says an NCCL error (`failed_otherwise`) -- the process ends after it, so
#: what says which comes before its end (`dump_signal`)
DUMP_SIGNAL = "Received a dump signal due to a collective timeout"
_DUMP_SIGNAL = re.compile(
    DUMP_SIGNAL + r" from (?:this local rank|\s*rank -?\d+) and we will try our best to dump"
    r"(?:.*?Last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+))?"
)
_HCCL_SOCKET = re.compile(r"\bEI0006\b.*?Getting socket times out")
#: ... and the line HCCL's own log writes for it, the link to a peer not set up within
#: HCCL_CONNECT_TIMEOUT (hicann/hccl@09300b70 docs/zh/user_guide/fault_diagnosis/
#: param_link_stage.md, hcomm's hccl_socket_manager.cc `[Wait][LinkEstablish]`: "wait socket
#: establish timeout, role[1] rank[1] timeout[120 s]"; CANN 8.x writes `timeout[120]`)
_HCCL_LINK = re.compile(
    r"wait socket establish timeout, role\[\d+\] rank\[(?P<rank>\d+)\] "
    r"timeout\[(?P<s>\d+)(?: ?s)?\]"
)
_HCCL_TASK = re.compile(r"hccl fftsplus task timeout occurred\b(?:.*?\btimeout:(?P<s>\d+))?")
#: the words ProcessGroupNCCL's `WorkNCCL::handleException` logs at ERROR before it rethrows a
#: work's exception -- an NCCL error or a timeout -- and takes the process down (torch 2.15.0
#: wheel, strings of lib/libtorch_cuda.so; torch 1.x writes the same): a collective failed, and
#: the rank with it, whether or not the watchdog's line saying which one survived the paste
SOME_FAILED = "Some NCCL operations have failed or timed out"
#: an NCCL error that is no timeout, as torch words it (ProcessGroupNCCL's `NCCL error: ...`,
#: from ncclGetErrorWithVersion, and NCCL's result names): on `SOME_FAILED`'s line (a paste that
#: ran the watchdog's lines and its `what()` together) it says which way they failed
_NCCL_ERROR = re.compile(
    r"NCCL error: "
    r"|\bnccl(?:Remote|System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b"
)
_GUID_NAME = re.compile(r"\((?P<name>[^)]+)\)$")


def _group(nouns: str) -> str:
    """A collective group's words with these nouns: a backend's (or `collective`) before them,
    or a backend's `comm`."""
    return (
        rf"(?:(?:(?:nccl|hccl|gloo|rccl|collective) )?(?:{nouns})|(?:nccl|hccl|gloo|rccl) comms?)"
    )


#: any program's words that a collective group's set-up timed out, for the stacks the wordings
#: above do not name: a sentence whose subject or object is the group -- a communicator, a
#: backend's comm, a process group, a device mesh, a rendezvous -- and whose verb says its
#: building timed out, any order (cosmos-rl's rollout replicas, `Timed out building the global
#: mesh communicator for ID (rank=0, world_size=4)`, nvidia-cosmos/cosmos-rl#736; its `wait for
#: nccl comm ready timeout` in cosmos_rl/utils/distributed.py; `Process group initialization
#: timed out`). A timeout's setting (`NCCL timeout: 1800s`, `timeout of 900 seconds`) has no
#: such verb; a few words at most stand between the verb and the group, none a preposition (`a
#: reply from the rendezvous server` is a message's)
_GROUP = _group("communicators?|process groups?|device mesh|mesh|rendezvous")
#: ... as a subject (`NCCL communicator init timed out`): a mesh there is any service's
_SUBJECT = _group("communicators?|process groups?|rendezvous")
_FILLER = r"(?:(?!(?:reply|response|message|from|to|for|of|with|thread|server)\b)[\w-]+ ){0,2}"
_GROUP_SETUP_TIMEOUT = re.compile(
    r"(?i)\btimed out (?:while )?(?:build|creat|initiali[sz]|init|set(?:ting)? up|establish|form"
    rf"|join|connect|wait(?:ing)? for)\w*\b (?:to )?(?:(?:the|a|an|its) )?{_FILLER}"
    rf"(?P<what>{_GROUP})\b"
    rf"|\bwait(?:ing)? for (?:(?:the|a) )?{_FILLER}(?P<what2>{_GROUP})(?: ready| to be ready)?"
    r"(?: has)? (?:timed out|timeout)\b(?!\s*(?:[=:(]|set\b|of\b|in\b|\d))"
    rf"|\b(?P<what3>{_SUBJECT})(?: (?:init\w*|creation|set-?up|build\w*|formation))?"
    r" (?:has |have )?timed out\b(?!\s*(?:\?|[:=\"']|as expected|while resolv))"
)
#: what makes such words no set-up's end: a retry or a way on (`re-initializing`, `falling back
#: to gloo`, `continuing with 6 of 8 hosts`), a teardown's wait (`Timed out waiting for the
#: process group to shut down cleanly`), a test's
_NOT_SETUP = re.compile(
    r"(?i)\bretry|\bretrying\b|\battempt\b|shut ?down|destroy|clean ?up|tear ?down|try again"
    r"|re-?initiali|fall(?:s|ing)? back|continu|standby|starting with|\bpassed\b"
)
#: ... or a condition before it (argparse's help: `--pg-timeout S  raise an error if timed out
#: waiting for the process group (default: 1800)`)
_CONDITION_BEFORE = re.compile(r"(?i)\b(?:if|when|whenever|unless|whether)\b[^.;]{0,40}$")
_BACKEND_NAMED = re.compile(r"(?i)\b(?:nccl|hccl|gloo|rccl)\b")
_SETUP_RANK = re.compile(r"(?i)\brank=\s*(?P<rank>\d+)\b")
_SETUP_RANK_SAID = re.compile(r"(?i)\brank[: ]\s*(?P<rank>\d+)\b")


def group_setup_timeout(line: str) -> tuple[str, str, int | None] | None:
    """(the backend, what timed out, the rank the line names) of a line that says a collective
    group's set-up timed out in words no stack's own reading above knows
    (`_GROUP_SETUP_TIMEOUT`); the backend its words name, else `nccl` (what every GPU stack's
    communicator is); the rank a `rank=N` names, else one named after the words; None for any
    other line, a retry's, a teardown's or a condition's among them."""
    lower = line.lower()
    if "timed out" not in lower and "timeout" not in lower:
        return None
    m = _GROUP_SETUP_TIMEOUT.search(line)
    if m is None or _NOT_SETUP.search(line) or _CONDITION_BEFORE.search(line, 0, m.start()):
        return None
    what = next(g for g in m.group("what", "what2", "what3") if g).lower()
    named = _BACKEND_NAMED.search(m.group(0))
    backend = named.group(0).lower() if named else "nccl"
    for word in ("nccl ", "hccl ", "gloo ", "rccl ", "collective "):
        what = what.removeprefix(word)
    ranked = _SETUP_RANK.search(line) or _SETUP_RANK_SAID.search(line, m.end())
    return backend, f"{what} set-up", int(ranked.group("rank")) if ranked else None


def _pg(m: re.Match[str]) -> str:
    """`0 (default_pg)` from `PG ID 0 PG GUID 0(default_pg)`, `1` from `PG 1`."""
    guid = m.group("guid") or ""
    name = _GUID_NAME.search(guid)
    return f"{m.group('id')} ({name.group('name')})" if name else m.group("id")


def _seconds(value: str, unit: str) -> float:
    return float(value) / (1000.0 if unit == "ms" else 1.0)


def _duration(text: str) -> float | None:
    """Seconds of an absl::FormatDuration (`10m`, `1h30m`, `2.5s`); None for an empty one."""
    m = _DURATION.fullmatch(text)
    if not text or m is None:
        return None
    hours, minutes = int(m.group("h") or 0), int(m.group("m") or 0)
    return hours * 3600.0 + minutes * 60.0 + float(m.group("s") or 0)


def _fleet_op(m: re.Match[str]) -> str:
    """The transfer a Paddle gloo timeout was in: a wait to receive knows no rank of its own
    (`self_rank = none`), a wait to send none of its peer's; a pair's own says both."""
    if m.group("self") == "none":
        return "recv"
    return "send" if m.group("pair") == "none" else "transfer"


#: the watchdog thread's last words (the catalogue's torch-pg-watchdog-terminated: "Process
#: group watchdog thread terminated with exception: " + e.what()) cut by a terminal's wrap
#: inside the words a timeout's what() begins with ("[Rank N] Watchdog caught collective
#: operation timeout: ..."; corpus23/dev's VLM-R1 console, wrapped at 85 columns, ends its
#: line in `[Rank 2] Watch`): the exception is a timeout, said on the next lines
_TERMINATED_CUT = re.compile(
    r" watchdog thread terminated with exception: (?:\[(?:PG [^\]]*)?Rank \d+\] ?)?"
    r"(?P<cut>[A-Za-z ]{0,44})$"
)
WRAP_MARKERS = (
    "WorkNCCL(",
    "WorkHCCL(",
    "Watchdog caught",
    " watchdog thread terminated with exception: ",
)


def _cut_in_caught(line: str) -> bool:
    """Whether the line is the watchdog thread's last words cut inside a timeout's
    (`_TERMINATED_CUT`)."""
    m = _TERMINATED_CUT.search(line)
    return m is not None and _CAUGHT.startswith(m.group("cut")) and m.group("cut") != _CAUGHT


def starts_unfinished(line: str) -> bool:
    """A watchdog message the line starts and does not end (a hard-wrapped line)."""
    if "Watchdog caught" not in line and "WorkNCCL(" not in line and "WorkHCCL(" not in line:
        return " watchdog thread terminated" in line and _cut_in_caught(line)
    return _WORK.search(line) is None or (
        "ran for" not in line and "timing out" not in line and "blocking wait" not in line
    )


def parse(line: str, rank: int | None = None) -> Found | None:
    """The line as a `collective.timeout` (None if it says none); `rank`: the global rank a
    prefix named (`[rank3]:`)."""
    fields: dict[str, Any] = {}
    if (work := _WORK.search(line)) is not None and (
        "timing out" in line or "timed out" in line or _CAUGHT in line
    ):
        fields.update(backend=work.group("backend").lower(), op=work.group("op"),
                      timeout_s=int(work.group("timeout")) / 1000.0)  # fmt: skip
        if work.group("seq") is not None:  # (older torch numbered no work)
            fields["seq"] = int(work.group("seq"))
        if work.group("ran"):
            fields["ran_s"] = int(work.group("ran")) / 1000.0
    elif (status := _STATUS.search(line)) is not None:
        fields.update(backend="nccl", seq=int(status.group("seq")))
        if status.group("enq") is not None:
            fields.update(last_enqueued=int(status.group("enq")),
                          last_completed=int(status.group("done")))  # fmt: skip
    elif (stuck := _STUCK.search(line)) is not None:
        fields.update(backend="nccl", timeout_s=float(stuck.group("s")), op="watchdog")
    elif _CHECK_TIMEOUT.search(line.lstrip()) is not None:
        fields.update(backend="nccl", op="watchdog")
    elif (c10d := _C10D.search(line)) is not None:
        if c10d.group("after") is not None:
            timeout = _seconds(c10d.group("after"), c10d.group("unit"))
            fields.update(backend="c10d", op=c10d.group("op"), timeout_s=timeout)
        else:
            timeout = _seconds(c10d.group("after2"), c10d.group("unit2"))
            fields.update(backend="c10d", op=c10d.group("op2"), timeout_s=timeout)
    elif "waiting for clients" in line and (clients := _STORE_CLIENTS.search(line)) is not None:
        fields.update(backend="c10d", op="wait for clients", timeout_s=float(clients.group("s")))
    elif (store := _STORE_WAIT.search(line)) is not None:
        fields.update(backend="c10d", op="wait", timeout_s=int(store.group("ms")) / 1000.0)
    elif "Wait timeout" in line and _FILE_STORE_WAIT.match(line.strip()) is not None:
        fields.update(backend="c10d", op="wait")
    elif (barrier := _STORE_BARRIER.search(line)) is not None:
        fields.update(backend="c10d", op="store_based_barrier")
        if barrier.group("h") is not None:
            days, h, m = (int(barrier.group(g) or 0) for g in ("days", "h", "m"))
            fields["timeout_s"] = ((days * 24 + h) * 60 + m) * 60 + float(barrier.group("s"))
        if rank is None:
            rank = int(barrier.group("rank"))  # init_process_group's rank: the global one
    elif "store->get(" in line and (unique := _UNIQUE_ID.search(line)) is not None:
        fields.update(backend="nccl", op="ncclUniqueId")
        if rank is None:
            rank = int(unique.group("rank"))
    elif "Barrier timed out" in line and (jax := _COORDINATION_BARRIER.search(line)) is not None:
        fields.update(backend="coordination", op=f"barrier {jax.group('id')}")
    elif "monitoredBarrier" in line and (barrier := _MONITORED_BARRIER.search(line)) is not None:
        timeout = int(barrier.group("ms")) / 1e3
        fields.update(backend="gloo", op="monitoredBarrier", timeout_s=timeout)
    elif (gloo := _GLOO.search(line)) is not None:
        fields.update(backend="gloo", op=gloo.group("op"), timeout_s=int(gloo.group("ms")) / 1e3)
    elif "startup timed out" in line and (group := _RAY_TRAIN_GROUP.search(line)) is not None:
        fields.update(backend="ray-train", op="worker group startup",
                      timeout_s=float(group.group("s")))  # fmt: skip
    elif "in KVPoll." in line and (kv := _KV_TRANSFER.search(line)) is not None:
        fields.update(backend="kv-transfer", op=f"KVPoll.{kv.group('state')}",
                      timeout_s=float(kv.group("s")))  # fmt: skip
    elif "nodes initialized" in line and (ps := _PS_LITE.search(line)) is not None:
        fields.update(backend="ps-lite", op="node registration", timeout_s=float(ps.group("s")))
    elif " timeout" in line and (peer := _GLOO_CONNECT.search(line)) is not None:
        fields.update(backend="gloo", op=_GLOO_OPS[peer.group("what")])
    elif "TIMEOUT self_rank" in line and (fleet := _GLOO_FLEET.search(line)) is not None:
        fields.update(backend="gloo", op=_fleet_op(fleet))
    elif "GetKeyValue()" in line and (kv := _KEY_VALUE.search(line)) is not None:
        if kv.group("clique"):
            fields.update(backend="nccl", op="ncclUniqueId")
        else:
            fields.update(backend="coordination", op=f"{kv.group('topology')} topology exchange")
        if (waited := _duration(kv.group("duration"))) is not None:
            fields["timeout_s"] = waited
    elif "Collective has" in line and (tf := _TF_COLLECTIVE.search(line)) is not None:
        op = "execution" if tf.group("when") == "during execution" else "group resolution"
        fields.update(backend="tensorflow", op=op)
    elif "shutdowned" in line and (mp4j := _MP4J.search(line)) is not None:
        op = "heartbeat" if mp4j.group("what") == "heartbeat" else "connect"
        fields.update(backend="mp4j", op=op, timeout_s=int(mp4j.group("ms")) / 1e3)
    elif _HEARTBEAT.search(line) is not None or (
        "Terminating the process" in line and _TERMINATING.search(line) is not None
    ):
        fields.update(backend="nccl", op="watchdog")
    elif (hccl := _HCCL_NOTIFY.search(line)) is not None:
        fields.update(backend="hccl", op=hccl.group("op") or "notify wait")
        if hccl.group("group"):
            fields["pg"] = hccl.group("group")
    elif _HCCL_SOCKET.search(line) is not None:
        fields.update(backend="hccl", op="socket")
    elif (link := _HCCL_LINK.search(line)) is not None:
        fields.update(backend="hccl", op="socket", timeout_s=float(link.group("s")),
                      group_rank=int(link.group("rank")))  # fmt: skip
    elif (task := _HCCL_TASK.search(line)) is not None:
        fields.update(backend="hccl", op="task")
        if task.group("s"):
            fields["timeout_s"] = float(task.group("s"))
    elif DUMP_SIGNAL in line and (dump := _DUMP_SIGNAL.search(line)) is not None:
        fields["backend"] = "nccl"  # which work, and whether it timed out: `undecided`
        if dump.group("enq") is not None:
            fields.update(last_enqueued=int(dump.group("enq")),
                          last_completed=int(dump.group("done")))  # fmt: skip
    elif SOME_FAILED in line and _NCCL_ERROR.search(line) is None:
        fields["backend"] = "nccl"  # which collective, and why, a watchdog line says if any
    elif (setup := group_setup_timeout(line)) is not None:
        fields.update(backend=setup[0], op=setup[1])
        if rank is None and setup[2] is not None:
            rank = setup[2]
    else:
        return None
    # the watchdog's own line names the group rank in "[Rank N]" after the PG's prefix
    if (pg := _PG.search(line)) is not None:
        fields.update(pg=_pg(pg), group_rank=int(pg.group("grank")))
    elif (grank := _RANK.search(line)) is not None:
        fields["group_rank"] = int(grank.group("grank"))
    if rank is not None:
        fields["rank"] = rank
    fields["message"] = line.strip()[:2000]
    return ("collective.timeout", fields)


#: how many lines after `SOME_FAILED` may say which way the collectives failed: torch logs
#: "To avoid data inconsistency, we are taking the entire process down." after it, then the
#: watchdog's exception (2.x: "Process group watchdog thread terminated with exception: ...";
#: 1.x: "terminate called after throwing ... what(): ..."), other ranks' lines between
SOME_FAILED_SAYS = 4


#: the backends whose watchdog aborts the process when a collective times out (torch's
#: ProcessGroupNCCL with TORCH_NCCL_ASYNC_ERROR_HANDLING, torch_npu's HCCL alike): an abort
#: after such a timeout is the collective's teardown, not a failure of its own
_ABORTING = frozenset({"nccl", "hccl"})


def watchdog_aborts(fields: dict[str, Any]) -> bool:
    """Whether a `collective.timeout`'s backend aborts its process for it (`_ABORTING`)."""
    return fields.get("backend") in _ABORTING


def failed_otherwise(line: str) -> bool:
    """Whether a line says the collectives failed of an NCCL error, not a timeout (the
    watchdog's exception after `SOME_FAILED`): the error is the catalogue's, no timeout."""
    return _NCCL_ERROR.search(line) is not None and "collective operation timeout" not in line


#: the watchdog's status line that says a work failed "either" way (ProcessGroupNCCL's
#: `watchdogHandler`, torch 2.4 on: "Exception (either an error or timeout) detected by
#: watchdog at work: N, ..."): written for an NCCL error as for a timeout
_EITHER = "either an error or timeout"


def undecided(fields: dict[str, Any]) -> bool:
    """Whether a `collective.timeout`'s line leaves open whether the collectives timed out or
    failed of an NCCL error: `SOME_FAILED` (`unnamed`), or the watchdog's status line of a
    work that failed "either" way -- the lines after it say which."""
    return unnamed(fields) or _EITHER in fields.get("message", "")


def dump_signal(fields: dict[str, Any]) -> bool:
    """Whether a `collective.timeout` is the heartbeat monitor's dump signal (`DUMP_SIGNAL`):
    undecided until the output's end, for the process ends after it."""
    return DUMP_SIGNAL in fields.get("message", "")


def unnamed(fields: dict[str, Any]) -> bool:
    """Whether a `collective.timeout`'s line named no collective, no timeout and no work: only
    that some failed (`SOME_FAILED`)."""
    return not fields.keys() & {"op", "seq", "timeout_s"}


#: a line that starts anew: a prefix of its own (Ray's, torchrun's, glog's, a log level, a
#: timestamp) -- not the rest of a line a terminal cut
_FRESH = re.compile(r"^(?:\(|\[|\x1b|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|\d{4}-\d\d-\d\d)")


#: a line a process begins under its prefix (torch's excepthook writes `[rankN]: Traceback`):
#: its own, not the rest of a message cut before it
_OWN = re.compile(r"\s+(?:Traceback \(most recent call last\)|File \")")


class Wrapped:
    """Joins a watchdog message a terminal cut over the lines right after it: the cut is a
    display artefact, so its rest is the next physical line, whoever wrote the first part."""

    MAX_LINES = 4

    def __init__(self) -> None:
        self.held: str | None = None  # the raw text of a cut message so far
        self._lines = 0

    def take(self, raw: str) -> tuple[str | None, str | None]:
        """(a whole or given-up cut message to read now, this line to read on its own, or
        None when it was joined)."""
        held = self.held
        if held is None:
            if starts_unfinished(raw):
                self.held, self._lines = raw, 1
                return None, None
            return None, raw
        self.held = None
        # its rest under the launcher prefixes it began with (all, or the outer ones: those
        # that mark each physical line, as `--tee` does where torch's `[rankN]:` marks each
        # message; a collector's time may have moved on): the rest of a line split where it
        # was written
        lead = launcher_lead(raw)
        same = lead and lead_form(launcher_lead(held)).startswith(lead_form(lead))
        rest = raw[len(lead) :] if same else raw
        if _FRESH.match(rest) or (same and _OWN.match(rest)):
            return held, raw  # the cut one never ended: read what it has
        joined = held + rest
        if starts_unfinished(joined) and self._lines < self.MAX_LINES:
            self.held, self._lines = joined, self._lines + 1
            return None, None
        return joined, None

    def flush(self) -> str | None:
        held, self.held = self.held, None
        return held


#: the call a coordination service's client made when its status came back DEADLINE_EXCEEDED,
#: where the call waits for the other tasks: its registration (openxla/xla
#: xla/tsl/distributed_runtime/rpc/coordination/grpc_coordination_client.cc, RegisterTaskAsync:
#: "/tensorflow.CoordinationService/RegisterTask", with no fail-fast and the agent's
#: cluster_register_timeout as its deadline -- `jax.distributed.initialize`'s connect, which
#: the service answers once every task registered), WaitForAllTasks, a Barrier and a blocking
#: GetKeyValue: a rendezvous of the job's processes that timed out. JAX renders the status over
#: lines: "DEADLINE_EXCEEDED: Deadline Exceeded", then "RPC: /tensorflow.CoordinationService/
#: RegisterTask" (jax#35905's console, the docs' `PollForError` example); the older RPCState
#: (xla/tsl/distributed_runtime/rpc/grpc_state.h, OnCompleted) appends "Additional GRPC error
#: information from remote target ... while calling /tensorflow.CoordinationService/...". A
#: heartbeat's or an error poll's deadline is no rendezvous (a peer died: the catalogue's)
_COORDINATION_CALL = re.compile(
    r"(?:RPC: |while calling )/tensorflow\.CoordinationService/"
    r"(?P<op>RegisterTask|WaitForAllTasks|Barrier|GetKeyValue)\b"
)
#: the request PRRTE's daemon (and ORTE's before it) gave up on (openpmix/prrte
#: src/prted/pmix/pmix_server.c, eviction_cbfunc: prte_show_help("help-prted.txt", "timedout",
#: ..., req->operation) after pmix_server_max_wait -- "A request has timed out and will therefore
#: fail:", then "  Operation:  %s"; help-orted.txt's in Open MPI 2.x-4.x's ORTE): the
#: operation "DMDX: FILE:LINE" (pmix_server_dmdx_recv) is a direct modex, one process asking
#: another's daemon for the data its peers published at start-up, that never came -- the job's
#: data exchange between ranks timed out
_PMIX_OPERATION = re.compile(r"^\s*Operation:\s+DMDX\b")


class Spread:
    """A timeout whose message a program words over lines, read once both its parts are said
    within a few lines (`LINES`) of each other: a coordination service's rendezvous call and
    the DEADLINE_EXCEEDED it got back, in either order (a paste may begin at the call:
    paxml#77's `... while calling /tensorflow.CoordinationService/RegisterTask:`, then the debug
    string's `"description":"Deadline Exceeded"`); PRRTE's `timedout` help, then its operation."""

    LINES = 4

    def __init__(self) -> None:
        #: the part said and not yet completed: the code (`_DEADLINE`), a rendezvous call (its
        #: name), PRRTE's head (`_TIMEDOUT`); None when none is
        self.held: str | None = None
        self._lines = 0

    def read(self, line: str, rank: int | None = None) -> Found | None:
        """The timeout the line completes (None while it completes none)."""
        deadline = any(m in line for m in _DEADLINE_SAID)
        call = _COORDINATION_CALL.search(line) if "CoordinationService/" in line else None
        fields: dict[str, Any] | None = None
        if call is not None and (deadline or self.held == _DEADLINE):
            fields = {"backend": "coordination", "op": call.group("op")}
        elif deadline and self.held not in (None, _DEADLINE, _TIMEDOUT):
            fields = {"backend": "coordination", "op": self.held}
        elif self.held == _TIMEDOUT and _PMIX_OPERATION.match(line) is not None:
            fields = {"backend": "pmix", "op": "direct modex"}
        if fields is not None:
            self.held = None
            if rank is not None:
                fields["rank"] = rank
            fields["message"] = line.strip()[:2000]
            return ("collective.timeout", fields)
        said = (call.group("op") if call is not None else _DEADLINE if deadline
                else _TIMEDOUT if _TIMEDOUT in line else None)  # fmt: skip
        if said is not None:
            self.held, self._lines = said, 0
        elif self.held is not None:
            self._lines += 1
            if self._lines >= self.LINES:
                self.held = None
        return None

"""The fatal-error catalogue (emitters/catalogue.toml): every signature loads, says where it
comes from, matches its own sample line and names it, and that line raises
`component_failed` for the component it implicates through the readers (`runwatch diagnose`
and `runwatch watch`'s scanner); healthy lines that share its words match none and raise
nothing; bad data is refused with the signature named."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path

import pytest

from runwatch.diagnose import diagnose
from runwatch.emitters.catalogue import CATALOGUE, MEANINGS, Signature, load, load_read
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.exceptions import CatalogueError
from runwatch.emitters.logparse import ray_origin
from runwatch.emitters.metric_shape import read_line

ROOT = Path(__file__).resolve().parents[3]
SIGNATURES = CATALOGUE.signatures


def signature_of(line: str) -> str | None:
    """The id of the catalogue's signature the line matches, None for none."""
    found = CATALOGUE.match(line)
    return found.id if found else None


#: healthy lines (or warnings, retries, code) that share a signature's words
CONTROLS = [
    # a panic in a Rust thread that is not the main one ends that thread alone (a tokio worker's
    # task; std's panic hook, library/std/src/panicking.rs); a Java thread other than `main`
    # that threw leaves the program running (java.lang.ThreadGroup.uncaughtException)
    "thread 'tokio-runtime-worker' panicked at router/src/infer.rs:123:45:",
    'Exception in thread "Thread-3" java.lang.RuntimeException: a worker thread failed',
    # omni.physx logs every PhysX error at [Error]: a buffer too small (the simulation goes on,
    # missing contacts), a GPU allocation that failed with a CUDA error that is not sticky
    "2025-02-09 08:50:10 [19,101ms] [Error] [omni.physx.plugin] PhysX error: The application "
    "needs to increase PxGpuDynamicsMemoryConfig::foundLostPairsCapacity to 36218880, "
    "otherwise, the simulation will miss interactions",
    "[Error] [omni.physx.plugin] PhysX error: PxgCudaDeviceMemoryAllocator failed to allocate "
    "memory 1048576 bytes! Result = 2",
    "[Error] [omni.physx.plugin] PhysX error: copyDtoH set failed with error code 1!",
    # ROLL starting its Ray cluster (the failure's words are `Failed to start ray cluster: `)
    "[2025-10-11 11:16:50] [initialize.py (89)] [INFO] [pipeline 0 / 1][PID 18175] Starting "
    "ray cluster: ray start --head --port=6379 --node-name=10.0.0.1 --dashboard-port=8265",
    # vLLM 0.6.6's tokenizer group retries an actor that died (a warning, handled)
    "WARNING 05-01 10:00:00 ray_tokenizer_group.py:138] TokenizerGroup died with "
    "ActorDiedError, reinitializing.",
    # the frame of a traceback that shows the raise, not the exception
    "    raise EngineDeadError()",
    '  File "/vllm/v1/engine/core_client.py", line 588, in validate_alive',
    # Ray's memory monitor kills a task it retries
    "(raylet) Task _map_task failed due to oom. There are infinite oom retries remaining, so "
    "the task will be retried. Error: 1 worker(s) were killed due to the node running low on "
    "memory. Memory on the node (IP: 10.0.50.112) was 28.62GB / 30.00GB (0.954017)",
    "(raylet) node_manager.cc:3069: 0 Workers (tasks / actors) killed due to memory pressure "
    "(OOM), 0 Workers crashed due to other reasons at node (ID: 1cd6, IP: 10.2.74.241)",
    # Megatron's rerun state machine logs a non-fatal rejected result as a warning
    "WARNING:megatron.core.rerun_state_machine:Rank 0, node n1, device 0, iteration 10: "
    "Unexpected result tensor(nan) (message='loss is NaN')",
    # torchrun stopping the others after one exits, DeepSpeed's rank done (its launcher's kills
    # are a death when nothing follows them: test_exits.py)
    "W0812 03:11:22.104000 140213 torch/distributed/elastic/multiprocessing/api.py:897] "
    "Sending process 118634 closing signal SIGTERM",
    "[2025-01-09 12:00:01,123] [INFO] [launch.py:351:main] Process 4242 exits successfully.",
    # a clean exit of vLLM's API server process, SGLang's graceful SIGTERM
    "RuntimeError: Process ApiServer_0 (PID: 31337) died with exit code 0",
    "[2026-02-11 04:18:09] SIGTERM received. signum=15, frame=None. Draining requests and "
    "shutting down...",
    # failures that are not of a weight update or a component
    "ERROR:verl.workers.rollout.utils:Failed to update Prometheus configuration: timed out",
    "WARNING 03-14 10:00:01 [vllm_client.py:88] Request failed: 503, retrying in 5s",
    "[INFO] Server 0 update succeeded in 1.2s",
    "lr scheduler: cosine, warmup 10 steps",
    "INFO 03-14 10:00:00 [core.py:120] EngineCore waiting for work.",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>",
    "(WorkerDict pid=7591) step:12 - actor/pg_loss:0.01 - critic/score/mean:0.5",
    # slime's health monitor passing and its fault tolerance's recovery, OpenRLHF's retry of a
    # reward request, LLaMA-Factory's SGLang server up, a ROLL decorator's record at INFO
    "DEBUG:slime.utils.health_monitor:Health check passed for rollout engine 3",
    "INFO:slime.ray.rollout:Recovered 1 dead rollout engines (worker_type=regular)",
    "INFO:openrlhf.utils.remote_rm_utils:Request error, please check: Read timed out.",
    "[INFO|sglang_engine.py:116] SGLang server initialized successfully at http://localhost:30000",
    "[2025-10-11 11:16:52] [decorator.py (306)] [INFO] [actor_train-1 1 / 8][PID 18175] done",
    # Horovod's stall warning (corpus/dev/stalled_horovod_stall_inspector_mpirun): a stall it
    # reports, not the shutdown it logs at ERROR when HOROVOD_STALL_SHUTDOWN_TIME_SECONDS passes
    "[1,0]<stderr>:[2019-10-09 05:33:38.249493: W horovod/common/stall_inspector.cc:105] One or "
    "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
    "are waiting for remainder of ranks for more than 60 seconds. This may indicate that "
    "different ranks are trying to submit different tensors or that only subset of ranks is "
    "submitting tensors, which will cause deadlock.",
    # glibc's heap check words in a sentence (a user's report of it), not glibc's abort
    "I got double free or corruption (!prev) when running the script",
    "The error was: free(): invalid pointer",
    # c10d's bind and connect attempts it retries, at W level
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
    "Address already in use).",
    # NCCL's warnings a healthy run prints (a plugin it falls back from), not a sticky failure
    "node-1:2338:2379 [2] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.",
    "node-1:2338:2379 [2] misc/cudawrap.cc:36 NCCL WARN Cuda failure 'operation not supported'",
    # torch's watchdog ending as the process group is destroyed, or as CUDA is torn down first
    "[I ProcessGroupNCCL.cpp:1021] [Rank 0] NCCL watchdog thread terminated normally",
    "[rank0]:[I1128 21:12:49.4 ProcessGroupNCCL.cpp:1302] [PG ID 0 PG GUID 0 Rank 0] main process "
    "destroyed cuda before watchdog loop exited, terminating watchdog. (Watchdog caught "
    "exception: CUDA driver shutting down",
    # Ray Jobs' CLI on a job that was submitted, stopped or succeeded
    # (https://github.com/ray-project/kuberay/issues/3929 for the first)
    "2025-08-09 07:10:39,924 SUCC cli.py:64 -- Job 'test-5' submitted successfully",
    "2025-08-09 07:12:01,002 WARN cli.py:75 -- Job 'test-5' was stopped",
    "2025-08-09 07:12:01,002 SUCC cli.py:64 -- Job 'raysubmit_73nQ2jgcpZATWrNN' succeeded",
    # pdsh's lines of a node that answers (DeepSpeed's multi-node launch), not its exit report
    "pdsh@node-0: node-1: [2024-02-06 10:00:00,000] [INFO] [launch.py:163:main] dist_world_size=16",
    # vLLM's note that it will not use its custom all-reduce (a warning it goes on after)
    "WARNING 09-10 09:37:41 [custom_all_reduce.py:85] Custom allreduce is disabled because "
    "your platform lacks GPU P2P capability or P2P test failed. To silence this warning, "
    "specify disable_custom_all_reduce=True explicitly.",
    # a user's question that quotes cuBLAS's status, not torch's check
    "Is CUBLAS_STATUS_EXECUTION_FAILED a driver problem?",
    # words of a signal in a sentence (Django's runserver), not a shell's job report
    "Quit the server with CONTROL-C.",
    "Hangup detected on controlling terminal or death of controlling process",
    # Lightning's SLURM handler, which ignores the signal (signal_connector.py), and another
    # program's own words for a SIGTERM it was sent, without Lightning's rank prefix
    "Bypassing SIGTERM: 15",
    "2025-01-09 12:00:01 INFO Received SIGTERM: 15",
    # Ray's dashboard agent after a raylet stopped by its SIGTERM (a `ray stop`)
    "(raylet) Raylet is terminated. Termination is graceful.",
    # a question that names Kubernetes' back-off, and a healthy pod's row of `kubectl get pods`
    "How do I fix CrashLoopBackOff?",
    "trainer-0   1/1     Running   0          10m",
    # Ollama's scheduler dropping a runner it expired (sched.go, slog.Debug), its wait for a
    # runner, a runner stopped on purpose (0.1.x's llama.go)
    'time=2026-08-21T10:00:00.000Z level=DEBUG source=sched.go:462 msg="runner terminated and '
    'removed from list, blocking for VRAM recovery" runner.name=registry.ollama.ai/library/qwen3',
    'time=2025-07-14T19:16:12.500+01:00 level=INFO source=server.go:614 msg="waiting for server '
    'to become available" status="llm server not responding"',
    "2023/12/24 23:48:35 llama.go:525: llama runner stopped successfully",
    # a compiler's note on ggml's macro while pip builds llama-cpp-python, the macro itself
    "ggml/src/ggml.c:1852:9: note: in expansion of macro 'GGML_ASSERT'",
    # ggml's CUDA back-end starting, and the line its error report puts after the error's
    "ggml_cuda_init: found 1 CUDA devices:",
    "  current device: 0, in function ggml_backend_cuda_buffer_set_tensor at "
    "/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:1234",
    '#define GGML_ASSERT(x) if (!(x)) GGML_ABORT("GGML_ASSERT(%s) failed", #x)',
    # Dask's nanny restarting its worker; code that names Dask's KilledWorker
    "distributed.nanny - WARNING - Restarting worker",
    "from distributed.scheduler import KilledWorker",
    "    except KilledWorker: # retried below",
    # Paddle's controller launcher: a pod that completed, the rule before a failed log's tail
    "LAUNCH INFO 2024-07-20 13:53:10,112 Pod completed",
    "LAUNCH INFO 2024-07-20 13:53:10,112 ------------------------- ERROR LOG DETAIL "
    "-------------------------",
    # ytk-mp4j's master checking its slaves, and closing when all are done
    "2017.12.27 12:19:28 com.fenbi.mp4j.rpc.Server - waiting for connecting check...",
    "2017.12.27 12:19:58 com.fenbi.mp4j.rpc.Server - heart beat check ok!",
    # submitit's own source line
    '                f"has not produced any output (state: {self.state})",',
    # NeMo-RL's trajectory collector tolerating a failed generation batch, and its end when the
    # data ran out; its generation ready; EasyR1's (verl's) and LLaMA-Factory's skipped steps
    "[AsyncTrajectoryCollector] vllm batch worker FAILED (failure 1, tolerating 3) "
    "generation_weight=4 target_weight=5",
    "❌ Trajectory collection stopped: dataloader exhausted (max_num_epochs reached). No more "
    "data available for generation. Increase max_num_epochs or use a larger dataset.",
    "✅ Policy generation preparation completed successfully",
    "(WorkerDict pid=1201) Gradient norm is not finite. Skip update.",
    "[WARNING|2026-03-01 10:00:00] llamafactory.v1.core.base_trainer:290 >> Gradient norm is not "
    "finite: nan",
    # slime's fully async rollout dropping a task it goes on without, DeepSpeed's SuperOffload
    # stopping its optimizer process at the end, a Megatron-Bridge data worker lost in
    # preprocessing, ms-swift's rollout server method failure at a lower level
    "WARNING:slime.rollout.fully_async_rollout:fully-async task crashed: TimeoutError()",
    "[2026-01-09 12:00:01,123] [WARNING] [superoffload_utils.py:304:close] Optimizer process did "
    "not terminate cleanly within timeout, forcefully terminating",
    "WARNING:megatron.bridge.data.datasets.utils:PID 4242 died from SIGKILL",
    "[WARNING:swift] Method execution failed: close_communicator",
    # a SkyRL agent skipping an instance it has no fallback for (the run goes on)
    "2026-01-09 12:00:01.000 | ERROR    | skyrl_agent.agents.base:run:310 - [FATAL] No fallback "
    "(local/global) for instance_id django__django-11099. Skipping.",
    # Megatron's checkpoint loader going on without a checkpoint or the rerun machine's state
    "WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt",
    "Unable to restore RerunMachine from checkpoint: 'state'. Skipping.",
    # ColossalAI's launcher running a command, and prose that says the words
    "Error: failed to run the benchmark on this machine, skipping",
    "====== Training on All Nodes =====",
]

#: bash's reports of a job a signal ended (jobs.c, rendered): a foreground job's strsignal
#: alone (to 5.2) or padded to LONGEST_SIGNAL_DESC before its command (5.3), a job-control
#: report, a non-interactive shell's `NAME: line N: PID STATUS COMMAND`, for the signals
#: whose default action ends a process (glibc's words)
JOB_REPORTS = [
    "Killed",
    "Trace/breakpoint trap (core dumped)",
    "Killed                     python train.py",
    "[1]+  Killed                  python train.py --config grpo.yaml",
    "[2]-  Hangup                  python train.py",
    "train.sh: line 12: 4242 User defined signal 1   torchrun --nproc-per-node 8 train.py",
    "CPU time limit exceeded (core dumped)",
    "./run.sh: line 7: 93 Alarm clock             python eval.py",
]


#: torch's `CUDA error: ` with each sticky error's cudaGetErrorString (libcudart 13.2.86)
STICKY = [
    "torch.AcceleratorError: CUDA error: the launch timed out and was terminated",
    "RuntimeError: CUDA error: invalid program counter",
    "RuntimeError: CUDA error: operation not supported on global/shared address space",
    "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
    "RuntimeError: CUDA error: unspecified launch failure in prior launch",
]


@pytest.mark.parametrize("line", STICKY)
def test_a_sticky_cuda_error_is_a_death(line: str) -> None:
    assert signature_of(line) == "cuda-sticky-error"


#: zsh's (Src/jobs.c printjob, Src/signames2.awk's words; rendered): the current job's and
#: another job's
ZSH_REPORTS = [
    "zsh: killed     python train.py --config grpo.yaml",
    "zsh: segmentation fault (core dumped)  python train.py",
    "[1]  + killed     python train.py",
    "[2]    user-defined signal 1  torchrun --nproc-per-node 8 train.py",
    "[1]  + 48213 killed     python train.py",  # LONG_LIST_JOBS (oh-my-zsh sets it): the pid
]
#: zsh's words for a stop, and its other messages
ZSH_NOT = [
    "zsh: terminated  python train.py",
    "zsh: command not found: killed",
    "[1]  + 48213 done       python train.py",
    "[1]  + done       python train.py",
]

#: a job that exited with a failing status, as bash (jobs.c printable_job_status: `Exit %d`,
#: `Done(%d)` in POSIX mode) and zsh (Src/jobs.c printjob: `exit %-4d`) report it; rendered
JOB_EXITS = [
    "[1]+  Exit 1                  nohup python train.py --config grpo.yaml > train.log 2>&1",
    "[2]-  Exit 137                python train.py",
    "[1]+  Exit 1",  # (a terminal's padding split from its command)
    "[3]   Done(2)                 python eval.py",
    "[1]+ 48213 Exit 1             python train.py",  # `jobs -l`
    "[1]  + exit 1     python train.py",
    "[1]  + 48213 exit 139   python train.py",
    "zsh: exit 1     python train.py",  # PRINT_EXIT_VALUE
]
#: a job that exited with 0, and words that are no job's report
JOB_EXITS_NOT = [
    "[1]+  Done                    python train.py",
    "[1]  + done       python x.py",
    "[1]+  Exit 0                  python train.py",
    "Exit 1 of 3: retrying",
    "[12] Exit code 1 means the file was not found",
]


#: srun's report of tasks a signal ended (slurm launch_slurm.c `_task_finish`: error("%s: %s %s:
#: %s%s", hosts, "task"/"tasks", tasks, strsignal(sig), " (core dumped)" or ""); rendered)
SRUN_SIGNALS = [
    "srun: error: node01: task 0: Bus error (core dumped)",
    "srun: error: nid001277: tasks 1-3: Killed",
    "srun: error: gpu-7: task 5: Trace/breakpoint trap (core dumped)",
    "srun: error: gpu-7: task 5: User defined signal 1",
]


#: Megatron-LM's (and Megatron-Bridge's) checkpoint loader printing why it exits, then
#: sys.exit() with no traceback (megatron/training/checkpointing.py; rendered)
MEGATRON_LOAD_EXITS = [
    "A metadata file exists but unable to load iteration from checkpoint /ckpt/iter_0001000, "
    "exiting",
    "Unable to load rng state from checkpoint /ckpt/iter_0001000. Specify --no-load-rng or "
    "--finetune to prevent attempting to load the rng state, exiting ...",
    "Unable to load rng state from checkpoint /ckpt/iter_0001000. Specify load_rng=False or "
    "finetune=True to prevent attempting to load the rng state.",
    ">> '--exit-on-missing-checkpoint' is set but no checkpoint was found under load directory "
    "'/ckpt' (missing metadata/tracker file '/ckpt/latest_checkpointed_iteration.txt'). Exiting "
    "with a non-zero status. <<",
    ">> '--exit-on-missing-checkpoint' set ... exiting. <<",
]


@pytest.mark.parametrize("line", MEGATRON_LOAD_EXITS)
def test_megatron_s_checkpoint_loader_exiting_is_a_death(line: str) -> None:
    assert signature_of(line) == "megatron-checkpoint-load-exit"
    parser = LineParser()
    assert "component.failed" in [k for k, _ in parser.parse(line) + parser.finish()]


@pytest.mark.parametrize("line", SRUN_SIGNALS)
def test_srun_s_report_of_a_task_a_signal_ended_is_a_death(line: str) -> None:
    assert signature_of(line) == "srun-task-failed"


@pytest.mark.parametrize("line", JOB_REPORTS)
def test_a_shell_s_report_of_a_job_a_signal_ended_is_a_death(line: str) -> None:
    assert signature_of(line) == "shell-job-signal"


@pytest.mark.parametrize("line", ZSH_REPORTS)
def test_zsh_s_report_of_a_job_a_signal_ended_is_a_death(line: str) -> None:
    assert signature_of(line) == "shell-zsh-job-signal"


@pytest.mark.parametrize("line", ZSH_NOT)
def test_zsh_s_report_of_a_stop_is_none(line: str) -> None:
    assert CATALOGUE.match(line) is None


@pytest.mark.parametrize("line", JOB_EXITS)
def test_a_shell_s_report_of_a_job_that_exited_failing_is_a_death(line: str) -> None:
    assert signature_of(line) == "shell-job-exit-status"


@pytest.mark.parametrize("line", JOB_EXITS_NOT)
def test_a_job_that_exited_with_0_is_no_death(line: str) -> None:
    assert signature_of(line) != "shell-job-exit-status", line


def test_a_padded_job_report_read_in_a_console_is_a_death() -> None:
    """bash pads the status to its widest; a terminal's padding is read as the lines it glued
    (`failures.PADDING`), so the status alone on its piece is the report."""
    parser = LineParser()
    found = [
        *parser.parse("step 1 loss 0.5 lr 0.1"),
        *parser.parse("[1]+  Exit 1                  python train.py"),
        *parser.finish(),
    ]
    failed = [f for k, f in found if k == "component.failed"]
    assert failed
    assert failed[0]["error"].startswith("[1]+  Exit 1")


def test_pbs_killing_a_job_over_its_limit_is_a_death() -> None:
    """https://github.com/marbl/canu/issues/1214, as posted (a canu job PBS killed at its
    walltime); OpenPBS's MoM writes the same words for memory and CPU time."""
    for line in (
        "=>> PBS: job killed: walltime 86415 exceeded limit 86400",
        "=>> PBS: job killed: mem 34603008kb exceeded limit 33554432kb",
    ):
        assert signature_of(line) == "pbs-job-killed-over-limit"


def test_the_catalogue_loads_with_every_field() -> None:
    assert len(SIGNATURES) >= 60
    for s in SIGNATURES:
        assert s.meaning in MEANINGS, s.id
        assert all((s.framework, s.versions, s.source)), s.id
        assert " : " in s.source, f"{s.id}: source is '<package or repo@commit> : <path>'"


def test_the_frameworks_read_with_nothing_to_add_say_where_and_what() -> None:
    """docs/catalogue.md lists them (`[[read]]`): each names the versions and the source read
    as a signature does, and what the source writes instead."""
    read = load_read()
    assert read
    for r in read:
        assert all((r.framework, r.versions, r.found)), r.id
        assert " : " in r.source, f"{r.id}: source is '<package or repo@commit> : <paths>'"
    with pytest.raises(CatalogueError, match="read x: missing or empty found"):
        load_read('[[read]]\nid = "x"\nframework = "f"\nversions = "1"\nsource = "p 1 : a"\n')
    with pytest.raises(CatalogueError, match="read x: unknown keys note"):
        load_read(
            '[[read]]\nid = "x"\nframework = "f"\nversions = "1"\nsource = "p 1 : a"\n'
            'found = "tracebacks"\nnote = "n"\n'
        )


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_a_signature_matches_its_sample_and_names_it(sig: Signature) -> None:
    assert any(literal in sig.sample for literal in sig.literals)
    assert signature_of(sig.sample) == sig.id


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.sample_from != "rendered"],
                         ids=lambda s: s.id)  # fmt: skip
def test_a_sample_from_a_real_console_is_a_line_of_it(sig: Signature) -> None:
    assert sig.sample in (ROOT / sig.sample_from).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("line", CONTROLS)
def test_healthy_lines_that_share_the_words_match_nothing(line: str) -> None:
    found = CATALOGUE.match(line)
    assert found is None, found and found.id


def _implicated(sig: Signature) -> str:
    """The component a sample's alert names: a Ray prefix's worker, else the signature's
    (a "process" signature leaves it to the reader: a console's process is the trainer)."""
    src, _ = ray_origin(sig.sample)
    if src is not None:
        return str(src["component"])
    return "trainer" if sig.component == "process" else sig.component


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_a_sample_raises_component_failed_for_its_component(sig: Signature, tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text(f"{sig.sample}\n", encoding="utf-8")
    found = diagnose([console], day=date(2026, 11, 24))
    firing = [a for a in found.alerts if a.state == "firing"]
    # a failed collective's (or update group's) line may also say it timed out (gloo's
    # `Connect timeout`, the c10d store's `The client socket has timed out after ...`)
    also = {"collective_timeout"} if sig.meaning in ("collective", "weight_update") else set()
    # a sample that is also a metric's own report of a NaN (TensorFlow's `Model diverged
    # with loss = NaN.`): the metric reader's non_finite_metric beside it
    record = read_line(sig.sample)
    if record is not None and any(not math.isfinite(v) for v in record.metrics.values()):
        also.add("non_finite_metric")
    assert "component_failed" in {a.rule for a in firing}
    assert {a.rule for a in firing} <= {"component_failed", *also}
    # (a Ray exception line is also the driver's uncaught exception: its alert may be there)
    fatal = [a.summary for a in firing if "(fatal error)" in a.summary]
    assert len(fatal) == 1
    assert fatal[0].startswith(f"{_implicated(sig)} process "), fatal


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_the_scanner_finds_a_sample_among_other_lines(sig: Signature) -> None:
    """`runwatch watch` reads only the lines its markers find: the catalogue's literals are
    among them."""
    text = f"INFO starting\n{sig.sample}\nINFO still here\n".encode()
    scanner = LineScanner(LineParser())
    found = scanner.feed(text) + scanner.finish() + scanner.parser.finish()
    assert ("component.failed", "fatal") in [(k, f.get("how")) for k, f in found]


@pytest.mark.parametrize("line", CONTROLS)
def test_a_healthy_line_raises_nothing_through_the_readers(line: str) -> None:
    parser = LineParser()
    found = parser.parse(line) + parser.finish()
    assert "component.failed" not in [k for k, _ in found]


def test_dask_s_nanny_stopping_its_worker_is_no_death_of_the_catalogue_s() -> None:
    """distributed/nanny.py's `_death_message` for the SIGTERM of the nanny's own stop (and a
    restart over the memory limit) or the user's Ctrl-C: not the catalogue's death. (The exit
    grammar, emitters/exits.py, reads any `killed by signal N` as a pending failure that
    progress after it clears.)"""
    for signal in (2, 15):
        line = f"distributed.nanny - INFO - Worker process 12345 was killed by signal {signal}"
        assert CATALOGUE.match(line) is None, line
    killed = "distributed.nanny - INFO - Worker process 12345 was killed by signal 9"
    found = CATALOGUE.match(killed)
    assert found is not None
    assert found.id == "dask-nanny-worker-killed"


def test_a_warning_that_mentions_a_failure_is_none_unless_the_source_warns_it() -> None:
    error = "ERROR 05-12 08:10:44 [multiproc_executor.py:470] WorkerProc hit an exception."
    assert CATALOGUE.match(error) is not None
    assert CATALOGUE.match(error.replace("ERROR", "WARNING")) is None
    assert CATALOGUE.match(error.replace("ERROR", "INFO")) is None
    # Ray's driver prints the raylet's worker-died error at WARNING: that is the failure
    ray = ("2023-12-17 07:00:42,177\tWARNING worker.py:2074 -- A worker died or was killed "
           "while executing a task by an unexpected system error.")  # fmt: skip
    assert signature_of(ray) == "ray-worker-died-system-error"
    assert CATALOGUE.match(ray.replace("WARNING", "DEBUG")) is None
    # glog's level letter (absl logging, torch's C++ lines) is a level too: TensorFlow's NaN
    # hook warns and stops where it is told not to fail
    tf = ("E0410 22:34:13.729731 4483055104 basic_session_run_hooks.py:760] Model diverged with "
          "loss = NaN.")  # fmt: skip
    assert CATALOGUE.match(tf) is not None
    assert CATALOGUE.match("W" + tf[1:]) is None


def test_a_communicator_aborted_by_a_peer_is_a_failure_by_a_timeout_the_collective_s() -> None:
    """torch's `NCCL communicator was aborted on rank N.` raised into a process's collectives:
    a failed collective when a peer's error aborted it; when the watchdog's timeout did, the
    collective reader says so (emitters/collectives.py), not the catalogue."""
    peer = ("RuntimeError: NCCL communicator was aborted on rank 1.  Original reason for failure "
            "was: NCCL error: remote process exited or there was a network error")  # fmt: skip
    assert signature_of(peer) == "torch-nccl-communicator-aborted"
    timeout = ("RuntimeError: NCCL communicator was aborted on rank 0.  Original reason for "
               "failure was: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL("
               "SeqNum=35582, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800366 "
               "milliseconds before timing out.")  # fmt: skip
    assert CATALOGUE.match(timeout) is None


def test_a_line_a_pattern_matches_holds_its_literal() -> None:
    """The scanner finds lines by the literals: one the pattern matches without its literal
    would never be read. Checked on every sample, control and real console of the fixtures."""
    texts = [s.sample for s in SIGNATURES] + CONTROLS
    for path in sorted((ROOT / "tests" / "fixtures" / "consoles").rglob("*.log")):
        texts += path.read_text(encoding="utf-8", errors="replace").splitlines()
    for s in SIGNATURES:
        for text in texts:
            if s.pattern.search(text):
                assert any(literal in text for literal in s.literals), (s.id, text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[signature]]\nid = "x"\n', "missing or empty"),
        (
            '[[signature]]\nid = "x"\nframework = "f"\nversions = "1"\nsource = "p 1 : a.py"\n'
            'component = "inference"\nmeaning = "dead"\nliteral = "a"\npattern = "a"\n'
            'sample = "a"\nsample_from = "rendered"\n',
            "meaning 'dead'",
        ),
        (
            '[[signature]]\nid = "x"\nframework = "f"\nversions = "1"\nsource = "p 1 : a.py"\n'
            'component = "inference"\nmeaning = "fatal"\nliteral = "a"\npattern = "a("\n'
            'sample = "a"\nsample_from = "rendered"\n',
            "bad pattern",
        ),
        (
            '[[signature]]\nid = "x"\nframework = "f"\nversions = "1"\nsource = "p 1 : a.py"\n'
            'component = "inference"\nmeaning = "fatal"\nliteral = "a"\npattern = "a"\n'
            'sample = "a"\nsample_from = "rendered"\nlevle = "warning"\n',
            "unknown keys levle",
        ),
        ("[[signature]\n", "catalogue:"),
    ],
    ids=["missing", "meaning", "pattern", "unknown-key", "toml"],
)
def test_bad_data_is_refused_naming_the_signature(text: str, says: str) -> None:
    with pytest.raises(CatalogueError, match=says.replace("(", r"\(")):
        load(text)


def test_an_engine_worker_that_died_while_the_server_prints_stats_is_a_failure(
    tmp_path: Path,
) -> None:
    """vLLM's API server goes on logging stats (all zero) after a worker of its engine died:
    the stats are no progress of the run, the worker's death stands."""
    stats = ("(APIServer pid=2840) INFO 09-12 10:15:{s:02d} [loggers.py:123] Engine 000: Avg "
             "prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
             "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit "
             "rate: 0.0%")  # fmt: skip
    died = ("(EngineCore_DP0 pid=2841) ERROR 09-12 10:15:02 [multiproc_executor.py:149] Worker "
            "proc VllmWorker-1 died unexpectedly, shutting down executor.")  # fmt: skip
    console = tmp_path / "vllm.log"
    after = [stats.format(s=s) for s in range(10, 60, 10)]
    console.write_text("\n".join([stats.format(s=0), died, *after]) + "\n")
    found = diagnose([console], day=date(2026, 11, 24))
    firing = [a.summary for a in found.alerts if a.state == "firing"]
    assert len(firing) == 1
    assert firing[0].startswith("inference process ")
    assert "Worker proc VllmWorker-1 died unexpectedly" in firing[0]


def test_an_engine_core_s_end_after_the_work_was_done_is_the_program_s_exit(
    tmp_path: Path,
) -> None:
    """vllm-ascend#5699 (corpus20/dev's control): vLLM's client logs `Engine core proc ...
    died unexpectedly` whenever its engine process ends while the client lives -- also when
    the script that owns the LLM exits, multiprocessing's atexit terminating the daemonic
    engine first (vllm#23517, #31681). After the generation's bar reached its total, nothing
    begun since, it is that exit; with the bar short of its total, the engine died in the
    work: a failure; so after another bar at its total (a trainer's rollout bar: the run goes
    on after it)."""
    bar = ("Processed prompts: {p}%|████| {n}/4 [00:00<00:00, 10.58it/s, est. speed input: "
           "58.25 toks/s, output: 169.45 toks/s]")  # fmt: skip
    died = ("ERROR 01-07 20:00:59 [core_client.py:564] Engine core proc EngineCore_DP0 died "
            "unexpectedly, shutting down client.")  # fmt: skip
    said = "Prompt: 'The capital of France is', Generated text: ' Paris.'"
    for n, fires in ((4, False), (3, True)):
        console = tmp_path / f"vllm_{n}.log"
        console.write_text("\n".join([bar.format(p=n * 25, n=n), said, died]) + "\n")
        found = diagnose([console], day=date(2026, 11, 24))
        firing = [a.summary for a in found.alerts if a.state == "firing"]
        assert bool(firing) is fires, (n, firing)
    rollout = bar.format(p=100, n=4).replace("Processed prompts", "Generating rollouts")
    console = tmp_path / "rollout.log"
    console.write_text("\n".join([rollout, died]) + "\n")
    assert [a.rule for a in diagnose([console], day=date(2026, 11, 24)).alerts] == [
        "component_failed"]  # fmt: skip
    assert [s.id for s in CATALOGUE.signatures if s.at_exit] == ["vllm-engine-core-proc-died"]


#: native fatal lines as users posted them (their source beside each), and the entry each is
NATIVE = [
    # https://github.com/pytorch/pytorch/issues/78514
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
        "peer [18.25.6.30]:30872",
        "gloo-tcp-pair-io-error",
    ),
    # https://github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI/issues/1882
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
        "[192.168.70.92]:25266: Connection reset by peer",
        "gloo-tcp-pair-io-error",
    ),
    # https://github.com/Megvii-BaseDetection/YOLOX/issues/702
    (
        "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:575] Connection "
        "closed by peer [127.0.1.1]:39827",
        "gloo-tcp-pair-io-error",
    ),
    # https://github.com/bubbliiiing/yolov7-pytorch/issues/63
    ("  what():  NCCL Error 1: unhandled cuda error", "torch-cuda-nccl-error"),
    # https://github.com/NVIDIA/nccl/issues/1283
    (
        "RuntimeError: NCCL Error 1: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "torch-cuda-nccl-error",
    ),
    # https://github.com/NVIDIA/nccl/issues/629
    (
        "A03-R28-I49-2-6000166:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an illegal "
        "memory access was encountered'",
        "nccl-warn-sticky-cuda-failure",
    ),
    # https://github.com/vllm-project/vllm/issues/19890 (its title, NCCL 2.19+'s numbered form)
    (
        "enqueue.cc:1556 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
        "nccl-warn-sticky-cuda-failure",
    ),
    # https://github.com/vllm-project/vllm/issues/2682
    (
        "(RayWorkerVllm pid=5304) [E ProcessGroupNCCL.cpp:916] [Rank 7] NCCL watchdog thread "
        "terminated with exception: CUDA error: unknown error",
        "torch-pg-watchdog-terminated",
    ),
    # https://github.com/pytorch/pytorch/issues/105287 (its title)
    (
        "NCCL watchdog thread terminated with exception: traceMap[thisSeq][myRank].second == "
        'kEventStart INTERNAL ASSERT FAILED at "/opt/pytorch/pytorch/torch/csrc/distributed/'
        'c10d/TraceUtils.h":237, please re',
        "torch-pg-watchdog-terminated",
    ),
    # https://github.com/sshaoshuai/Pointnet2.PyTorch/issues/10
    (
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 "
        "error=77 : an illegal memory access was encountered",
        "torch-thc-cuda-check-failed",
    ),
    # https://github.com/ray-project/ray/issues/40768
    (
        "Job entrypoint command failed with exit code -11, last available logs (truncated to "
        "20,000 chars):",
        "ray-job-entrypoint-failed",
    ),
    # Ray Jobs' CLI as a non-TTY writes it (ray's cli_logger record form; rendered)
    ("2025-08-09 07:12:01,002 ERR cli.py:70 -- Job 'test-5' failed", "ray-job-failed"),
    # https://github.com/chaos/pdsh/issues/109
    ("pdsh@rocks7: compute-0-0: ssh exited with exit code 127", "pdsh-remote-command-failed"),
    # https://github.com/vllm-project/vllm/issues/11994
    (
        "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
        "vllm-v0-engine-process-failed-to-start",
    ),
    # https://github.com/vllm-project/vllm/issues/56180
    (
        "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'",
        "vllm-custom-all-reduce-cuda-failed",
    ),
    # https://github.com/vllm-project/vllm/issues/5613 (its title, the older form)
    (
        "Failed: /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:310 'invalid argument'",
        "vllm-custom-all-reduce-cuda-failed",
    ),
    # https://github.com/isl-org/DPT/issues/4
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( "
        "handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, "
        "CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
        "torch-cublas-execution-failed",
    ),
]


@pytest.mark.parametrize(("line", "sig_id"), NATIVE)
def test_a_native_fatal_line_users_posted_is_its_entry(line: str, sig_id: str) -> None:
    assert signature_of(line) == sig_id


def test_gloo_s_timeouts_are_the_collective_reader_s_not_the_pair_entry() -> None:
    """Gloo's read and write timeouts (pair.cc `Read timeout`, `Write timeout`) are a
    collective's timeout: emitters/collectives.py reports them, not this entry."""
    for what in ("Read timeout", "Write timeout"):
        line = f"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] {what} [::1]:5"
        found = CATALOGUE.match(line)
        assert found is None or found.id != "gloo-tcp-pair-io-error"


def test_a_cublas_failure_the_run_goes_on_after_is_no_failure(tmp_path: Path) -> None:
    """torch raises a cuBLAS failure into the matmul's caller, which may catch it: a failure
    only when no step follows."""
    line = NATIVE[-1][0]
    steps = "".join(f"step:{n} - actor/pg_loss:0.01 - critic/score/mean:0.5\n" for n in (1, 2))
    after = tmp_path / "after.log"
    after.write_text(f"step:0 - actor/pg_loss:0.02 - critic/score/mean:0.4\n{line}\n{steps}")
    alone = tmp_path / "alone.log"
    alone.write_text(f"step:0 - actor/pg_loss:0.02 - critic/score/mean:0.4\n{line}\n")
    day = date(2026, 11, 29)
    fired = {a.rule for a in diagnose([after], day=day).alerts if a.state == "firing"}
    assert "component_failed" not in fired
    fired = {a.rule for a in diagnose([alone], day=day).alerts if a.state == "firing"}
    assert "component_failed" in fired


def test_a_watchdog_that_timed_out_is_the_collective_reader_s() -> None:
    """torch's watchdog ends so on a collective's timeout too: emitters/collectives.py reports
    that as a timeout, not this entry as a failure."""
    line = (
        "[E ProcessGroupNCCL.cpp:915] [Rank 0] NCCL watchdog thread terminated with exception: "
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800522 "
        "milliseconds before timing out."
    )
    assert CATALOGUE.match(line) is None


def test_only_sticky_cuda_errors_of_the_driver_and_thc_are_deaths() -> None:
    """A CUDA error that leaves the context usable (the driver's `device not ready`, THC's
    `out of memory`) is the caller's to handle: no entry of these names it."""
    for line in (
        "RuntimeError: CUDA driver error: device not ready",
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=383 error=2 : out of "
        "memory",
        "node:1:2 [0] init.cc:204 NCCL WARN Cuda failure 'out of memory'",
    ):
        assert CATALOGUE.match(line) is None, line


def test_ray_s_unhandled_error_the_job_goes_on_after_is_no_death(tmp_path: Path) -> None:
    """Ray logs an unhandled error when nobody gets a failed task's result -- often a job that
    goes on (an actor killed with calls pending): a failure only when no step follows it."""
    sig = next(s for s in CATALOGUE.signatures if s.id == "ray-unhandled-task-error")
    step = "(TaskRunner pid=5757) step:{n} - actor/loss:0.5 - critic/score/mean:0.3\n"
    log = tmp_path / "driver.log"
    log.write_text(step.format(n=1) + sig.sample + "\n" + step.format(n=2) + step.format(n=3))
    assert [a.rule for a in diagnose([log]).alerts if a.state == "firing"] == []
    log.write_text(step.format(n=1) + sig.sample + "\n")
    assert [a.rule for a in diagnose([log]).alerts if a.state == "firing"] == ["component_failed"]


#: glog's prefix (google/glog src/logging.cc, LogMessage::Init): `Fmmdd hh:mm:ss.uuuuuu tid
#: file:line] `, and from glog 0.6 -- its `log_year_in_prefix` on by default -- the year first
@pytest.mark.parametrize("day", ["1203", "20241203"])
def test_glog_s_fatal_line_with_or_without_its_year(day: str) -> None:
    line = f"F{day} 10:00:00.000000  1234 some_file.cc:42] Check failed: x == y (1 vs. 2)"
    assert signature_of(line) == "glog-fatal"
    parser = LineParser()
    assert "component.failed" in [k for k, _ in parser.parse(line) + parser.finish()]


#: the Training Operator's job condition and event when replicas failed past their restarts
#: (kubeflow/training-operator pkg/controller.v1: "%s %s is failed because %d %s replica(s)
#: failed."), as `kubectl describe pytorchjob` and `kubectl get events` print it; rendered
KUBEFLOW_FAILED = [
    "  Normal   PyTorchJobFailed  10m  pytorchjob-controller  PyTorchJob default/llama-sft is "
    "failed because 1 Worker replica(s) failed.",
    "    Message:               TFJob kubeflow/mnist is failed because 2 Worker replica(s) failed.",
    "MPIJob horovod-bench is failed because 1 Launcher replica(s) failed.",
]


@pytest.mark.parametrize("line", KUBEFLOW_FAILED)
def test_kubeflow_s_job_failed_for_its_replicas_is_a_death(line: str) -> None:
    assert signature_of(line) == "kubeflow-job-replicas-failed"
    assert CATALOGUE.match(line.replace("is failed", "is restarting")) is None


def test_sagemaker_s_report_of_a_failed_training_is_a_death() -> None:
    """sagemaker-training-toolkit's trainer.py logs it once the entry point failed, then the
    container exits non-zero (rendered with the toolkit's logging format)."""
    line = "2024-01-01 10:00:00,000 sagemaker-training-toolkit ERROR    Reporting training FAILURE"
    assert signature_of(line) == "sagemaker-training-failure"
    assert CATALOGUE.match(line.replace("FAILURE", "SUCCESS")) is None


def test_a_lower_case_segmentation_fault_alone_on_its_line_is_a_death() -> None:
    """Pytorch-UNet#192 (corpus52/dev), as posted: zsh's lower-case words without its `zsh: `
    and the command, after a tqdm bar; prose that mentions one is none."""
    for line in ("segmentation fault (core dumped)", "segmentation fault"):
        assert signature_of(line) == "shell-segmentation-fault", line
    assert CATALOGUE.match("fixed a segmentation fault (core dumped) in the loader") is None
    assert CATALOGUE.match("## segmentation fault") is None


@pytest.mark.parametrize(
    "line",
    [
        # LLVM 15 on (MLC-LLM's serving engine on macOS, corpus54)
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: boom",
        # before LLVM 15, and older macOS's `libc++abi.dylib: ` prefix
        "libc++abi.dylib: terminating with uncaught exception of type std::runtime_error: boom",
        "libc++abi: terminating due to uncaught foreign exception",
    ],
)
def test_libcxxabi_s_terminate_handler_in_each_release_s_words(line: str) -> None:
    assert signature_of(line) == "cxx-terminate-uncaught-libcxxabi"


@pytest.mark.parametrize(("signal", "fatal"), [(11, True), (6, True), (2, False), (15, False)])
def test_triton_s_error_signals_only(signal: int, fatal: bool) -> None:
    """Triton's ErrorSignalHandler takes SIGSEGV and SIGABRT; SIGINT and SIGTERM go to its
    graceful handler, in the same words (src/triton_signal.cc)."""
    found = signature_of(f"Signal ({signal}) received.")
    assert (found == "triton-error-signal") == fatal

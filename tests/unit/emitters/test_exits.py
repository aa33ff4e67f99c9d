"""A process's bad exit, as launchers, orchestrators and shells report it, is read by one grammar
(emitters/exits.py): a pending failure of the source that printed it, given out when the output
ends with it and dropped when the run goes on. A stop the processes were asked for (SIGINT: a
user's Ctrl-C) is no failure, nor is what fails after it; any other signal sent to a launcher from
outside (SIGTERM, SIGHUP) ended a run that did not ask to end: a failure, whichever launcher."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import read_all

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.exits import clean_exit, exit_report, stop_request
from runwatch.emitters.failures import PODS_KEPT, Failures

#: reports of a bad exit in launchers' and orchestrators' own words (real console lines of the
#: development parts, and the format strings named)
REPORTS = [
    # torch elastic's failure summary (errors/__init__.py _MSG_FORMAT_TEMPLATE), in quotes
    "  exitcode: 1 (pid: 866229)",
    '  msg: "Process failed with exitcode 1"',
    # Kubeflow's training operator and any launcher's wording
    "Pod pytorch-simple-worker-0 exited with code 1",
    "worker 3 terminated by signal SIGKILL",
    "Process rank 2 exited on signal 9",
    # YARN's container launch report (DMLC's application master)
    "18/05/16 12:55:17 INFO dmlc.ApplicationMaster: [DMLC] Task 0 exited with status 1 "
    "Diagnostics:Exception from container-launch.",
    "Exit code: 1",
    # subprocess' CalledProcessError, as a launcher quotes it
    "Command '['python', 'train.py']' returned non-zero exit status 2.",
    # kubectl: a row of `get pods`, `describe pod`'s state and kubelet's and eviction's events
    "pytorchjob-example-82cjcqdz-master-0         0/2     CrashLoopBackOff   8          2m32s",
    "trainer-worker-1                             0/1     Error              0          5m",
    "      Reason:           CrashLoopBackOff",
    "      Exit Code:        2",
    "  Warning  BackOff  3m (x12 over 6m)  kubelet  Back-off restarting failed container",
    "  Warning  Evicted  1m  kubelet  The node was low on resource: memory. Container "
    "pytorch was using 61Gi, which exceeds its request of 32Gi.",
    # eviction for any resource the kubelet watches (pkg/kubelet/eviction/helpers.go
    # nodeLowMessageFmt "The node was low on resource: %v. "), and the pod's reason
    "Message:          The node was low on resource: ephemeral-storage. Container trainer was "
    "using 100Gi, which exceeds its request of 0.",
    "      Reason:           Evicted",
    # supervisord (supervisor/process.py: "exited: %s (%s)", "exit status 1; not expected"),
    # pm2's God daemon ("App [%s:%s] exited with code [%s] via signal [%s]"), Vertex AI's job
    "2024-01-01 10:00:00,000 INFO exited: train (exit status 1; not expected)",
    "PM2      | App [train:0] exited with code [1] via signal [SIGKILL]",
    "The replica workerpool0-0 exited with a non-zero status of 1.",
    # a failure that mentions SIGINT is one all the same
    "worker exited with exit code 1 after SIGINT was ignored",
    "trainer-worker-1                             0/1     Evicted            0          5m",
    # a logged error that something failed to start, in six frameworks' own words (the
    # development parts' real lines: TGI's launcher, vLLM's worker, TensorRT-LLM's executor,
    # FastDeploy's engine, KServe's model server) and a CLI's, logfmt's and glog's
    "2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
    "(VllmWorker rank=2 pid=4189101) ERROR 08-06 22:23:09 [multiproc_executor.py:487] WorkerProc "
    "failed to start.",
    "[11/18/2025-09:33:30] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: "
    "[TensorRT-LLM][ERROR] Assertion failed: Failed, NCCL error",
    "ERROR    2025-08-01 13:47:52,704 3233322 engine.py[line:206] Failed to launch worker "
    "processes, check log/workerlog.* for more details.",
    "2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start model "
    "server: integer division or modulo by zero",
    "Error: failed to spawn the rollout workers: address already in use",
    'time="2025-01-01T00:00:00Z" level=error msg="failed to start the reward server"',
    "E0101 00:00:00.000000 4242 server.cc:88] Failed to initialize the gRPC server",
]
#: the same words for a process that ended well, or no process's exit at all
HEALTHY = [
    "Exit Code:        0",
    "      Reason:           Completed",
    "srun: error: node1: task 0: Exited with exit code 0",
    "Process finished with exit code 0",
    "pytorch-dist-mnist-gloo        Succeeded            2022-06-20T23:28:35Z",
    "trainer-worker-0                             1/1     Running            0          5m",
    "  --exit-code 1          exit with this code when a check fails",
    "[INFO] exit status: unknown",
    "The run will exit with code 1 if the checkpoint is missing",
    "Evicted 3 stale entries from the rollout cache",
    "Collected exit status of 8 workers: all succeeded",
    "All 4 ranks finished; checking exit code of 4 subprocesses",
    "Process 1234 terminated by signal SIGINT",
    "2024-01-01 10:00:00,000 INFO exited: train (exit status 0; expected)",
    # a user's Ctrl-C: a stop, not an exit of the process's own accord
    "PM2      | App [train:0] exited with code [1] via signal [SIGINT]",
    # a failure to start that the program goes on after, or one no error level reports
    "ERROR Failed to start the profiler, continuing without it",
    "ERROR failed to initialize wandb: falling back to the console logger",
    "ERROR Failed to launch the dashboard; retrying in 5 s (attempt 2 of 5)",
    "WARNING Failed to start the metrics exporter",
    "INFO the engine failed to start once before; it started on the second try",
    "if the server fails to start, check the port",
]


@pytest.mark.parametrize("line", REPORTS)
def test_a_launcher_s_report_of_a_bad_exit_is_read(line: str) -> None:
    assert exit_report(line) == line.strip()


@pytest.mark.parametrize("line", HEALTHY)
def test_a_clean_exit_or_no_exit_is_no_report(line: str) -> None:
    assert exit_report(line) is None


def test_a_clean_exit_in_any_words() -> None:
    assert clean_exit("RuntimeError: Process ApiServer_0 (PID: 31337) died with exit code 0")
    assert not clean_exit("RuntimeError: Process ApiServer_0 (PID: 31337) died with exit code 1")


def _failed(lines: list[str]) -> list[dict[str, Any]]:
    return [f for k, f in read_all(lines) if k == "component.failed"]


def test_a_pod_row_whose_name_column_kubectl_padded_is_its_report() -> None:
    """kubectl pads NAME to the longest name it lists, so a row kept by `grep` may hold a run
    of spaces a terminal's padding would: its Error is still the pod's report (corpus39's
    Kubeflow PyTorchJob, its worker exited 1 while its master ran)."""
    row = "pytorchjob-worker-0" + " " * 38 + "0/1     Error     0          12m"
    (fields,) = _failed([row])
    assert "Error" in fields["error"]


def test_a_report_is_the_run_s_end_unless_the_run_goes_on() -> None:
    """Katib's PyTorchJob pods crash-looping is the console's last word: a failure. A worker
    that torch elastic restarts, after which steps go on, was not the run's end."""
    table = [
        "NAME                                         READY   STATUS             RESTARTS   AGE",
        "pytorchjob-example-82cjcqdz-master-0         0/2     CrashLoopBackOff   8          2m32s",
        "pytorchjob-example-82cjcqdz-worker-0         0/1     Init:1/2           0          2m31s",
    ]
    (fields,) = _failed(table)
    assert "CrashLoopBackOff" in fields["error"]
    restarted = [
        "Pod pytorch-simple-worker-0 exited with code 1",
        "step: 120 loss: 0.52 lr: 0.001",
        "step: 121 loss: 0.51 lr: 0.001",
    ]
    assert _failed(restarted) == []


def test_a_logged_failure_to_start_is_the_end_unless_work_goes_on_and_watch_sees_it() -> None:
    """A server's own ERROR that it failed to start, the console's last word, is its failure
    -- through the scanner `runwatch watch` reads with too (its markers find the line); steps
    after it say the program came up after all."""
    line = (
        "Error: failed to spawn the rollout workers: address already in use\n"  # (no catalogue's)
    )
    scanner = LineScanner(LineParser())
    found = scanner.feed(line.encode()) + scanner.finish() + scanner.parser.finish()
    (fields,) = [f for k, f in found if k == "component.failed"]
    assert fields["error"] == line.strip()
    assert _failed([line, "step: 1 loss: 0.52", "step: 2 loss: 0.51"]) == []


#: mpi-operator's launcher as `kubectl get pods` showed it three times (corpus31's control,
#: kubeflow/mpi-operator#470): it fails and is restarted until its workers answer
_LAUNCHER = "nccl-tests-efa-16-launcher-mkjgm"
_WORKER = "nccl-tests-efa-16-worker-0        "
_RESTARTS = [
    "NAME                               READY   STATUS    RESTARTS   AGE",
    f"{_LAUNCHER}   0/1     Error     0          5s",
    f"{_WORKER} 1/1     Running   0          6s",
    "NAME                               READY   STATUS             RESTARTS      AGE",
    f"{_LAUNCHER}   0/1     CrashLoopBackOff   1 (15s ago)   22s",
    f"{_WORKER} 1/1     Running            0             22s",
]
_RUNS_AGAIN = f"{_LAUNCHER}   1/1     Running   2 (21s ago)   28s"


def test_a_pod_that_runs_again_ready_after_its_crash_was_restarted() -> None:
    """A later row of the same pod `Running` with every container ready takes back its
    `Error` and its `CrashLoopBackOff` (the kubelet's restart succeeded); another pod running,
    or the pod running with a container not ready, takes back nothing."""
    assert _failed([*_RESTARTS, _RUNS_AGAIN]) == []
    (fields,) = _failed(_RESTARTS)
    assert "CrashLoopBackOff" in fields["error"]
    assert _failed([*_RESTARTS, f"{_WORKER} 1/1     Running   0          28s"]) != []
    assert _failed([*_RESTARTS, f"{_LAUNCHER}   0/1     Running   2 (21s ago)   28s"]) != []
    other = "other-job-launcher-x2k9q           0/1     Error     0          30s"
    (fields,) = _failed([*_RESTARTS, other, _RUNS_AGAIN])
    assert fields["error"].startswith("other-job-launcher-x2k9q")


def test_the_crashed_pods_a_source_names_are_remembered_up_to_a_bound() -> None:
    """A crash-looping fleet's rows name pods without end: the oldest are let go."""
    failures = Failures()
    for n in range(PODS_KEPT + 50):
        failures.read(None, f"job-worker-{n}   0/1     Error     0          5s")
    kept = failures._pods[None]
    assert len(kept) == PODS_KEPT
    assert "job-worker-0" not in kept
    assert f"job-worker-{PODS_KEPT + 49}" in kept


# --- a stop the processes were asked for (SIGINT: a user's Ctrl-C) --------------------------
#: the elastic agent's warning, DeepSpeed's launcher's and torch's termination handler's
#: (format strings rendered: `Signals.SIGINT` before Python 3.11)
STOPS = [
    "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down "
    "workers",
    "W1129 10:00:00.000000 4242 torch/distributed/elastic/agent/server/api.py:752] Received "
    "Signals.SIGINT death signal, shutting down workers",
    "[2025-01-09 12:00:01,124] [INFO] [launch.py:328:sigkill_handler] Main process received "
    "SIGINT, exiting",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 2",
    "KeyboardInterrupt",
]
#: a signal no one at the terminal sent (SIGTERM: a scheduler's time limit, a host's OOM
#: handling, a peer node's agent -- corpus7's and corpus15's real lines; SIGHUP: the session
#: closed), and sentences about one
NOT_STOPS = [
    "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down "
    "workers",
    "W1221 17:13:59.240000 46660 torch/distributed/elastic/agent/server/api.py:704] Received 1 "
    "death signal, shutting down workers",
    "[2025-01-09 12:00:01,124] [INFO] [launch.py:328:sigkill_handler] Main process received "
    "SIGTERM, exiting",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 1",
    "Received 9 death signal, shutting down workers",
    "handle KeyboardInterrupt gracefully: see the docs",
]


@pytest.mark.parametrize("line", STOPS)
def test_a_stop_the_processes_were_asked_for_is_read(line: str) -> None:
    assert stop_request(line) == line.strip()


@pytest.mark.parametrize("line", NOT_STOPS)
def test_another_signal_is_no_stop(line: str) -> None:
    assert stop_request(line) is None


def test_a_launcher_s_death_signal_is_a_failure_unless_it_is_a_ctrl_c() -> None:
    """torch elastic's agent and DeepSpeed's launcher shut their workers down on a signal sent
    to them from outside; one policy for both: a SIGTERM (a scheduler's cancel, time limit or
    preemption) or a SIGHUP ended a run that did not ask to end (the catalogue's entries,
    torch-elastic-death-signal and deepspeed-launcher-sigterm), a SIGINT is a stop."""
    for line in NOT_STOPS[:3]:
        (fields,) = _failed([line])
        assert (fields["component"], fields["how"]) == ("trainer", "fatal")
    for line in STOPS[:3]:
        assert _failed([line]) == []


def test_deepspeed_s_launcher_terminated_after_its_kills_is_one_failure() -> None:
    """The launcher kills its ranks, then says the signal it received: one failure, the
    signal's, and the ranks' tracebacks cut by the kill after it name no other."""
    failed = _failed([*_KILLS, NOT_STOPS[2], *_CUT])
    assert [f["error"][-38:] for f in failed] == ["Main process received SIGTERM, exiting"]


_RANK_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 88, in <module>',
    "    dist.all_reduce(t)",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
    "[10.0.0.2]:4242",
]


def _failed(lines: list[str]) -> list[dict[str, Any]]:
    return [f for k, f in read_all(lines) if k == "component.failed"]


def test_what_fails_after_a_user_s_stop_is_the_stop_s_doing() -> None:
    """A user's Ctrl-C of DeepSpeed's launcher: its ranks' peers die of the stop (a transport's
    error); an engine's fatal line and a shell's report after it are no failure either."""
    stop = STOPS[2]
    assert _failed(_RANK_TRACEBACK) != []  # alone, the rank's death
    assert _failed([stop, *_RANK_TRACEBACK]) == []
    assert _failed([stop, "Killed"]) == []


def test_a_signal_exception_of_a_stop_is_no_failure() -> None:
    lines = [
        STOPS[1],
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        STOPS[3],
    ]
    assert _failed(lines) == []
    # the same exception for a signal no one asked for (SIGHUP: the terminal went away)
    sighup = next(line for line in NOT_STOPS if line.endswith("got signal: 1"))
    assert _failed([*lines[1:-1], sighup]) != []


def test_a_failure_before_the_stop_stays_the_run_s_failure() -> None:
    """The job died, then the user pressed Ctrl-C: its own KeyboardInterrupt traceback does not
    hide the failure before it."""
    interrupted = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                   "    time.sleep(60)", "KeyboardInterrupt"]  # fmt: skip
    failed = _failed([*_RANK_TRACEBACK, *interrupted])
    assert [f["error"][:12] for f in failed] == ["RuntimeError"]


#: DeepSpeed's launcher tearing its ranks down (deepspeed/launcher/launch.py `sigkill_handler`,
#: the format rendered as 0.5.6-0.5.7 log it) and the head of a traceback after it, cut
_KILLS = [
    "[2021-11-21 08:32:07,148] [INFO] [launch.py:131:sigkill_handler] Killing subprocess 250621",
    "[2021-11-21 08:32:07,149] [INFO] [launch.py:131:sigkill_handler] Killing subprocess 250622",
]
_CUT = [
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.6/runpy.py", line 193, in _run_module_as_main',
    '    "__main__", mod_spec)',
]


def test_a_traceback_after_the_launcher_killed_its_ranks_is_a_rank_s_failure() -> None:
    """To 0.5.7 the launcher raises CalledProcessError after killing its ranks when one exited
    non-zero: its traceback, cut before its exception line, still says so."""
    failed = _failed([*_KILLS, *_CUT])
    assert len(failed) == 1
    assert "Killing subprocess 250622" in failed[0]["error"]
    # the cut traceback alone is the process's last word, but names no launcher's kill
    (alone,) = _failed(_CUT)
    assert alone["error"].startswith("an uncaught traceback, cut before its exception line")


def test_kills_the_output_ends_on_are_the_launcher_s_failure_said_once() -> None:
    """The launcher kills its ranks only when one exited non-zero or a signal ended the run,
    and a user's Ctrl-C writes its stop right after: kills that nothing followed (the line
    that said which was not kept, corpus35's GPT-J run killed at -9) are a trainer's death.
    Said once: a failure read before them, or the launcher's own report after them, is it."""
    (fields,) = _failed(_KILLS)
    assert fields["component"] == "trainer"
    assert "Killing subprocess 250622" in fields["error"]
    assert [f["error"][:12] for f in _failed([*_RANK_TRACEBACK, *_KILLS])] == ["RuntimeError"]
    report = ("[2021-11-21 08:32:07,150] [ERROR] [launch.py:139:sigkill_handler] ['python', "
              "'train.py', '--local_rank=1'] exits with return code = -9")  # fmt: skip
    assert len(_failed([*_KILLS, report])) == 1


def test_the_launcher_s_stop_after_its_kills_is_no_failure() -> None:
    """A user's Ctrl-C: the launcher kills its ranks and says it received SIGINT; a rank's
    traceback cut by the kill, before or after that line, is the stop's."""
    stop = "Main process received SIGINT, exiting"
    assert _failed([*_KILLS, stop, *_CUT]) == []
    assert _failed([*_KILLS, *_CUT, stop]) == []


def test_a_stop_after_which_work_goes_on_stopped_nothing() -> None:
    """A loop that catches `KeyboardInterrupt` (to skip an evaluation, say) and trains on: a
    failure after the next step is the run's."""
    step = "step:5 - critic/score/mean:0.5 - actor/entropy:0.61"
    assert _failed(["KeyboardInterrupt", step, *_RANK_TRACEBACK]) != []
    assert _failed(["KeyboardInterrupt", *_RANK_TRACEBACK]) == []

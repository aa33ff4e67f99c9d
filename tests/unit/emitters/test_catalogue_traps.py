"""Traps of the catalogue entries read from NCCL's and CPython's sources for corpus15 (issue
41): NCCL's socket and proxy-service warnings are a failure only when the process makes no
progress after them (corpus8's control trains on after the bootstrap's), and runpy's words for
a `python -m` that could not start are not Python's `ModuleNotFoundError` line a program
logs."""

from __future__ import annotations

from typing import Any

from helpers import read_all

from runwatch.emitters.catalogue import CATALOGUE

CLOSED = ("a100-st-p4d24xlarge-22:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : "
          "Connection closed by remote peer a100-st-p4d24xlarge-22<47861>")  # fmt: skip
PROXY = ("a100-st-p4d24xlarge-22:183006:183220 [1] proxy.cc:1119 NCCL WARN [Proxy Service 9] "
         "Failed to execute operation Connect from rank 9, retcode 6")  # fmt: skip
STEPS = ["Train Epoch: 1 [0/246000 (0%)]\tLoss: 0.036680415272713",
         "Train Epoch: 1 [2700/246000 (18%)]\tLoss: 0.000002425569619"]  # fmt: skip


def failed(lines: list[str]) -> list[dict[str, Any]]:
    return [f for k, f in read_all(lines) if k == "component.failed"]


def test_nccl_s_socket_and_proxy_warnings_are_a_death_only_when_nothing_follows() -> None:
    for line in (CLOSED, PROXY, "NCCL WARN socketProgress: Connection closed by remote peer x<1>"):
        (fields,) = failed([line])
        assert fields["how"] == "fatal", line
        assert failed([line, *STEPS]) == [], line  # the job went on (corpus8's control)


def test_runpy_s_report_is_the_interpreter_s_not_a_logged_import_error() -> None:
    said = ("/root/miniconda3/envs/py3.11/bin/python: Error while finding module specification "
            "for 'axolotl.cli.train' (ModuleNotFoundError: No module named 'axolotl')")  # fmt: skip
    assert CATALOGUE.match(said) is not None
    assert CATALOGUE.match("/usr/bin/python3: No module named axolotl.cli.train") is not None
    for line in ("ModuleNotFoundError: No module named 'axolotl'",
                 "WARNING: flash_attn: No module named flash_attn_2_cuda, using sdpa",
                 "INFO python: No module named foo is expected here, skipping"):  # fmt: skip
        assert CATALOGUE.match(line) is None, line


def test_ollama_s_runner_dying_while_loading_either_way_and_not_its_load_timing_out() -> None:
    """server/sched.go's "error loading llama server" (ollama v0.6.6): the runner's done
    channel ("process has terminated") or its process state ("no longer running") say it died;
    a load that timed out is another failure, not this entry's."""
    head = 'time=2025-07-14T19:16:12.750+01:00 level=ERROR source=sched.go:457 msg="error loading '
    for error in ("llama runner process has terminated: exit status 2",
                  "llama runner process no longer running: 2 "):  # fmt: skip
        found = CATALOGUE.match(f'{head}llama server" error="{error}"')
        assert found is not None
        assert found.id == "ollama-error-loading-llama-server"
    timed = 'error="timed out waiting for llama runner to start - progress 0.00 - "'
    assert CATALOGUE.match(f'{head}llama server" {timed}') is None


def test_triton_s_model_table_names_a_model_that_failed_to_load_not_one_unloaded() -> None:
    """core's `PrintBackendAndModelSummary` (src/server.cc): a version's status is its state
    and a reason; `UNAVAILABLE: unloaded` is a model unloaded on purpose (strict readiness
    excuses it), any other reason one that failed to load (corpus45/dev's TensorRT-LLM row)."""
    failed_row = (
        "| tensorrt_llm   | 1       | UNAVAILABLE: Internal: unexpected error when "
        "creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error |"
    )
    found = CATALOGUE.match(failed_row)
    assert found is not None
    assert found.id == "triton-model-unavailable"
    assert CATALOGUE.match("2024-05-01T10:00:00Z " + failed_row) is not None  # a collector's time
    assert failed([failed_row, *STEPS]) == []  # `--exit-on-error=false`: the server goes on
    for row in ("| tensorrt_llm   | 1       | UNAVAILABLE: unloaded |",
                "| preprocessing  | 1       | READY   |",
                "| Model          | Version | Status  |"):  # fmt: skip
        assert CATALOGUE.match(row) is None, row


def test_a_failed_cuda_check_s_frame_is_a_cuda_error_raised() -> None:
    """c10's `c10_cuda_check_implementation` (c10/cuda/CUDAException.cpp) is in a backtrace only
    when a CUDA call failed and c10 threw: the frame alone, its error line lost (corpus45/dev's
    container log), still says so -- and another c10 frame does not."""
    frame = ("frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, "
             "int, bool) + 0x118 (0x73bc1928ff08 in /opt/conda/lib/libc10_cuda.so)")  # fmt: skip
    (fields,) = failed([frame])
    assert fields["error"] == frame
    assert failed([frame, *STEPS]) == []  # caught and logged: the run went on
    watchdog = ("frame #5: c10d::ProcessGroupNCCL::watchdogHandler() + 0x1da (0x73bbc95f6a9a in "
                "/opt/conda/lib/libtorch_cuda.so)")  # fmt: skip
    assert failed([watchdog]) == []


def test_runc_s_oom_killed_init_and_skypilot_s_failed_job_are_deaths() -> None:
    """runc's `container init was OOM-killed` (libcontainer/process_linux.go) as the kubelet's
    event passes it on, and SkyPilot's driver's `Job N failed with return code list:` (either
    prefix), from corpus46/dev; a job that succeeded, and runc's other OOM words, are not."""
    kubelet = ('Warning  Failed  113s   kubelet  Error: container create failed: level=error '
               'msg="runc create failed: unable to start container process: container init was '
               'OOM-killed (memory limit too low?)"')  # fmt: skip
    for line, ident in ((kubelet, "runc-init-oom-killed"),
                        ("ERROR: Job 439 failed with return code list: [1]",
                         "skypilot-job-failed-return-codes"),
                        ("SKY INFO: Job 2 failed with return code list: [0, 1]",
                         "skypilot-job-failed-return-codes")):  # fmt: skip
        found = CATALOGUE.match(line)
        assert found is not None, line
        assert found.id == ident
    for line in ("Job finished (status: SUCCEEDED).", "INFO: Job 3 succeeded."):
        assert CATALOGUE.match(line) is None, line

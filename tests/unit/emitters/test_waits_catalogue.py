"""The declared-waits catalogue (emitters/waits.toml): every wait loads, says where it comes
from, matches its own sample line, which is a real console's line in the fixture it names (or
its format string rendered), and that line is its process's wait in the entry's phase, through
`runwatch diagnose` and `runwatch watch`'s scanner; a console that ends in it ended in its hang,
and one that goes on after it (the wait's own lines between its repeats aside) did not; bad data
is refused with the wait named.

Lines marked with a URL are as users posted them there; the others are the format strings of
the sources each entry names, rendered with sample values."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import rank_statuses as statuses
from helpers import stalled

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.exceptions import CatalogueError
from runwatch.emitters.waits import DECLARED, load

ROOT = Path(__file__).resolve().parents[3]
WAITS = {w.id: w for w in DECLARED.waits}


@pytest.mark.parametrize("wait", DECLARED.waits, ids=lambda w: w.id)
def test_every_wait_matches_its_sample_and_its_sample_is_real(wait: Any) -> None:
    assert DECLARED.match(wait.sample) is not None
    assert DECLARED.match(wait.sample)[0] is wait  # type: ignore[index]
    if wait.sample_from != "rendered":
        fixture = ROOT / wait.sample_from
        assert wait.sample in fixture.read_text(encoding="utf-8"), wait.sample_from
    assert any(x in wait.sample for x in DECLARED.markers)  # the scanner shows it


def lasting(wait: Any) -> str:
    """The entry's sample as a console that shows it lasting as its entry needs: after a
    status that says the run went on long enough (Tune's), or again two minutes later (or as
    long after as its `lasted` needs: AReaL's controller's) by the job's clock (Ray's
    autoscaler's) or the logger's (the raylet's) -- unless the line itself
    says it lasted that long (kubectl's `(x351 over 23h)`)."""
    before = "Current time: 2022-01-17 11:46:36 (running for 00:03:40.19)\n" if wait.elapsed else ""
    text = before + wait.sample + "\n"
    hit = DECLARED.match(wait.sample)
    said = hit is not None and wait.seconds(hit[1]) >= wait.lasted
    if wait.lasted and not wait.elapsed and not said:
        # (two minutes later, or as many more as the entry's `lasted` asks past one line's)
        gap = max(2, math.ceil((wait.lasted - wait.every) / 60))
        later = re.sub(r"\+(\d+)m(\d+)s", lambda m: f"+{int(m[1]) + gap}m{m[2]}s", wait.sample)
        if later == wait.sample:  # no job clock: the logger's own (the raylet's)
            later = re.sub(
                r"(?<!\d)(\d\d):(\d\d):(\d\d)(?!\d)",  # (RFC 3339's `T04:42:14` too)
                lambda m: f"{m[1]}:{int(m[2]) + gap:02d}:{m[3]}",
                wait.sample,
                count=1,
            )
        assert later != wait.sample
        text += later + "\n"
    return text


@pytest.mark.parametrize("wait", DECLARED.waits, ids=lambda w: w.id)
def test_every_wait_s_sample_is_a_wait_of_its_phase_that_a_console_ends_in(
    wait: Any, tmp_path: Path
) -> None:
    """Its sample line, after a status that says the run went on long enough where the entry
    needs one (Tune's), or again as long after as the entry needs (Ray's autoscaler's, by the
    job's clock), is the process's wait; the console ends in it: its hang."""
    text = lasting(wait)
    assert [s["phase"] for s in statuses(text)] == [wait.phase]
    watched = LineScanner(LineParser()).feed(text.encode())
    assert [f["phase"] for k, f in watched if k == "rank.status"] == [wait.phase]
    assert stalled(tmp_path, text)


@pytest.mark.parametrize("wait", DECLARED.waits, ids=lambda w: w.id)
def test_a_console_that_goes_on_after_a_wait_did_not_hang_there(wait: Any, tmp_path: Path) -> None:
    """... unless its line says itself that it lasted ranks_stalled's limit (5 minutes) and
    dates it (verl's timeout error), or its entry asks that long shown: a stall shown whole,
    whatever came after it. kubectl's
    `(x351 over 23h)` does not date its wait (`dates = false`): the pod may have been scheduled
    since, which the next row says."""
    text = lasting(wait) + "saving checkpoint to /ckpt/step_100\n"
    assert statuses(text)[-1]["phase"] == "exited"
    hit = DECLARED.match(wait.sample)
    # (or the entry asks the console to show it lasting that long before it is a wait at
    # all: TGI's shard start-up, ten minutes -- shown so, it was a stall whatever came after)
    whole = hit is not None and wait.dates and max(wait.seconds(hit[1]), wait.lasted) >= 300
    assert bool(stalled(tmp_path, text)) is whole


#: the autoscaler's pending warning and what followed it (a Dask-on-Ray benchmark's console
#: as the search tool stores it): the cluster grew, the work went on
RAY_PENDING = (
    "(scheduler +2m2s) Warning: The following resource request cannot be scheduled right now: "
    "{'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. "
    "Consider creating fewer actors or adding more nodes to this Ray cluster.\n"
)
RAY_RESIZED = "(scheduler +2m28s) Resized to 4 CPUs.\n"


def test_ray_s_pending_request_is_a_wait_once_it_lasted_a_minute(tmp_path: Path) -> None:
    """One warning is routine in a cluster that scales (a node coming up; a held-out healthy
    console ends in one): a wait once its repeats show a minute, until the console goes on."""
    assert stalled(tmp_path, RAY_PENDING) == []
    again = RAY_PENDING.replace("+2m2s", "+3m5s")
    assert stalled(tmp_path, RAY_PENDING + again)
    went_on = RAY_PENDING + again + RAY_RESIZED.replace("+2m28s", "+3m28s")
    assert stalled(tmp_path, went_on + "Distributed execution: 50.749\n") == []


def test_the_autoscaler_s_job_clock_dates_its_repeats() -> None:
    """Ray's driver puts the time since the job began on its autoscaler's lines (`(scheduler
    +4m44s)`): warnings 35 s apart show a wait of 35 s, less than the minute that makes it
    one; 65 s apart, a wait of 65 s -- what lets `runwatch watch -- cat` of a saved console
    leave the run open, as its wait began before the command (secretflow#192, corpus24 dev)."""
    warning = RAY_PENDING.split("\n")[0].split(") ", 1)[1]
    text = f"(scheduler +4m44s) {warning}\n(scheduler +5m19s) {warning}\n"
    assert statuses(text) == []
    assert [s["waited"] for s in statuses(text + f"(scheduler +5m49s) {warning}\n")] == [65.0]
    hours = text.replace("+4m44s", "+1h59m50s").replace("+5m19s", "+2h0m55s")
    assert [s["waited"] for s in statuses(hours)] == [65.0]


#: https://github.com/ray-project/ray/issues/20968 (corpus22 dev: Tune's status block under the
#: driver's prefix, the trial pending three minutes and forty seconds)
TUNE_20968 = (
    "(ray_main pid=595) == Status ==\n"
    "(ray_main pid=595) Current time: 2022-01-17 11:46:36 (running for 00:03:40.19)\n"
    "(ray_main pid=595) Memory usage on this node: 1.4/15.6 GiB\n"
    "(ray_main pid=595) Using FIFO scheduling algorithm.\n"
    "(ray_main pid=595) Resources requested: 0/6 CPUs, 0/0 GPUs, 0.0/11.97 GiB heap, 0.0/5.8 GiB "
    "objects (0.0/2.0 HEAD_CPU)\n"
    "(ray_main pid=595) Result logdir: /home/ray/ray_results/appo_training\n"
    "(ray_main pid=595) Number of trials: 1/1 (1 PENDING)\n"
)
#: progress_reporter.py's table under it, rendered
TUNE_TABLE = (
    "+-------------------------+----------+-------+\n"
    "| Trial name              | status   | loc   |\n"
    "|-------------------------+----------+-------|\n"
    "| APPO_CartPole-v0_c5c1a  | PENDING  |       |\n"
    "+-------------------------+----------+-------+\n"
)
#: the new output engine's heartbeat (tune/experimental/output.py), rendered
TUNE_NEW = (
    "Trial status: 1 PENDING\n"
    "Current time: 2023-02-24 12:35:39. Total running time: {t}\n"
    "Logical resource usage: 0/6 CPUs, 0/0 GPUs\n"
)


def test_tune_s_trials_all_pending_for_a_minute_are_a_wait_that_lasted_the_run(
    tmp_path: Path,
) -> None:
    """Every trial PENDING: none ever ran, so the experiment waited as long as it has run --
    a wait once that is a minute. Its table does not end it; a status with a trial running
    does; the first status of a run, seconds in, is no wait."""
    (status,) = statuses(TUNE_20968 + TUNE_TABLE)
    assert (status["phase"], status["waited"]) == ("ray_tune_trials_pending", 220.19)
    assert stalled(tmp_path, TUNE_20968 + TUNE_TABLE)
    assert statuses(TUNE_20968.replace("00:03:40.19", "00:00:05.91")) == []
    running = TUNE_20968.replace("(1 PENDING)", "(1 RUNNING)").replace("03:40", "03:50")
    assert statuses(TUNE_20968 + TUNE_TABLE + running)[-1]["phase"] == "exited"
    assert [s["waited"] for s in statuses(TUNE_NEW.format(t="3min 40s"))] == [220.0]
    assert statuses(TUNE_NEW.format(t="40s")) == []
    assert stalled(tmp_path, TUNE_NEW.format(t="1hr 0min 2s"))


def test_a_trial_back_to_pending_after_one_ran_waited_since_it_ran(tmp_path: Path) -> None:
    """Tune puts a trial that failed back to PENDING (a retry under max_failures, a requeue):
    the run time then is no wait's, which lasted only since the status that showed it running
    (found by the review of issue 41's waits: two hours read as the wait)."""
    running = TUNE_20968.replace("(1 PENDING)", "(1 RUNNING)").replace("00:03:40", "02:00:00")
    error = "2022-01-17 11:46:40,000\tERROR trial_runner.py:773 -- Trial APPO_a1: Error.\n"
    again = TUNE_20968.replace("00:03:40", "02:00:05")
    later = TUNE_20968.replace("00:03:40", "02:01:30")
    text = running + error + again + later
    assert statuses(running + error + again) == []  # five seconds pending: no wait yet
    waited = {round(s["waited"], 3) for s in statuses(text)}
    assert waited == {90.0}
    parser = LineParser()
    found = LineScanner(parser).feed(text.encode()) + parser.finish()
    assert {round(f["waited"], 3) for k, f in found if k == "rank.status"} == waited  # (watch's)


#: https://github.com/google-research/text-to-text-transfer-transformer/issues/38 (corpus22 dev:
#: each record twice, absl's and glog's; the attempt's own lines between)
TPU_38 = (
    "WARNING:tensorflow:Failed to connect to the Tensorflow master. The TPU worker may not be "
    "ready (still scheduling) or the Tensorflow master address is incorrect: got "
    "(grpc://10.240.1.2:8470).\n"
    "WARNING:tensorflow:Retrying (5/288).\n"
    "INFO:tensorflow:Querying Tensorflow master (grpc://10.240.1.2:8470) for TPU system "
    "metadata.\n"
    "2020-01-08 00:47:24.463112: W tensorflow/core/distributed_runtime/rpc/grpc_session.cc:370] "
    "GrpcSession::ListDevices will initialize the session with an empty graph and other "
    "defaults because the session has not yet been created.\n"
)
#: tpu_system_metadata.py's line once the master answered, rendered
TPU_FOUND = "INFO:tensorflow:Found TPU system:\n"


def test_tensorflow_s_tpu_master_not_ready_is_a_wait_its_retries_go_on(tmp_path: Path) -> None:
    """Each failure is one attempt that timed out (a minute at least); its retry and query
    lines are the same wait's; the master answering ends it."""
    assert [s["phase"] for s in statuses(TPU_38 * 2)] == ["tensorflow_tpu_master"] * 2
    assert stalled(tmp_path, TPU_38 * 2)
    assert statuses(TPU_38 + TPU_FOUND)[-1]["phase"] == "exited"
    assert stalled(tmp_path, TPU_38 + TPU_FOUND) == []


#: the raylet's line for a worker process still starting a timeout after it was started
#: (SkyRL#224, corpus25/dev), a minute apart by the raylet's clock, and the one for a process
#: that died starting (RLinf#227, corpus9/dev: the catalogue's crash)
RAYLET = (
    "(raylet) \\[2025-08-29 23:{m}:23,740 E 2711113 2711113] (raylet) worker\\_pool.cc:586: Some "
    "workers of the worker process(2769699) have not registered within the timeout. The process "
    "is still alive, probably it's hanging during start. \\[repeated 4x across cluster]\n"
)
RAYLET_DEAD = RAYLET.replace("still alive, probably it's hanging", "dead, probably it crashed")


def test_the_raylet_s_worker_hanging_in_its_start_is_a_wait_once_it_repeats(
    tmp_path: Path,
) -> None:
    """One timeout is one slow worker, which the raylet kills and starts again: no wait yet; the
    raylet saying it again a minute later is the worker still not starting (two timeouts);
    a worker's start ending it (a step) ends the wait."""
    assert stalled(tmp_path, RAYLET.format(m=28)) == []
    again = RAYLET.format(m=28) + RAYLET.format(m=29)
    assert [s["phase"] for s in statuses(again)] == ["ray_worker_registration"]
    assert stalled(tmp_path, again)
    assert stalled(tmp_path, again + "step 1 | loss: 0.5 | reward: 0.1\n") == []
    assert statuses(RAYLET_DEAD.format(m=28) + RAYLET_DEAD.format(m=29)) == []


VALID = """
[[wait]]
id = "w"
framework = "f"
versions = "1"
source = "f 1 : f.py"
component = "worker"
phase = "f_wait"
literal = "waits on"
pattern = 'waits on (?P<n>\\d+) s'
sample = "it waits on 60 s"
sample_from = "rendered"
"""


def test_a_valid_entry_loads_and_states_its_seconds() -> None:
    (wait,) = load(VALID)
    m = wait.pattern.search("it waits on 90 s")
    assert m is not None
    assert wait.seconds(m) == 90.0


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (('phase = "f_wait"\n', ""), "missing or empty phase"),
        (("pattern = 'waits on", "pattern = '(waits on"), "bad pattern"),
        (("sample_from", "colour = 1\nsample_from"), "unknown keys colour"),
        (('phase = "f_wait"', 'phase = "F wait"'), "phase 'F wait'"),
        (("sample_from", "lasted = -1\nsample_from"), "lasted must be a number"),
        (("sample_from", "elapsed = 'ran (?P<x>\\\\d+)'\nsample_from"), "elapsed needs a group t"),
        (("sample_from", "dates = 'no'\nsample_from"), "dates must be true or false"),
    ],
)
def test_bad_data_is_refused_with_the_wait_named(change: tuple[str, str], says: str) -> None:
    with pytest.raises(CatalogueError, match="wait w: " + says):
        load(VALID.replace(*change))


def test_ids_are_unique() -> None:
    with pytest.raises(CatalogueError, match="ids twice"):
        load(VALID + VALID)


#: https://github.com/open-edge-platform/geti_v2/issues/1876 (corpus26 dev): kubectl describe's
#: event row, the scheduler's FailedScheduling recorded 351 times over 23 hours
K8S_DESCRIBE = WAITS["kubernetes-pod-failed-scheduling"].sample + "\n"


def test_a_pod_failing_to_schedule_for_a_minute_or_more_is_a_wait_the_console_ends_in(
    tmp_path: Path,
) -> None:
    """The scheduler's FitError (`0/N nodes are available: ...`) is its verdict that no node
    fits the pod: the pod's wait, whatever the row's age, and a console that ends in it ended
    in its hang -- in `kubectl get events`' order (the interval first) too; kubectl's `(xN
    over T)` (describe.go DescribeEvents) says since when, undated (`dates = false`). Another
    extender's refusal that is no FitError is no wait."""
    assert [s["phase"] for s in statuses(K8S_DESCRIBE)] == ["kubernetes_pod_pending"]
    assert stalled(tmp_path, K8S_DESCRIBE)
    assert stalled(tmp_path, K8S_DESCRIBE.replace("(x351 over 23h)", "(x3 over 50s)"))
    extender = (
        "  Warning  FailedScheduling  <unknown>  default-scheduler  pod tts1 had been predicated!\n"
    )
    assert statuses(extender) == []
    # its message's rest, where a terminal wrapped the row, is the wait's own (`also`)
    assert stalled(tmp_path, K8S_DESCRIBE[:120] + "\n" + K8S_DESCRIBE[120:])
    events = (
        "LAST SEEN   TYPE      REASON             OBJECT         MESSAGE\n"
        "6m7s (x351 over 2d3h)   Warning   FailedScheduling   pod/train-0   0/1 nodes are "
        "available: 1 Insufficient nvidia.com/gpu.\n"
    )
    assert [s["phase"] for s in statuses(events)] == ["kubernetes_pod_pending"]
    assert [s["phase"] for s in statuses(events.replace("2d3h", "59s"))] == [
        "kubernetes_pod_pending"]  # fmt: skip
    # the kubelet's volume wait writes its event after two minutes of it (`every`)
    mount = (
        "20m (x1 over 20m)   Warning   FailedMount   pod/train-0   Unable to attach or mount "
        "volumes: unmounted volumes=[dshm]: timed out waiting for the condition\n"
    )
    assert [s["phase"] for s in statuses(mount)] == ["kubernetes_pod_volumes"]
    assert [s["phase"] for s in statuses(mount.replace("20m (x1 over 20m)", "20m"))] == [
        "kubernetes_pod_volumes"]  # fmt: skip


def test_a_pod_scheduled_after_its_wait_or_failing_once_is_no_stall(tmp_path: Path) -> None:
    """A wait that the next row ends (`Scheduled`: the autoscaler's new GPU node came) ended --
    no stall, though describe indents every row (LEVEL_1), which ends no wait only the grammar
    read; cluster-autoscaler's NotTriggerScaleUp between the rows says the wait goes on."""
    once = K8S_DESCRIBE.replace("6m7s (x351 over 23h)", "12s")
    placed = "  Normal   Scheduled   2s   default-scheduler  Successfully assigned a/b to n1\n"
    assert stalled(tmp_path, once)
    assert stalled(tmp_path, once + placed) == []
    minutes = "  " + K8S_DESCRIBE.replace("(x351 over 23h)", "(x9 over 8m10s)")
    scheduled = "  Normal   Scheduled   2m   default-scheduler  Successfully assigned a/b to n1\n"
    assert stalled(tmp_path, minutes)  # (a console that ends in it ended in its hang)
    assert stalled(tmp_path, minutes + scheduled) == []
    no_scale_up = ("  Normal   NotTriggerScaleUp  3m (x40 over 8m)  cluster-autoscaler  pod didn't "
                   "trigger scale-up: 1 Insufficient nvidia.com/gpu\n")  # fmt: skip
    assert stalled(tmp_path, minutes + no_scale_up)


#: https://github.com/Project-HAMi/HAMi/issues/29 (corpus31 dev: HAMi's vGPU scheduler, the
#: pending pod's events as posted, each row aged once, then the scheduler's own klog lines of
#: its next attempt)
HAMI_ROWS = (
    "  Warning  FailedScheduling  5m51s  4pd-scheduler  0/3 nodes are available: 2 node "
    "unregisterd. preemption: 0/3 nodes are available: 3 No preemption victims found for "
    "incoming pod..\n"
    "  Warning  FailedScheduling  39s    4pd-scheduler  0/3 nodes are available: 2 node "
    "unregisterd. preemption: 0/3 nodes are available: 3 No preemption victims found for "
    "incoming pod..\n"
)
HAMI_KLOG = (
    'I0504 12:11:07.877911       1 schedule_one.go:80] "Attempting to schedule pod" '
    'pod="default/gpu-pod"\n'
    'I0504 12:11:07.883849       1 schedule_one.go:867] "Unable to schedule pod; no fit; '
    'waiting" pod="default/gpu-pod" err="0/3 nodes are available: 2 node unregisterd."\n'
)


def test_a_row_aged_once_dates_the_pod_s_failures_and_the_scheduler_s_tries_go_on(
    tmp_path: Path,
) -> None:
    """A row whose Age is one interval is an event recorded once, that long ago: the pod has
    failed to schedule since then at least; the scheduler's own log of its next attempt
    (`Attempting to schedule pod`, `Unable to schedule pod; no fit; waiting`) is the same wait
    going on, not its end."""
    assert [s["phase"] for s in statuses(HAMI_ROWS)][:1] == ["kubernetes_pod_pending"]
    assert stalled(tmp_path, HAMI_ROWS + HAMI_KLOG)
    scheduled = "  Normal   Scheduled   2s   4pd-scheduler  Successfully assigned default/gpu-pod\n"
    assert stalled(tmp_path, HAMI_ROWS + HAMI_KLOG + scheduled) == []


#: https://github.com/StatCan/jupyter-apis/pull/57 (corpus28 dev), kubectl describe's events:
#: the scheduler's rows aged `<unknown>` (no series to date them), then cluster-autoscaler's
#: NotTriggerScaleUp recorded 3 times over 14 minutes
K8S_UNKNOWN_AGE = (
    "  Warning  FailedScheduling   <unknown>             default-scheduler   0/41 nodes are "
    "available: 2 Insufficient pods, 35 Insufficient cpu, 4 Insufficient memory.\n"
)
K8S_NO_SCALE_UP = "  " + WAITS["kubernetes-autoscaler-not-trigger-scale-up"].sample + "\n"


def test_the_autoscaler_declining_a_pod_for_minutes_dates_its_wait(tmp_path: Path) -> None:
    """cluster-autoscaler's `pod didn't trigger scale-up` (eventing_scale_up_processor.go: once
    a loop for each pod still unschedulable) recorded over 14 minutes: the pod has waited that
    long, where the scheduler's own rows say no age (`<unknown>`); a series of seconds is a
    pod still being placed; the pod scheduled or a scale-up triggered after it ends the wait."""
    assert [s["phase"] for s in statuses(K8S_UNKNOWN_AGE)] == ["kubernetes_pod_pending"]
    assert [s["phase"] for s in statuses(K8S_NO_SCALE_UP)] == ["kubernetes_pod_pending"]
    assert stalled(tmp_path, K8S_UNKNOWN_AGE * 2 + K8S_NO_SCALE_UP)
    assert statuses(K8S_NO_SCALE_UP.replace("12m (x3 over 14m)", "12s (x2 over 30s)")) == []
    scheduled = "  Normal   Scheduled   2m   default-scheduler  Successfully assigned a/b to n1\n"
    assert stalled(tmp_path, K8S_UNKNOWN_AGE + K8S_NO_SCALE_UP + scheduled) == []
    triggered = ("  Normal   TriggeredScaleUp  1m  cluster-autoscaler  pod triggered scale-up: "
                 "[{gpu-pool 0->1 (max: 4)}]\n")  # fmt: skip
    assert stalled(tmp_path, K8S_UNKNOWN_AGE + K8S_NO_SCALE_UP + triggered) == []


#: https://github.com/YWenxi/think-with-images-through-self-calling/issues/3 (corpus26 dev):
#: verl's driver raising after its register-center wait, the poster's `...` elisions kept
VERL_REGISTER = WAITS["verl-register-center-timeout"].sample + "\n"


def test_verl_s_register_center_timeout_is_its_driver_s_wait_and_death(tmp_path: Path) -> None:
    """verl's TimeoutError says the driver waited its whole timeout for the worker group's
    first rank (single_controller/ray/base.py): a wait of that long, and the driver's death;
    a timeout lowered under ranks_stalled's limit shows no stall."""
    assert [(s["phase"], s["waited"]) for s in statuses(VERL_REGISTER)] == [
        ("verl_register_center", 300.0)
    ]
    assert stalled(tmp_path, VERL_REGISTER)
    assert stalled(tmp_path, VERL_REGISTER.replace("300 seconds", "120 seconds")) == []


# --- the waits read from the sources on 2026-12-01 (waitsrc): each with its control, the same
# wait followed by the framework's own line that says it ended (or by progress)

#: https://github.com/vllm-project/vllm/issues/24133 (corpus25 dev, a control: two lines ten
#: seconds apart), and the same line every ten seconds (v1/engine/utils.py's poll period)
VLLM_CORE = (
    "(APIServer pid=300606) DEBUG 09-02 17:{m:02d}:{s:02d} [utils.py:777] Waiting for 1 local, 0 "
    "remote core engine proc(s) to start.\n"
)
#: a worker's progress between the polls (gpu_model_runner.py), and the API server up
VLLM_WORKER = (
    "(Worker_TP0 pid=529) INFO 09-02 17:{m:02d}:{s:02d} [gpu_model_runner.py:1801] Model loading "
    "took 0.9277 GiB and 0.626989 seconds\n"
)
VLLM_UP = (
    "(APIServer pid=300606) INFO 09-02 17:31:50 [api_server.py:1857] Starting vLLM API server 0 "
    "on http://0.0.0.0:8000\n"
)


def _vllm_polls(first: int, count: int) -> str:
    return "".join(
        VLLM_CORE.format(m=(first + 10 * k) // 60, s=(first + 10 * k) % 60) for k in range(count)
    )


def test_vllm_s_engine_core_not_starting_for_a_minute_is_a_wait_its_start_ends(
    tmp_path: Path,
) -> None:
    """The front-end's poll says every ten seconds that a core has not started: a wait once the
    lines alone show a minute (the corpus25 control's two lines do not); the API server coming
    up ends it, and a worker's progress between the polls ends each run of them -- a large
    model's healthy start writes them for minutes between its workers' lines."""
    real = _vllm_polls(29 * 60 + 6, 2)
    assert statuses(real) == []
    assert stalled(tmp_path, real) == []
    alone = _vllm_polls(29 * 60 + 6, 10)
    assert {s["phase"] for s in statuses(alone)} == {"vllm_engine_core_startup"}
    assert max(s["waited"] for s in statuses(alone)) == 100.0
    assert stalled(tmp_path, alone)
    assert statuses(alone + VLLM_UP)[-1]["phase"] == "exited"
    assert stalled(tmp_path, alone + VLLM_UP) == []
    busy = "".join(
        _vllm_polls(29 * 60 + 6 + 40 * k, 3) + VLLM_WORKER.format(m=29 + (40 * k + 36) // 60,
                                                                 s=(6 + 40 * k + 30) % 60)
        for k in range(4)
    )  # fmt: skip
    assert statuses(busy) == []
    assert stalled(tmp_path, busy) == []


#: huggingface_hub's WeakFileLock (utils/_fixes.py), rendered: another process holds the
#: blob's lock; and what a download writes once it has it (the tqdm bar of snapshot_download)
HF_LOCK = (
    "Still waiting to acquire lock on /root/.cache/huggingface/hub/.locks/models--Qwen--Qwen2.5-"
    "7B-Instruct/a3f1c2d4.lock (elapsed: {n} seconds)\n"
)
HF_FETCHED = "Fetching 4 files: 100%|##########| 4/4 [02:10<00:00, 32.61s/it]\n"


def test_a_cache_lock_held_a_minute_is_a_wait_that_the_download_going_on_ends(
    tmp_path: Path,
) -> None:
    """The lock's line says how long it has waited: under a minute it is another rank still
    downloading the same file; from a minute on a wait, and the console ending in it ended in
    its hang; the download going on after it (its bar) ends it."""
    assert statuses(HF_LOCK.format(n="10.0") + HF_LOCK.format(n="50.1")) == []
    held = HF_LOCK.format(n="10.0") + HF_LOCK.format(n="310.2")
    assert [(s["phase"], s["waited"]) for s in statuses(held)] == [("hf_hub_file_lock", 310.2)]
    assert stalled(tmp_path, held)
    went_on = HF_LOCK.format(n="60.3") + HF_LOCK.format(n="120.4") + HF_FETCHED
    assert statuses(went_on)[-1]["phase"] == "exited"
    assert stalled(tmp_path, went_on) == []


#: Ray Serve's controller (deployment_state.py) every 30 s, rendered with its message's second
#: line, and serve.run's client once every replica started (serve/_private/client.py)
SERVE_INIT = (
    "(ServeController pid=1684) WARNING 2026-11-30 08:{m:02d}:31,398 controller 1684 -- "
    "Deployment 'VLLMDeployment' in application 'default' has 1 replicas that have taken more "
    "than 30s to initialize.\n"
    "(ServeController pid=1684) This may be caused by a slow __init__ or reconfigure method.\n"
)
SERVE_READY = (
    "2026-11-30 08:04:02,117\tINFO client.py:447 -- Application 'default' is ready at "
    "http://127.0.0.1:8000/.\n"
)


def test_ray_serve_s_replica_initializing_for_a_minute_is_a_wait_its_app_ready_ends(
    tmp_path: Path,
) -> None:
    """One warning is a replica 30 s into its constructor (weights loading): no wait; its repeat
    30 s on shows a minute; the message's second line between them ends nothing; the
    application ready ends it."""
    assert statuses(SERVE_INIT.format(m=0)) == []
    going = SERVE_INIT.format(m=0) + SERVE_INIT.format(m=1) + SERVE_INIT.format(m=3)
    assert {s["phase"] for s in statuses(going)} == {"ray_serve_replica_initialization"}
    assert stalled(tmp_path, going)
    assert statuses(going + SERVE_READY)[-1]["phase"] == "exited"
    assert stalled(tmp_path, going + SERVE_READY) == []


#: verl 0.5.0's driver (single_controller/ray/base.py), rendered: each 30 s of its poll, and a
#: worker of the group going on once the register center came
VERL_WAITING = (
    "(TaskRunner pid=1130) WARNING:root:Waiting for register center actor GS5TrW_register_center "
    "to be ready. Elapsed time: {n} seconds out of 300 seconds.\n"
)
VERL_WORKER = "(WorkerDict pid=2233) Model config after override: Qwen2Config {\n"


def test_verl_s_register_center_waited_a_minute_is_a_wait_its_workers_going_on_end(
    tmp_path: Path,
) -> None:
    """Its lines at 0 and 30 s are a worker group starting; from 60 s on, the group's first rank
    has not come up: a wait, the console ending in it its hang; its workers going on end it."""
    start = VERL_WAITING.format(n=0) + VERL_WAITING.format(n=30)
    assert statuses(start) == []
    waited = start + VERL_WAITING.format(n=60) + VERL_WAITING.format(n=270)
    assert [s["waited"] for s in statuses(waited)] == [60.0, 270.0]
    assert {s["phase"] for s in statuses(waited)} == {"verl_register_center"}
    assert stalled(tmp_path, waited)
    assert statuses(waited + VERL_WORKER)[-1]["phase"] == "exited"
    assert stalled(tmp_path, waited + VERL_WORKER) == []


#: corpus20 dev (TensorFlowOnSpark's MNIST on YARN): a non-chief worker's SessionManager, each
#: `recovery_wait_secs` (30 s) as session_manager.py sleeps, then training going on
TF_NOT_READY = WAITS["tensorflow-session-manager-model-not-ready"].sample.replace(
    "13:18:34", "13:{m:02d}:{s:02d}"
)
TF_STEP = "2018-03-12 13:21:10,101 INFO (MainThread-75449) global_step/sec: 10.3274\n"


def test_a_worker_s_model_not_ready_for_a_minute_is_a_wait_training_ends(
    tmp_path: Path,
) -> None:
    """Each line is one more `recovery_wait_secs` the chief has not initialized the variables:
    one is a worker that started first; its repeats a minute apart a wait; training ends it."""
    one = TF_NOT_READY.format(m=18, s=34) + "\n"
    assert statuses(one) == []
    lines = "".join(TF_NOT_READY.format(m=18 + k // 2, s=34 if k % 2 == 0 else 4) + "\n"
                    for k in (0, 3, 4))  # fmt: skip
    assert {s["phase"] for s in statuses(lines)} == {"tensorflow_model_not_ready"}
    assert stalled(tmp_path, lines)
    assert statuses(lines + TF_STEP)[-1]["phase"] == "exited"
    assert stalled(tmp_path, lines + TF_STEP) == []


#: kubectl describe's rows for an image the kubelet cannot pull (image_manager.go), rendered,
#: and the row that says it was pulled after all
K8S_BACKOFF = WAITS["kubernetes-image-pull-back-off"].sample + "\n"
K8S_PULLED = (
    '  Normal   Pulled     5s    kubelet  Successfully pulled image "nvcr.io/nvidia/nemo:24.07" '
    "in 3m2.1s\n"
)


def test_an_image_in_pull_back_off_for_minutes_is_a_wait_that_its_pull_ends(
    tmp_path: Path,
) -> None:
    """The BackOff row `(x41 over 12m)`: the pod's containers wait for their image; its
    failed attempt's rows between (`Failed to pull image`, `Error: ErrImagePull`) are the same
    wait's; a row without a count is one back-off; the image pulled after all ends it."""
    assert [s["phase"] for s in statuses(K8S_BACKOFF)] == ["kubernetes_image_pull"]
    failed = (
        '  Warning  Failed     2m (x5 over 12m)  kubelet  Failed to pull image "nvcr.io/nvidia/'
        'nemo:24.07": rpc error: code = Unknown desc = context canceled\n'
        "  Warning  Failed     2m (x5 over 12m)  kubelet  Error: ErrImagePull\n"
    )
    assert stalled(tmp_path, K8S_BACKOFF + failed)
    assert statuses(K8S_BACKOFF.replace("2m (x41 over 12m)", "10s")) == []
    assert stalled(tmp_path, K8S_BACKOFF + K8S_PULLED) == []


#: the attach-detach controller's row for a ReadWriteOnce volume another node holds
#: (reconciler.go), rendered, and the row once it was attached after all
K8S_MULTI = WAITS["kubernetes-volume-multi-attach"].sample + "\n"
K8S_ATTACHED = (
    "  Normal   SuccessfulAttachVolume  2s  attachdetach-controller  AttachVolume.Attach "
    'succeeded for volume "pvc-5f1c3a2e-8d4b-4c1e-9a7f-2b6d0e9c4f11"\n'
)


def test_a_volume_another_node_holds_for_minutes_is_a_wait_its_attach_ends(
    tmp_path: Path,
) -> None:
    """`(x14 over 9m)`: the pod waited nine minutes for a volume held elsewhere -- the console
    ending in it ended in its hang; a row without a count is one reconcile (a pod replaced,
    its node releasing the volume); the volume attached after all ends it."""
    assert [s["phase"] for s in statuses(K8S_MULTI)] == ["kubernetes_volume_attach"]
    assert stalled(tmp_path, K8S_MULTI)
    assert statuses(K8S_MULTI.replace("3m12s (x14 over 9m)", "4s")) == []
    assert stalled(tmp_path, K8S_MULTI + K8S_ATTACHED) == []


#: Ray Data's resource manager once an operator starved a minute (resource_manager.py),
#: rendered, and its progress bar going on once the cluster freed a GPU
RAY_STARVED = WAITS["ray-data-operator-starved"].sample + "\n"
RAY_DATA_ON = (
    "- MapBatches(vLLMEngineStageUDF): Tasks: 1; Actors: 1; Queued blocks: 3; Resources: "
    "1.0 CPU, 1.0 GPU; [all objects local]: 12%|#2        | 120/1000 [01:10<08:33, 1.71 row/s]\n"
)


def test_a_ray_data_operator_starved_a_minute_is_a_wait_its_progress_ends(
    tmp_path: Path,
) -> None:
    """The warning comes once the operator has starved a minute (written once an execution): a
    console that ends in it ended in its hang; the operator's progress after it ends it."""
    assert [(s["phase"], s["waited"]) for s in statuses(RAY_STARVED)] == [
        ("ray_resource_request", 60.0)
    ]
    assert stalled(tmp_path, RAY_STARVED)
    assert statuses(RAY_STARVED + RAY_DATA_ON)[-1]["phase"] == "exited"
    assert stalled(tmp_path, RAY_STARVED + RAY_DATA_ON) == []


#: c10d's client socket retrying a master nobody listens on (socket.cpp, at INFO each 30 s),
#: rendered, and its line once it connected
TORCH_NO_SOCKET = (
    "[I1130 08:{m:02d}:{s:02d}.512344061 socket.cpp:1005] [c10d] No socket on (10.0.0.1, 29500) "
    "is listening yet, will retry.\n"
)
TORCH_CONNECTED = (
    "[I1130 08:03:12.001002003 socket.cpp:1083] [c10d] The client socket has connected to "
    "[10.0.0.1]:29500 on SocketImpl(fd=41, addr=[10.0.0.2]:51734, remote=[10.0.0.1]:29500).\n"
)


def test_a_store_nobody_listens_on_for_a_minute_is_a_wait_its_connection_ends(
    tmp_path: Path,
) -> None:
    """One retry line is the master rank still starting (30 s at most); its repeats a minute
    apart show the rank waiting on a store nobody serves; the socket connecting ends it."""
    assert statuses(TORCH_NO_SOCKET.format(m=0, s=30)) == []
    lines = "".join(TORCH_NO_SOCKET.format(m=k // 2, s=30 * (k % 2)) for k in range(1, 6))
    assert {s["phase"] for s in statuses(lines)} == {"torch_store_connect"}
    assert stalled(tmp_path, lines)
    assert statuses(lines + TORCH_CONNECTED)[-1]["phase"] == "exited"
    assert stalled(tmp_path, lines + TORCH_CONNECTED) == []


# --- cluster schedulers' waits to place a job, read from their sources on 2026-12-01 (waits31):
# each with its control, the same wait followed by the line that says it ended, or too short

#: https://github.com/open-edge-platform/geti_v2/issues/532 (corpus27 dev): `kubectl get pods`
#: with the training pod Pending 16 hours, then the head of its `kubectl describe pod`
K8S_PODS = (
    "NAME                                     READY   STATUS    RESTARTS   AGE\n"
    + WAITS["kubernetes-pod-table-pending"].sample
    + "\n"
)
K8S_UNPLACED = (
    "\n"
    "Name:                ex-685ab5fbdee5d4889cdef111-n0-0-dn0-0\n"
    "Namespace:           impt-jobs-production\n"
    "Priority:            0\n"
    "Runtime Class Name:  nvidia\n"
    "Service Account:     impt-jobs\n"
    "Node:                <none>\n"
    "Labels:              domain=production\n"
    "                     execution-id=ex-685ab5fbdee5d4889cdef111\n"
)
#: printers.go's row, rendered: `-A -o wide` (NAMESPACE first; IP, NODE, ... after AGE)
K8S_WIDE = (
    "kubeflow    llm-rl-worker-1   0/1     {status}   0          {age}   <none>   <none>   "
    "<none>           <none>\n"
)


def test_a_pod_pending_past_the_autoscaler_s_provision_time_is_a_wait_the_console_ends_in(
    tmp_path: Path,
) -> None:
    """printPod's STATUS `Pending` is a pod no kubelet has taken (no node bound) and its AGE
    the whole of its wait: past cluster-autoscaler's default max-node-provision-time (15 min)
    a wait, and a console that ends in it -- or in the describe of that pod with no node --
    ended in its hang; SchedulingGated (a gate such as Kueue's) is the same wait."""
    assert [s["phase"] for s in statuses(K8S_PODS)] == ["kubernetes_pod_pending"]
    assert stalled(tmp_path, K8S_PODS)
    assert stalled(tmp_path, K8S_PODS + K8S_UNPLACED)
    for status, age in (("Pending", "3h12m"), ("SchedulingGated", "2d3h")):
        row = K8S_WIDE.format(status=status, age=age)
        assert [s["phase"] for s in statuses(row)] == ["kubernetes_pod_pending"], row


def test_a_pod_placed_after_all_or_pending_minutes_or_pulling_is_no_stall(tmp_path: Path) -> None:
    """Under 15 minutes a node the autoscaler adds may still come; ContainerCreating is the
    kubelet's default waiting reason while it pulls the image (a large one takes minutes): no
    wait. The pod placed -- `kubectl get pods -w` going on to ContainerCreating and Running,
    or its describe naming a node -- ends the wait."""
    assert statuses(K8S_WIDE.format(status="Pending", age="14m")) == []
    assert statuses(K8S_WIDE.format(status="ContainerCreating", age="40m")) == []
    watched = (
        "NAME              READY   STATUS    RESTARTS   AGE\n"
        "llm-rl-worker-1   0/1     Pending   0          20m\n"
        "llm-rl-worker-1   0/1     ContainerCreating   0          21m\n"
        "llm-rl-worker-1   1/1     Running             0          23m\n"
    )
    assert statuses(watched)[-1]["phase"] == "exited"
    assert stalled(tmp_path, watched) == []
    placed = K8S_UNPLACED.replace("<none>", "gpu-node-1/10.0.0.7")
    assert stalled(tmp_path, K8S_PODS + placed) == []


#: https://github.com/volcano-sh/volcano/issues/1094 (corpus27 dev): `kubectl describe pg`'s
#: events, the gang unschedulable 78789 times over 26 hours, then the pod's describe
VOLCANO_PG = (
    "Events:\n"
    "  Type     Reason         Age                    From     Message\n"
    "  ----     ------         ----                   ----     -------\n"
    "  " + WAITS["volcano-podgroup-unschedulable"].sample + "\n"
    "\n"
    "kubectl describe pod test-xxx\n"
    "Events:          <none>\n"
)
#: the scheduler cache's event once the gang fits (cache.go RecordJobStatusEvent), rendered
VOLCANO_READY = "  Normal   Scheduled      3s                     volcano  pod group is ready\n"


def test_a_volcano_gang_unschedulable_for_minutes_is_a_wait_its_scheduling_ends(
    tmp_path: Path,
) -> None:
    """The scheduler records its Unschedulable event each session (a second): `(x78789 over
    26h)` is a gang not placed for 26 hours, the pod's describe after it (kubectl's own lines)
    ends nothing; a series of seconds is a gang still being placed; `pod group is ready` ends
    it."""
    assert [s["phase"] for s in statuses(VOLCANO_PG)] == ["volcano_gang_pending"]
    assert stalled(tmp_path, VOLCANO_PG)
    assert statuses(VOLCANO_PG.replace("(x78789 over 26h)", "(x40 over 40s)")) == []
    ready = VOLCANO_PG.split("\n\n")[0] + "\n" + VOLCANO_READY
    assert statuses(ready)[-1]["phase"] == "exited"
    assert stalled(tmp_path, ready) == []


#: the job controller's PodGroupPending event on a Volcano Job (job_controller_actions.go), in
#: both wordings, rendered; and the job's pods running after all
VCJOB = "  " + WAITS["volcano-job-podgroup-pending"].sample + "\n"
VCJOB_OLD = VCJOB.replace("unschedulable, reason: ", "unschedule,reason: ")
VCJOB_RUNNING = "llm-rl-worker-0   1/1     Running   0          15m\n"


def test_a_volcano_job_s_podgroup_pending_for_minutes_is_a_wait_its_pods_running_end(
    tmp_path: Path,
) -> None:
    """`PodGroupPending ... (x25 over 14m)`: the job's gang not placed for 14 minutes (in the
    wording of v1.11 on and of v1.1-v1.10); its pods running ends the wait."""
    for row in (VCJOB, VCJOB_OLD):
        assert [s["phase"] for s in statuses(row)] == ["volcano_gang_pending"], row
        assert stalled(tmp_path, row)
    assert statuses(VCJOB.replace("(x25 over 14m)", "(x2 over 20s)")) == []
    assert statuses(VCJOB + VCJOB_RUNNING)[-1]["phase"] == "exited"
    assert stalled(tmp_path, VCJOB + VCJOB_RUNNING) == []


#: Kueue's Pending event on a Workload (scheduler.go requeueAndUpdate), rendered, and its
#: QuotaReserved event once admitted (recordQuotaReservationMetrics)
KUEUE = "  " + WAITS["kueue-workload-pending-flavors"].sample + "\n"
KUEUE_RESERVED = (
    "  Normal   QuotaReserved  2s  kueue-admission  Quota reserved in ClusterQueue cq-h100, "
    "wait time since queued was 2461s\n"
)


def test_a_kueue_workload_pending_for_minutes_is_a_wait_its_quota_reserved_ends(
    tmp_path: Path,
) -> None:
    """`Pending ... (x12 over 41m)  kueue-admission  couldn't assign flavors to pod set`: no
    quota for the job's pods for 41 minutes; a series of seconds is none; quota reserved ends
    it."""
    assert [s["phase"] for s in statuses(KUEUE)] == ["kueue_workload_pending"]
    assert stalled(tmp_path, KUEUE)
    assert statuses(KUEUE.replace("(x12 over 41m)", "(x2 over 30s)")) == []
    assert statuses(KUEUE + KUEUE_RESERVED)[-1]["phase"] == "exited"
    assert stalled(tmp_path, KUEUE + KUEUE_RESERVED) == []


#: https://github.com/ROCm/spur/issues/789 (corpus30 dev): SPUR's salloc giving up after its
#: 300 s timeout (crates/spur-cli/src/salloc.rs); and Slurm's own salloc lines at a wait's
#: first second (src/salloc/salloc.c, src/api/allocate.c), rendered
SPUR = (
    "salloc: Pending job allocation <job-id>...\n"
    "salloc: job <job-id> pending (Resources)\n"
    + WAITS["spur-salloc-timed-out-waiting-to-start"].sample
    + "\n"
)
SLURM_QUEUED = (
    "salloc: Pending job allocation 4242\nsalloc: job 4242 queued and waiting for resources\n"
)


def test_an_allocation_given_up_after_five_minutes_is_a_wait_a_granted_one_ends(
    tmp_path: Path,
) -> None:
    """SPUR's salloc says it waited its 300 s for nodes and gave up: a console ending there
    ended in that wait; the next allocation granted ends it. Slurm's `Pending job allocation`
    and `queued and waiting for resources` are written once, at the first second: no wait."""
    assert [(s["phase"], s["waited"]) for s in statuses(SPUR)] == [
        ("slurm_allocation_pending", 0.0)
    ]
    assert stalled(tmp_path, SPUR)
    granted = SPUR + "salloc: Pending job allocation 4243...\nsalloc: Granted job allocation 4243\n"
    assert statuses(granted)[-1]["phase"] == "exited"
    assert stalled(tmp_path, granted) == []
    assert statuses(SLURM_QUEUED) == []
    assert stalled(tmp_path, SLURM_QUEUED) == []


#: https://github.com/neuro-inc/apolo-cli/issues/864 (corpus27 dev): the CLI's progress while the
#: job waits to start (formatters/jobs.py), and its line once the job runs, rendered
NEURO = WAITS["neuro-apolo-cli-job-pending-resources"].sample + "\n"
NEURO_RUNNING = "√ Status: running\n"


def test_a_platform_job_pending_past_its_timeouts_is_a_wait_its_running_ends(
    tmp_path: Path,
) -> None:
    """`Status: pending <a scheduling reason> [2884.0 sec]`: the job has waited 48 minutes for
    a node, past the platform's scale-up and schedule timeouts (20 min together); a pending
    image pull, or a wait of minutes, is none; the job running ends it."""
    assert [s["phase"] for s in statuses(NEURO)] == ["platform_job_pending"]
    assert stalled(tmp_path, NEURO)
    assert statuses("Status: pending Pulling ◣ [2884.0 sec]\n") == []
    assert statuses("Status: pending Scheduling ◢ [120.0 sec]\n") == []
    assert statuses(NEURO + NEURO_RUNNING)[-1]["phase"] == "exited"
    assert stalled(tmp_path, NEURO + NEURO_RUNNING) == []


def prime_rl_health(seconds: range) -> str:
    """PRIME-RL's orchestrator waiting for its inference server (src/prime_rl/utils/client.py
    `check_health`), a warning each 10 s of the wait from 09:00:12, in loguru's plain format."""
    return "".join(
        f"09:{(12 + s) // 60:02d}:{(12 + s) % 60:02d} WARNING Inference server was not reached "
        f"after {s} seconds (Error: All connection attempts failed) on http://localhost:8000/v1\n"
        for s in seconds
    )


PRIME_RL_WAITING = "09:00:12    INFO Waiting for policy inference pool to be ready\n"
PRIME_RL_READY = "09:01:47 SUCCESS Policy inference pool ready\n"


def test_prime_rl_s_inference_server_not_reached_past_vllm_s_start_up_budget_is_a_wait(
    tmp_path: Path,
) -> None:
    """The orchestrator starts with its vLLM server and polls /health: a healthy start warns
    while the model loads (95 s in tests/fixtures/consoles/prime_rl/orchestrator.log) and its
    `Policy inference pool ready` ends it -- no wait; ten minutes of warnings (vLLM's own
    start-up budget, VLLM_ENGINE_READY_TIMEOUT_S) that the console ends in are its hang. The
    older wording ('Inference pool was not reached ...', 2025-07 to 2025-10) is the same."""
    healthy = PRIME_RL_WAITING + prime_rl_health(range(10, 100, 10)) + PRIME_RL_READY
    assert statuses(healthy) == []
    assert stalled(tmp_path, healthy) == []
    slow = PRIME_RL_WAITING + prime_rl_health(range(10, 500, 10))
    assert statuses(slow) == []
    hung = PRIME_RL_WAITING + prime_rl_health(range(10, 610, 10))
    assert [s["phase"] for s in statuses(hung)][-1] == "prime_rl_inference_server"
    assert stalled(tmp_path, hung)
    older = hung.replace("Inference server was", "Inference pool was").replace(
        " on http://localhost:8000/v1", ""
    )
    assert [s["phase"] for s in statuses(older)][-1] == "prime_rl_inference_server"
    env = (  # (the environment servers' copy of 2026-02, orchestrator/vf_utils.py)
        "09:10:12 WARNING Environment server at tcp://10.0.0.5:5000 was not reached after 600 "
        "seconds (Error: timed out)\n"
    )
    assert [s["phase"] for s in statuses(env)] == ["prime_rl_inference_server"]


def nemo_rl_fill(sizes: list[int]) -> str:
    """NeMo-RL's async GRPO driver waiting for the replay buffer (nemo_rl/algorithms/grpo.py
    `async_grpo_train`), one line a second, the buffer's size each iteration."""
    return "⏳ Waiting for replay buffer to have sufficient trajectories for step 0...\n" + "".join(
        f"  Wait iteration {i}: buffer_size={b}, step 0 ready={b >= 64}\n"
        for i, b in enumerate(sizes)
    )


def test_nemo_rl_s_replay_buffer_empty_for_half_an_hour_is_a_wait_a_group_ends(
    tmp_path: Path,
) -> None:
    """`Wait iteration N: buffer_size=0, ...`: N seconds at least with no trajectory group
    from the collector. Minutes of it are a healthy start's first generation; 1800 s (twice the
    async generation's own timeout) that the console ends in are the collector's hang. A
    buffer that grows is progress: its lines are no part of the wait, and the wait before
    them ended."""
    healthy = nemo_rl_fill([0] * 600 + [16] * 30 + [48] * 30 + [64])
    healthy += "✅ Buffer ready for step 0! Starting training loop...\n"
    assert stalled(tmp_path, healthy) == []
    assert DECLARED.match("  Wait iteration 1900: buffer_size=16, step 0 ready=False") is None
    hung = nemo_rl_fill([0] * 1801)
    assert {s["phase"] for s in statuses(hung)} == {"nemo_rl_replay_buffer"}
    assert stalled(tmp_path, hung)
    grew = nemo_rl_fill([0] * 1801 + [16])
    assert statuses(grew)[-1]["phase"] == "exited"


def slime_abort(attempts: int, clock: int = 0) -> str:
    """slime's rollout aborting an SGLang engine's requests until it is idle
    (slime/backends/sglang_utils/server_control.py `abort_server_until_idle`), every 3 s."""
    out = []
    for k in range(1, attempts + 1):
        t = clock + 3 * (k - 1)
        at = f"(RolloutManager pid=4021) [2026-11-30 08:{t // 60:02d}:{t % 60:02d}]"
        url = "http://10.0.0.3:30000"
        out.append(f"{at} server_control.py:46 - Abort request for SGLang server {url}\n")
        out.append(
            f"{at} server_control.py:58 - SGLang server {url} still has 7 requests after "
            f"abort attempt {k}; retrying in 3 seconds.\n"
        )
    return "".join(out)


def test_slime_s_engine_kept_its_requests_through_a_minute_of_aborts_is_a_wait(
    tmp_path: Path,
) -> None:
    """An engine answers an abort at its next step: one retry, then the rollout goes on, is
    none; a minute of retries (the next attempt's `Abort request` line between them ends
    nothing) that the console ends in is the engine's hang."""
    went_on = slime_abort(2) + "(RolloutManager pid=4021) [2026-11-30 08:00:09] rollout done\n"
    assert statuses(went_on) == []
    assert stalled(tmp_path, went_on) == []
    hung = slime_abort(40)
    assert {s["phase"] for s in statuses(hung)} == {"slime_sglang_abort"}
    assert stalled(tmp_path, hung)


def realhf_connect(timeouts: int) -> str:
    """AReaL 0.x's controller connecting to its workers (realhf/system/controller.py), a
    timeout each CONNECTION_RETRY_AFTER_SECONDS (360 s), in realhf's log format."""
    out = []
    for k in range(timeouts + 1):
        minute = 6 * k
        at = f"20250601-{10 + minute // 60:02d}:{minute % 60:02d}:00.418 controller INFO:"
        if k:
            out.append(f"{at} Connecting to workers timeout. Retrying...\n")
        out.append(f"{at} Connecting to workers...\n")
    return "".join(out)


def test_areal_s_controller_retrying_its_workers_twice_is_a_wait_they_connecting_end(
    tmp_path: Path,
) -> None:
    """One timeout is a start whose workers took more than six minutes; two (twelve minutes,
    its `Connecting to workers...` between them ending nothing) that the console ends in are
    workers that never registered. The controller going on after them ends it."""
    assert statuses(realhf_connect(1)) == []
    assert stalled(tmp_path, realhf_connect(1)) == []
    hung = realhf_connect(3)
    assert {s["phase"] for s in statuses(hung)} == {"areal_workers_connect"}
    assert stalled(tmp_path, hung)
    went_on = hung + "20250601-10:19:02.007 master_worker/0 INFO: Master worker starts.\n"
    assert statuses(went_on)[-1]["phase"] == "exited"

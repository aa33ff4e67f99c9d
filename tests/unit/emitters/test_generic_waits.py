"""Waits by a console's grammar (`runwatch.emitters.stalls`, `Waits._generic_wait`): a line
that says something waits (or retries, is not yet ready, is taking more than a while), which
the console shows lasting a minute -- by the wait it states and the clock of its lines -- is
its process's wait when no framework's reader knows it; the next line that is no wait ends
it, so only a console that ends in it hung there. A wait of seconds is no stall.

Lines marked with a URL are as users posted them there. The rest are wordings written for
these tests, of no framework: what is tested is the grammar, not a framework's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import rank_statuses as statuses
from helpers import stalled

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.stalls import Waits

#: https://github.com/vllm-project/vllm/issues/14025 (vLLM V0's OpenAI server at DEBUG: the
#: API server's client has had no output from its engine process, every ten seconds)
MQ = "DEBUG 02-27 20:{m:02d}:{s:02d} client.py:192] Waiting for output from MQLLMEngine.\n"
#: vLLM V1's stats line (loggers.py): `Waiting` is a count there, no wait
STATS = (
    "INFO 02-27 20:21:{s:02d} [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 35.2 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 0.1%, Prefix cache hit rate: 0.0%\n"
)


#: vLLM V0's stats line (vllm/engine/metrics.py LoggingStatLogger.log, its format rendered):
#: the engine serves a request
SERVING = (
    "INFO 02-27 20:17:40 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 12.5 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache "
    "usage: 0.4%, CPU KV cache usage: 0.0%.\n"
)


#: vLLM V0's engine process, idle (vllm/engine/multiprocessing/engine.py `run_engine_loop`, at
#: DEBUG each POLLING_TIMEOUT_MS, 10 s, it has no request; its format rendered)
IDLE = "DEBUG 02-27 20:{m:02d}:{s:02d} engine.py:190] Waiting for new requests in engine loop.\n"


def mq(count: int) -> str:
    """`count` of #14025's lines, ten seconds apart from 20:17:48."""
    return "".join(MQ.format(m=17 + (48 + 10 * k) // 60, s=(48 + 10 * k) % 60)
                   for k in range(count))  # fmt: skip


#: https://github.com/PaddlePaddle/PaddleSeg/issues/2766 (Paddle's TCP store: a trainer
#: retries to reach the server for six minutes)
PADDLE = (
    "I1127 19:16:12.605310 3907468 tcp_utils.cc:181] The server starts to listen on IP_ANY:51920\n"
    "I1127 19:18:22.167176 3907468 tcp_utils.cc:107] Retry to connect to 0.1.68.146:51920 while "
    "the server is not yet listening.\n"
    "I1127 19:20:35.287211 3907468 tcp_utils.cc:107] Retry to connect to 0.1.68.146:51920 while "
    "the server is not yet listening.\n"
    "I1127 19:22:48.411125 3907468 tcp_utils.cc:107] Retry to connect to 0.1.68.146:51920 while "
    "the server is not yet listening.\n"
)
#: https://github.com/ray-project/kuberay/issues/3151 (Ray Serve's controller: a replica not
#: scheduled for more than 30 s, said again 30 s later)
SERVE = (
    "WARNING 2025-03-04 01:{t} controller 306 -- Deployment 'demoRetrievalVoyagerIndexService"
    "Handler' in application 'demo_recsys_retrieval_voyager_index_service' has 1 replicas that "
    "have taken more than 30s to be scheduled. This may be due to waiting for the cluster to "
    "auto-scale or for a runtime environment to be installed.\n"
)
#: https://github.com/jax-ml/jax/issues/19971 (a warning, and the line Python's warnings show
#: under it)
JAX = (
    "/home/alberta/.local/lib/python3.10/site-packages/jax/_src/xla_bridge.py:146: UserWarning: "
    "TPU backend initialization is taking more than 60.0 seconds. Did you run your code on all "
    "TPU hosts? See https://jax.readthedocs.io/en/latest/multi_process.html for more "
    "information.\n"
    "  warnings.warn(\n"
)
#: https://github.com/huggingface/transformers/issues/10282 (NCCL's connect retried, no clock)
NCCL = "stdout: multi-gpu-ci-runner:18062:18089 [1] NCCL INFO Call to connect returned Connection refused, retrying\n"  # noqa: E501


def test_a_wait_said_again_and_again_for_minutes_at_the_console_s_end_is_its_hang(
    tmp_path: Path,
) -> None:
    """#14025's client polls its engine for 160 s by its clock while the engine serves a
    request, or says nothing: the server waited there, and the rule names the wait in the
    line's own words. Its first six lines, 50 s, are no stall yet; and with the engine saying
    between them that it has no request (its idle loop's line, at the same level and period)
    the same poll is an idle server's (vLLM V0 logs it whenever no output arrives)."""
    (summary,) = stalled(tmp_path, SERVING + mq(17))
    assert "Waiting for output from MQLLMEngine" in summary
    assert statuses(SERVING + mq(6)) == []
    assert statuses(SERVING + mq(7))[0] == {
        "rank": 0, "world_size": 1, "phase": "Waiting for output from MQLLMEngine", "waited": 60.0
    }  # fmt: skip
    (summary,) = stalled(tmp_path, mq(17))
    assert "Waiting for output from MQLLMEngine" in summary
    idle = "".join(IDLE.format(m=17, s=50) + line for line in mq(17).splitlines(keepends=True))
    assert statuses(idle) == []
    assert stalled(tmp_path, idle) == []


def test_retries_for_minutes_are_a_wait_and_for_seconds_are_none(tmp_path: Path) -> None:
    """Paddle's trainer retrying for four and a half minutes hung; a retry said twice within
    seconds, or a server starting, is a pause."""
    status = statuses(PADDLE)[-1]
    assert status["phase"] == "Retry to connect to while the server is not yet listening"
    assert status["waited"] == 266.0
    assert stalled(tmp_path, PADDLE)
    quick = PADDLE.replace("19:20:35", "19:18:25").replace("19:22:48", "19:18:28")
    assert statuses(quick) == []


def test_what_a_wait_states_adds_to_the_time_its_lines_span() -> None:
    """Ray Serve's warning says more than 30 s; said again 30 s later, the console shows a
    minute. (Serve writes it only for replicas still unplaced after 30 s: the catalogue
    declares it from its first line, `waits.toml`.)"""
    assert [s["waited"] for s in statuses(SERVE.format(t="04:33,560"))] == [30.0]
    statuses_of_two = statuses(SERVE.format(t="04:33,560") + SERVE.format(t="05:03,580"))
    assert [s["waited"] for s in statuses_of_two] == [30.0, 60.0]
    assert statuses_of_two[-1]["phase"] == "ray_serve_replica_scheduling"


def test_a_wait_line_that_says_it_lasted_a_minute_is_a_wait(tmp_path: Path) -> None:
    """One line that states a minute or more of waiting is enough, in any unit; less is a
    pause. The code Python's warnings print under a warning does not end it."""
    (found,) = statuses(JAX)
    assert (found["phase"], found["waited"]) == (
        "TPU backend initialization is taking more than",
        60.0,
    )
    assert stalled(tmp_path, JAX)
    line = "[rank3]: trainer still waiting for the rollout workers for {n}\n"
    (found,) = statuses(line.format(n="120 seconds"))
    assert (found["rank"], found["waited"]) == (3, 120.0)
    assert statuses(line.format(n="2 minutes"))[0]["waited"] == 120.0
    assert statuses(line.format(n="90000 ms"))[0]["waited"] == 90.0
    assert statuses(line.format(n="30 seconds")) == []


def test_a_wait_its_lines_give_no_clock_for_is_one_said_five_times() -> None:
    assert statuses(NCCL * 4) == []
    (status,) = statuses(NCCL * 5)
    assert status["rank"] == 0


#: https://github.com/THUDM/slime/pull/683 (slime's rollout retrying a router with no worker
#: left, as a reviewer posted it: its last attempt, the 59 before it not pasted)
SLIME = (
    "(RolloutManager pid=519445) For more information check: https://developer.mozilla.org/"
    "en-US/docs/Web/HTTP/Status/503, retrying... (attempt {k}/60, url=http://10.78.210.151:4674"
    "/generate, response=No available workers (all circuits open or unhealthy))\n"
)


def test_a_retry_s_count_of_its_attempts_stands_for_the_lines_before_it(tmp_path: Path) -> None:
    """The k-th attempt's line is a wait said k times, whether or not the paste kept the
    lines before it: attempt 60 at the console's end is its hang, attempt 4 a pause (as four
    lines of it would be); the count rising from line to line is the same wait, not a new one
    each time; the console going on after it ended it."""
    (summary,) = stalled(tmp_path, SLIME.format(k=60))
    assert "retrying" in summary
    assert statuses(SLIME.format(k=60))[0]["rank"] == 0
    assert statuses(SLIME.format(k=4)) == []
    assert statuses(SLIME.format(k=3) + SLIME.format(k=4)) == []
    assert statuses("".join(SLIME.format(k=k) for k in (1, 2, 3, 4, 5)))
    assert stalled(tmp_path, SLIME.format(k=60) + "step 12: loss 0.5 reward 0.7\n") == []
    # a clock on its lines does not change what the count says (the first line read alone
    # shows no span; the next, two seconds later, the wait going on)
    clocked = "2025-11-08 10:07:{s:02d} " + SLIME
    assert statuses(clocked.format(s=9, k=60))
    both = statuses(clocked.format(s=9, k=59) + clocked.format(s=11, k=60))
    assert [s.get("waited") for s in both] == [0.0, 2.0]


#: https://github.com/PaddlePaddle/Paddle/issues/29847 (paddle.distributed.launch on CUDA 11:
#: a trainer's loop prints the endpoints it still waits on, then that it retries)
PADDLE_LOOP = "not ready endpoints:['127.0.0.1:60001']\nserver not ready, wait 3 sec to retry...\n"


def test_a_loop_s_other_line_said_again_word_for_word_goes_on_the_wait() -> None:
    """A retry loop that prints two lines each turn: its other line, the same words as before
    the wait's line before, is the loop's, not work that went on -- five turns without a clock
    are a wait, four are not; a line that changed (a step, another endpoint) ends it."""
    assert statuses(PADDLE_LOOP * 4) == []
    (status,) = statuses(PADDLE_LOOP * 5)
    assert status["rank"] == 0
    moved = PADDLE_LOOP * 3 + "not ready endpoints:['127.0.0.1:60002']\n" + PADDLE_LOOP * 2
    assert statuses(moved) == []
    assert statuses(PADDLE_LOOP * 3 + "step 12: loss 0.5\n" + PADDLE_LOOP * 2) == []
    # `runwatch watch`'s scanner, which shows the readers the loop's first line only as the
    # line before a marked one, reads the same
    for turns, waits in ((4, 0), (5, 1)):
        scanner = LineScanner(LineParser())
        found = scanner.feed((PADDLE_LOOP * turns).encode()) + scanner.finish()
        assert len([f for k, f in found if k == "rank.status"]) == waits


def test_a_wait_the_console_goes_on_after_is_no_hang(tmp_path: Path) -> None:
    """The same lines with the engine's stats after them: the console went on, and the
    stats line's `Waiting: 0 reqs` is a count, not a wait."""
    text = SERVING + mq(17) + STATS.format(s=0)
    assert stalled(tmp_path, text) == []
    assert statuses(text)[-1] == {"rank": 0, "world_size": 1, "phase": "exited"}
    assert statuses(STATS.format(s=0) * 5) == []


def test_timeouts_idle_servers_and_code_are_no_waits() -> None:
    """A timeout or a failure is the collectives' and the catalogue's to read; a server idle
    for its next request, a traceback's frame in `wait` are no stall."""
    lines = [
        "worker 2 timed out after waiting for 600 seconds",
        "Server idle, waiting for new requests (300 seconds so far)",
        '  File "/usr/lib/python3.10/threading.py", line 324, in wait',
        "    self.not_empty.wait(remaining)",
        "ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress",
        "Failed to connect; the worker may not be ready (still scheduling) after 600 seconds",
    ]
    for line in lines:
        assert statuses(f"{line}\n" * 6) == [], line


def test_watch_s_scanner_reads_the_waits_and_the_line_that_ends_them() -> None:
    """`runwatch watch` reads only lines with a marker -- and, while such a wait is open, the
    line after it, whatever it holds: a plain line ends the wait, as diagnose reads it."""
    parser = LineParser()
    scanner = LineScanner(parser)
    waiting = scanner.feed((SERVING + mq(7)).encode())
    assert [f["phase"] for k, f in waiting if k == "rank.status"] == [
        "Waiting for output from MQLLMEngine"]  # fmt: skip
    went_on = scanner.feed(b"saving checkpoint to /ckpt\n")
    assert [f["phase"] for k, f in went_on if k == "rank.status"] == ["exited"]
    assert not parser.following


def test_a_number_that_changes_between_wait_lines_is_a_new_wait() -> None:
    """PRIME-RL's orchestrator waits for each step's checkpoint (tests/fixtures/consoles/
    field/rendered_prime_rl_paused.log): checkpoint 12, then 13 minutes later, is progress;
    the same address retried (Paddle's) is one wait."""
    paused = "09:{t} INFO Orchestrator paused: waiting for trainer to broadcast checkpoint {n}.\n"
    text = "".join(
        paused.format(t=t, n=n) for t, n in (("12:00", 12), ("14:41", 13), ("17:20", 14))
    )
    assert statuses(text) == []
    assert statuses(text.replace(" 13.", " 12.").replace(" 14.", " 12."))


#: Ray Tune's and Ray Train's own words when nothing could start for a minute (ray 2.60.0 wheel,
#: ray/tune/execution/insufficient_resources_manager.py: MSG_TUNE_START, MSG_TRAIN_START after
#: "Ignore this message if the cluster is autoscaling. ", rendered at their default 60 s)
TUNE = (
    "2024-03-01 10:00:00,000\tWARNING insufficient_resources_manager.py:163 -- Ignore this message "
    "if the cluster is autoscaling. No trial is running and no new trial has been started within "
    "the last 60 seconds. This could be due to the cluster not having enough resources available. "
    "Stop the tuning and adjust the required resources (e.g. via the `ScalingConfig` or "
    "`resources_per_trial`, or `num_workers` for rllib), or add more resources to your cluster.\n"
)
TRAIN = (
    "2024-03-01 10:00:00,000\tWARNING insufficient_resources_manager.py:163 -- Ignore this message "
    "if the cluster is autoscaling. Training has not started in the last 60 seconds. This could "
    "be due to the cluster not having enough resources available.\n"
)


def test_nothing_started_in_the_last_minute_is_a_wait(tmp_path: Path) -> None:
    """Ray Tune and Ray Train say themselves that no trial could start for a minute: a wait
    that lasted that long, and a hang where the console ends in it."""
    (tune,) = statuses(TUNE)
    assert (tune["phase"], tune["waited"]) == (
        "No trial is running and no new trial has been started", 60.0)  # fmt: skip
    (train,) = statuses(TRAIN)
    assert (train["phase"], train["waited"]) == ("Training has not started", 60.0)
    assert stalled(tmp_path, TRAIN)


def test_a_prefixed_rank_s_wait_ends_with_its_next_line_and_every_rank_leaves_it() -> None:
    """torchrun's `[rank3]: ` prefix leaves its space before the text: no indentation. The
    wait of rank 3 of four ends with the rank's next plain line, and every rank is out of a
    wait then (the rule's "nothing is waiting"), not three never heard from."""
    waiting = "[rank3]: still waiting for the rollout workers for 120 seconds\n"
    found = statuses(waiting + "[rank3]: rollout workers connected\n")
    assert found[0]["rank"] == 3
    assert found[1:] == [{"rank": r, "world_size": 4, "phase": "exited"} for r in range(4)]


def test_lines_a_little_out_of_order_are_no_day_long_wait() -> None:
    """Two processes sharing one stream print the same wait a second apart, the later one
    first: the clock going back is no wait past midnight."""
    line = "INFO 03-01 10:00:{s:02d} t.py:1] waiting for rollout workers\n"
    assert statuses(line.format(s=5) + line.format(s=4)) == []
    late = "INFO 03-01 00:00:40 t.py:1] waiting for rollout workers\n"
    (status,) = statuses(line.replace("10:00:{s:02d}", "23:59:30") + late)
    assert status["waited"] == 70.0  # past midnight: 70 s


def test_a_wait_a_line_plans_is_none_it_lasted() -> None:
    for line in (
        "uploader: rate limited, waiting for 600 seconds before the next attempt",
        "the trainer will wait for 120 seconds for the rollout workers",
        "going to wait for 300 s until the checkpoint is written",
    ):
        assert statuses(line + "\n") == [], line


def test_python_logging_s_format_builds_up_a_wait_and_keeps_one_per_rank() -> None:
    """`%(asctime)s - %(name)s - %(levelname)s - %(message)s`: the clock and ` - ` are no
    words of the wait, so its lines are one wait; a wait whose number changes every line is
    a new one each time, and the reader keeps one per rank, not one per line."""
    line = "2024-03-01 10:{m:02d}:00,{ms:03d} - trainer - INFO - waiting for rollout workers\n"
    text = "".join(line.format(m=m, ms=m * 7) for m in range(3))
    assert statuses(text)[-1]["waited"] == 120.0
    waits = Waits()
    for k in range(3000):
        waits.read(f"2024-03-01 10:00:00,000 - trainer - INFO - waiting for batch {k}")
    assert len(waits._said) == 1


#: https://github.com/ray-project/xgboost_ray/issues/79 (corpus24 dev: 900 actors asked of 800
#: CPUs, the run hangs; the poster elided the rest with `...`)
XGB_79 = (
    "2021-04-08 07:15:10,182 INFO main.py:849 -- Waiting until actors are ready (30 seconds "
    "passed).\n"
    "2021-04-08 07:15:40,186 INFO main.py:849 -- Waiting until actors are ready (60 seconds "
    "passed).\n"
    "2021-04-08 07:16:10,228 INFO main.py:849 -- Waiting until actors are ready (90 seconds "
    "passed).\n"
)


def test_a_paste_s_mark_for_lines_left_out_ends_no_wait(tmp_path: Path) -> None:
    """`...` alone on a line is the poster's: more of the same was left out -- no line of the
    console, so the wait it follows goes on to the console's end."""
    for mark in ("...", "…", "[...]"):
        assert stalled(tmp_path, XGB_79 + mark + "\n"), mark
    assert stalled(tmp_path, XGB_79 + "... and then it trained\n") == []


def test_a_paste_s_fence_ends_no_wait(tmp_path: Path) -> None:
    """A markdown fence alone on a line (```` ``` ````, ```` ```text ````, `~~~`) is the paste's
    block opening or closing, no line of the console: the wait before a closing fence goes on
    to the console's end (corpus27's srun retries, pasted between fences, ended in one)."""
    for fence in ("```", "```text", "~~~", "  ```"):
        assert stalled(tmp_path, XGB_79 + fence + "\n"), fence
    assert stalled(tmp_path, XGB_79 + "```python -m train\n") == []


def test_a_wait_that_says_the_time_elapsed_shows_it_lasting() -> None:
    """`(elapsed: 120s)`, `90 s elapsed`, `so far`: the time the wait went on, wherever the
    line says it -- a retry's too (unlike `retrying in 5 s`, its next attempt)."""
    line = "[rank1]: still waiting for the rollout workers to register (elapsed: {n})\n"
    (found,) = statuses(line.format(n="120s"))
    assert (found["rank"], found["waited"]) == (1, 120.0)
    assert statuses(line.format(n="30s")) == []
    (found,) = statuses("retrying the connection to the master, 90 s elapsed\n")
    assert found["waited"] == 90.0
    assert statuses("retrying the connection to the master in 90 s\n") == []


#: what launchers and collectors write before each line (prefixes.py): kubectl's
#: `--timestamps` (RFC3339Nano), a launcher's `[date time] `, Open MPI's `--timestamp-output`
#: with `--tag-output`, and the collector's time outside Ray's prefix of the line's worker
LEADS = {
    "kubectl": "2025-02-27T{t}.123456789Z ",
    "launcher": "[2025-02-27 {t}] ",
    "mpi": "Thu Feb 27 {t} 2025[1,0]<stdout>:",
    "kubectl-ray": "2025-02-27T{t}.123456789Z (APIServer pid=1) ",
}


@pytest.mark.parametrize("lead", sorted(LEADS))
def test_a_wait_s_clock_in_its_prefix_decides_as_the_line_s_own(lead: str) -> None:
    """#14025's poll, its time written by the collector or launcher before the message rather
    than by vLLM's logger in it (a program that prints no time of its own): the same wait,
    decided the same -- six lines, 50 s, no stall (not five lines without a clock); seven, a
    minute shown."""

    def under(count: int) -> str:
        out = []
        for line in mq(count).splitlines():
            clock, message = line[len("DEBUG 02-27 ") :].split(" client.py:192] ")
            out.append(LEADS[lead].format(t=clock) + message + "\n")
        return "".join(out)

    def waits(text: str) -> list[dict[str, object]]:
        return [{k: v for k, v in s.items() if k != "src"} for s in statuses(text)]  # (Ray's)

    assert waits(under(6)) == waits(mq(6)) == []
    assert waits(under(7)) == waits(mq(7))
    assert waits(under(7))[0]["waited"] == 60.0


def test_a_duration_past_a_day_is_no_line_s_clock() -> None:
    """tqdm's `[elapsed<remaining` bracket before a wait's words: `36:34:36` is 36 hours of a
    bar, no time of day -- two such lines show no wait lasting 70 s; a clock below 24 hours
    stands (the wait's two lines, 70 s apart)."""
    line = "[{t}<00:10] waiting for the reward server to start\n"
    assert statuses(line.format(t="36:34:36") + line.format(t="36:35:46")) == []
    (status,) = statuses(line.format(t="12:34:36") + line.format(t="12:35:46"))
    assert status["waited"] == 70.0

"""A console that ends inside a loop (`runwatch.emitters.loops`, `hangs.looped`): its last
lines the same lines over and over, numbers aside, shown lasting a minute, with no value
changing between them, is hung whatever words the loop uses -- and a healthy loop (an idle
engine's stats, a server answering, a countdown, a training loop's lines, a warning at work's
own pace) is none. `runwatch diagnose` and `runwatch watch` decide it on the same last lines.

Lines marked with a URL are as users posted them there (some dated for the test, said so);
the rest are formats rendered from a framework's source, said so."""

from __future__ import annotations

from pathlib import Path

from helpers import stalled

from runwatch.emitters.console import LineParser
from runwatch.emitters.hangs import looped
from runwatch.emitters.loops import Tail, loop_at_end, shape

#: https://github.com/pytorch/pytorch/issues/131781 (torch's TCPStore client failing to reach
#: its store; glog's clock), here said every 10 s as the client retries, from 04:55:17
C10D = (
    "[W801 04:{m:02d}:{s:02d}.113400444 socket.cpp:697] [c10d] The client socket has failed to "
    "connect to [lccn01]:56183 (errno: 22 - Invalid argument).\n"
)
#: https://github.com/ray-project/ray/issues/1734 ("this endless loop in the console": Ray's
#: raylet finding no node for each task of an actor asking for a GPU; no clock)
INFEASIBLE = (
    "Infeasible task. No nodes satisfy hard constraints for task = 94a4306a4e54cd71115be891fffbf4c28bf9999c\n"  # noqa: E501
    "Infeasible task. No nodes satisfy hard constraints for task = 0688623fc883ec4f74fc1dfc759f8f217b555277\n"  # noqa: E501
    "Infeasible task. No nodes satisfy hard constraints for task = 919528e63a0a55d740c06477fb58baa1fd9278fb\n"  # noqa: E501
    "Infeasible task. No nodes satisfy hard constraints for task = f7f91c5e1c92278ae517928286fe7fd089461bbb\n"  # noqa: E501
)
#: tests/fixtures/consoles/corpus3/dev/healthy_espnet2_batch_report_grad_nan_skips_ctc.log
#: (espnet#4095: a healthy run's warnings as batches go wrong, at work's own pace)
ESPNET = [
    "[7cc1303a881b:0/8] 2022-02-21 11:42:05,031 (trainer:617) WARNING: The grad norm is nan. Skipping updating the model.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:44:13,348 (trainer:617) WARNING: The grad norm is nan. Skipping updating the model.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:44:54,398 (ctc:74) WARNING: 1/2 samples got nan grad. These were ignored for CTC loss.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:45:47,820 (trainer:617) WARNING: The grad norm is nan. Skipping updating the model.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:46:53,100 (trainer:617) WARNING: The grad norm is nan. Skipping updating the model.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:47:18,511 (ctc:74) WARNING: 1/2 samples got nan grad. These were ignored for CTC loss.",  # noqa: E501
    "[7cc1303a881b:0/8] 2022-02-21 11:51:51,166 (trainer:617) WARNING: The grad norm is nan. Skipping updating the model.",  # noqa: E501
]
#: uvicorn's access log (uvicorn/logging.py AccessFormatter, `%(client_addr)s -
#: "%(request_line)s" %(status_code)s`, as vLLM's API server prints it), dated for the test
HEALTH = (
    '2025-05-01 10:{m:02d}:{s:02d} INFO:     127.0.0.1:{port} - "GET /health HTTP/1.1" 200 OK\n'
)


def c10d(count: int) -> str:
    return "".join(C10D.format(m=55 + (17 + 10 * k) // 60, s=(17 + 10 * k) % 60)
                   for k in range(count))  # fmt: skip


def test_a_retry_loop_the_console_ends_in_for_minutes_is_its_hang(tmp_path: Path) -> None:
    """torch's client failing to connect, again and again for two minutes by glog's clock,
    ends the console: hung there, in words no framework reader knows. For 50 s it is a
    pause; and the console going on after it (a step) ended it."""
    loop = loop_at_end(c10d(13).splitlines())
    assert loop is not None
    assert loop.waited == 120.0
    assert loop.period == 1
    assert "failed to connect" in loop.phase
    (summary,) = stalled(tmp_path, c10d(13))
    assert "failed to connect" in summary
    assert loop_at_end(c10d(6).splitlines()) is None
    assert loop_at_end((c10d(13) + "step 12 done\n").splitlines()) is None


def test_a_loop_with_no_clock_is_one_said_five_times_in_words_of_a_wait() -> None:
    """Ray's raylet's endless `Infeasible task` loop prints no clock: said five times (its
    ids aside, no value changed) it is a loop; four times, not yet."""
    assert loop_at_end(INFEASIBLE.splitlines()) is None
    loop = loop_at_end((INFEASIBLE + INFEASIBLE.splitlines(keepends=True)[0]).splitlines())
    assert loop is not None
    assert loop.phase.startswith("loop: Infeasible task")


def test_a_changed_value_is_progress_and_ids_clocks_and_attempts_are_not() -> None:
    shapes = [shape(line) for line in INFEASIBLE.splitlines()]
    assert len({s.words for s in shapes}) == 1
    assert all(s.values == () for s in shapes)
    retry = shape("[rank3]: 10:00:05 connect to 10.0.0.2:29500 failed (retry 5/288), next in 5s")
    assert (retry.attempts, retry.durations, retry.rank, retry.values) == ((5,), (5.0,), 3, ())
    assert retry.clock == 36005.0
    steps = [f"10:{m:02d}:00 epoch 1 iter {m} loss {0.5 - m / 100:.2f}" for m in range(10)]
    assert loop_at_end(steps) is None  # (the iteration and the loss move on)


def test_a_loop_in_words_of_no_wait_is_one_on_a_timer_only() -> None:
    """espnet's warnings come at the pace batches go wrong (2 min, 41 s, 53 s, ...): a healthy
    run's, no loop. The same lines every minute, on a timer, for four cycles and more are."""
    assert loop_at_end(ESPNET) is None
    timed = [line.replace(line[30:38], f"11:{40 + k:02d}:05")
             for k, line in enumerate(ESPNET[:3] * 5)]  # fmt: skip
    loop = loop_at_end(timed)
    assert loop is not None
    assert loop.period == 3
    assert round(loop.waited) == 840
    assert loop_at_end(timed[:9]) is None  # (three cycles: too few to say a timer)


def test_healthy_loops_stay_silent(tmp_path: Path) -> None:
    """A server answering its health checks for two minutes, an idle engine's stats said
    unchanged (its reader's lines: `LineParser.taken`), and a countdown are no hangs."""
    health = "".join(HEALTH.format(m=k // 6, s=k % 6 * 10, port=40418 + k) for k in range(13))
    assert loop_at_end(health.splitlines()) is None
    assert loop_at_end(health.replace("/health", "/v1/models").splitlines()) is None
    assert stalled(tmp_path, health) == []
    idle = "".join(
        f"INFO 02-27 20:{k // 6 + 10:02d}:{k % 6 * 10:02d} metrics.py:455] Avg prompt throughput: "
        "0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 "
        "reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.\n"
        for k in range(13)
    )  # (vllm/engine/metrics.py LoggingStatLogger.log, its format rendered)
    assert stalled(tmp_path, idle) == []
    parser = LineParser()
    for line in idle.splitlines():
        parser.read(line)
    assert looped(parser, idle.splitlines()) == []
    assert loop_at_end(idle.splitlines()) is not None  # (its reader's lines: theirs to judge)
    countdown = [f"10:{k // 60:02d}:{k % 60:02d} shutting down, waiting {90 - k}s for workers"
                 for k in range(90)]  # fmt: skip
    assert loop_at_end(countdown) is None
    growing = [
        line.replace(f"waiting {90 - k}s", f"waiting {k}s") for k, line in enumerate(countdown)
    ]
    assert loop_at_end(growing) is not None  # (a wait said longer and longer)
    assert (
        loop_at_end([TRITON.format(s=k % 60, m=25 + k // 60, n=30 - k) for k in range(30)]) is None
    )


#: Triton's shutdown (server.cc `InferenceServer::Stop`: "Timeout {exit_timeout_iters}: Found
#: {live} live models and {inflight} in-flight non-inference requests" each second, counting
#: down its exit timeout), as a user posted it (find_string's "in-flight non-inference requests",
#: a triton-inference-server thread of 2023: `I0516 08:25:58.465659 9187 server.cc:302]`)
TRITON = (
    "I0516 08:{m:02d}:{s:02d}.465659 9187 server.cc:302] Timeout {n}: Found 1 live models and 0 "
    "in-flight non-inference requests"
)


def test_the_tail_keeps_the_last_lines_of_any_chunks() -> None:
    tail = Tail(keep=64)
    for k in range(100):
        tail.feed(f"line {k}\n".encode())
    lines = [line for line in tail.lines() if line]
    assert lines[-1] == "line 99"
    assert all(line.startswith("line ") for line in lines)
    tail.feed(b"half a li")
    tail.feed(b"ne\n")
    assert tail.lines()[-2] == "half a line"


#: CPython's report of the SIGINT a terminal's ^C sends (Python's default handler raises
#: KeyboardInterrupt), after the terminal's echo of it
STOPPED = (
    "^CTraceback (most recent call last):\n"
    '  File "train.py", line 10, in <module>\n'
    '    dist.init_process_group("nccl")\n'
    "KeyboardInterrupt\n"
)


def test_a_person_s_stop_after_the_loop_leaves_it_the_console_s_end(tmp_path: Path) -> None:
    """Someone gave up waiting on the loop: `^C`, and Python's KeyboardInterrupt report of it
    (no failure), come after it -- it still ends the console. Any other line after it is
    the console going on."""
    assert loop_at_end((c10d(13) + "^C\n").splitlines()) is not None
    assert loop_at_end((c10d(13) + STOPPED + STOPPED).splitlines()) is not None
    assert stalled(tmp_path, c10d(13) + STOPPED)
    raised = STOPPED.replace("KeyboardInterrupt", "RuntimeError: boom").replace("^C", "")
    assert loop_at_end((c10d(13) + raised).splitlines()) is None


#: https://github.com/ray-project/ray/issues/17674 ("tune outputs repeated block that says
#: `PENDING`": Tune's status block, printed again and again while its one trial waits for
#: resources; this paste prints no `Current time`)
TUNE_BLOCK = """== Status ==
Memory usage on this node: 6.2/7.9 GiB
Using FIFO scheduling algorithm.
Resources requested: 0/4 CPUs, 0/0 GPUs, 0.0/1.35 GiB heap, 0.0/0.67 GiB objects (0.0/2.0 CPU_group_4c35fd1fd36593e0380dcf6f8abfcd37, 0.0/1.0 CPU_group_0_4c35fd1fd36593e0380dcf6f8abfcd37, 0.0/1.0 CPU_group_1_4c35fd1fd36593e0380dcf6f8abfcd37)
Result logdir: C:\\Users\\rick\\ray_results\\trade4
Number of trials: 1/1 (1 PENDING)
+---------------------------------+----------+-------+
| Trial name                      | status   | loc   |
|---------------------------------+----------+-------|
| PPO_SimpleTradeEnv4_10ba4_00000 | PENDING  |       |
+---------------------------------+----------+-------+


"""  # noqa: E501


def test_a_status_table_printed_again_and_again_is_a_loop_of_its_lines() -> None:
    """Tune's status block is the cycle, twelve lines long: said five times with no clock
    (its trial PENDING: words of a wait), it is a loop; twice, not yet. The memory it shows
    drifting (a gauge) is no progress of a loop whose words say it waits."""
    loop = loop_at_end((TUNE_BLOCK * 5).splitlines())
    assert loop is not None
    assert loop.period == 11
    assert loop_at_end((TUNE_BLOCK * 2).splitlines()) is None
    drifting = TUNE_BLOCK * 4 + TUNE_BLOCK.replace("6.2/7.9 GiB", "6.4/7.9 GiB")
    assert loop_at_end(drifting.splitlines()) is not None


def test_a_loop_told_while_the_job_runs_ends_when_its_lines_stop_being_the_last() -> None:
    """`runwatch watch` looks at the last lines while output comes: the loop is the rank's
    wait once, however often it looks; lines after it that are no more of it end it."""
    parser = LineParser()
    lines = c10d(13).splitlines()
    for line in lines:
        parser.read(line)
    (told,) = looped(parser, lines)
    assert told[1]["phase"].startswith("loop: ")
    assert told[1]["waited"] == 120.0
    assert looped(parser, lines) == []
    went_on = [*lines, "04:57:40 connected to the store, rank 3 of 8"]
    assert [f["phase"] for _, f in looped(parser, went_on)] == ["exited"]


def test_a_trial_s_number_is_work_done_and_an_attempt_s_is_none() -> None:
    """Optuna's `Trial 12 pruned.` once a minute (optuna/study/_tell.py's log, its format
    rendered): a search going on, trial by trial; `attempt 7 of 10` twice is seven attempts."""
    pruned = [f"[I 2023-05-01 10:{k:02d}:00,123] Trial {k} pruned." for k in range(10)]
    assert loop_at_end(pruned) is None
    tries = [
        "connecting to the master (attempt 6 of 10)",
        "connecting to the master (attempt 7 of 10)",
    ]
    assert loop_at_end(tries) is not None
    early = [line.replace(" 6 of", " 1 of").replace(" 7 of", " 2 of") for line in tries]
    assert loop_at_end(early) is None  # (two attempts: too few)


def test_a_clock_in_seconds_since_the_epoch_dates_the_loop() -> None:
    """A JSON log's `created` (Python logging's record attribute, as python-json-logger prints
    it): seconds since the epoch are its clock, no value -- the same retry each 10 s for two
    minutes is a loop; read as values, each line would be progress."""
    line = (
        '{{"created": {t:.3f}, "levelname": "WARNING", "message": "connect to redis:6379 '
        'refused, retrying"}}'
    )
    lines = [line.format(t=1717000000.125 + 10 * k) for k in range(13)]
    assert shape(lines[0]).clock == (1717000000.125 % 86400)
    loop = loop_at_end(lines)
    assert loop is not None
    assert loop.waited == 120.0
    tokens = [f"10:{k:02d}:00 trained on {1500000000 + k * 2**20} tokens" for k in range(10)]
    assert loop_at_end(tokens) is None  # (after the line's clock, such a number is a count)


def test_a_number_after_a_key_s_colon_is_a_value_and_after_a_host_a_port() -> None:
    """`global_step:1200` is a step (a value: progress when it moves); `[lccn01]:56183`,
    `redis.example.com:6379`, `localhost:29500` are where a client connects (ids)."""
    assert shape("global_step:1200 consumed_samples:38400").values == ("1200", "38400")
    for line in ("connect to [lccn01]:56183", "redis.example.com:6379", "localhost:29500"):
        assert shape(line).values == (), line
    lines = [f"10:{k:02d}:00 global_step:{1200 + k} consumed_samples:{38400 + 32 * k}"
             for k in range(10)]  # fmt: skip
    assert loop_at_end(lines) is None


def test_an_evaluator_waiting_for_the_next_checkpoint_is_idle() -> None:
    """TensorFlow's `checkpoints_iterator` (tensorflow/python/training/checkpoint_utils.py:
    "Waiting for new checkpoint at %s", its format rendered) polls for the trainer's next
    checkpoint: an evaluator idle by design, however long; a trainer waiting on another
    process's checkpoint by name is a wait."""
    idle = [f"I0501 10:{k:02d}:00.000000 1 checkpoint_utils.py:140] Waiting for new checkpoint "
            "at /ckpt/run1" for k in range(10)]  # fmt: skip
    assert loop_at_end(idle) is None
    stuck = [line.replace("new checkpoint at /ckpt/run1", "checkpoint 12 from the trainer")
             for line in idle]  # fmt: skip
    assert loop_at_end(stuck) is not None


def test_a_retry_s_jittered_interval_is_no_countdown() -> None:
    """A backoff drawn at random (`retrying in 3.2s`, then `4.9s`, then `1.7s`) goes down as
    often as up: the loop goes on; a countdown shrinks at every repeat."""
    jitter = [3.2, 4.9, 1.7, 2.5, 4.1, 0.9, 3.3, 2.2, 4.4, 1.1, 3.9, 2.8, 4.6]
    lines = [f"10:{k // 6:02d}:{k % 6 * 10:02d} connect to master refused, retrying in {j}s"
             for k, j in enumerate(jitter)]  # fmt: skip
    assert loop_at_end(lines) is not None

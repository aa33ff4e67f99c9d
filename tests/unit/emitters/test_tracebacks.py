"""Tracebacks read by their grammar (issue 41 item 3): frames then an unindented exception
line are an uncaught traceback with or without their head, under any prefix, padding or
terminal wrap; the last of chained exceptions is reported; the component comes from the
prefix or the frames' files; one the program survived is no failure. The lines are those of
real consoles (tests/fixtures/consoles/corpus/dev/, each file names its thread)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import read_all, scanned

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.failures import CUT as CUT_SAID
from runwatch.emitters.logparse import Found


def failed(found: list[Found]) -> list[dict[str, Any]]:
    return [f for k, f in found if k == "component.failed" and f["how"] == "exception"]


VLLM_PREFIX = "ERROR 04-29 00:53:54 [core.py:398] "
HEADLESS = [  # vllm#16259: the engine core's logged traceback, its head not in the paste
    VLLM_PREFIX + "  File \"/usr/local/lib/python3.12/dist-packages/ray/air/config.py\", "
    "line 17, in <module>",
    VLLM_PREFIX + "    from ray.air.config import (",
    VLLM_PREFIX + "             ^^^^^^^^^^^^^^^^^^",
    VLLM_PREFIX + "ModuleNotFoundError: No module named 'pyarrow'",
]  # fmt: skip


def test_frames_then_an_exception_line_under_a_logger_s_prefix_without_their_head() -> None:
    (fields,) = failed(read_all(HEADLESS))
    assert fields["error"] == "ModuleNotFoundError: No module named 'pyarrow'"


def test_a_head_cut_by_one_character_and_a_frame_that_lost_its_indentation() -> None:
    lines = ["raceback (most recent call last):",
             'File "/workspace/verl/verl/trainer/main_ppo.py", line 45, in main',
             "    run_ppo(config)",
             '  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line '
             "2961, in get",
             "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run()"]  # fmt: skip
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("ray.exceptions.RayTaskError(ActorDiedError)")


def test_chained_exceptions_report_the_last_and_carets_are_frames() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/v1/engine/core_client.py", line 910, in get_output_async',
        "    raise self._format_exception(outputs) from None",
        "    ~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^^",
        "    ...<5 lines>...",
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/v1/engine/async_llm.py", line 666, in output_handler',
        "    outputs = await engine_core.get_output_async()",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("vllm.v1.engine.exceptions.EngineDeadError")
    assert fields["component"] == "inference"  # from the frames' files: vLLM's


def test_a_terminal_s_padding_and_wrap() -> None:
    """NVIDIA-NeMo/Gym#356: copied from a terminal, the lines padded to its width, the
    exception line glued after the `raise value` line's padding and wrapped mid-actor-id."""
    pad = " " * 120
    lines = [
        f'File "/opt/nemo_rl_venv/lib/python3.12/site-packages/ray/_private/worker.py", '
        f"line 2882, in get{pad}values = worker.get_objects(object_refs){pad}",
        '  File "/opt/nemo_rl_venv/lib/python3.12/site-packages/ray/_private/worker.py", '
        "line 970, in get_objects",
        f"    raise value{pad}ray.exceptions.ActorDiedError: The actor died because of an "
        "error raised in its creation task, ray::lm_policy-0-2:DTe",
        f"79f3b3f4160dc05408ac436e01000000, repr=DTensorPolicyWorker[rank=2]){pad}",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("ray.exceptions.ActorDiedError: The actor died")


def test_python_s_own_words_make_a_cut_traceback_uncaught() -> None:
    """verl#3568: a thread died; the paste cut the exception line. IPython (unsloth#2974)
    names the exception on its head."""
    thread = ["(WorkerDict pid=707093) Exception in thread Thread-3 (_loop_forever):",
              "(WorkerDict pid=707093) Traceback (most recent call last):",
              '(WorkerDict pid=707093)   File "/opt/conda/envs/verl/lib/python3.11/threading.py"'
              ", line 1045, in _bootstrap_inner",
              "(WorkerDict pid=707093)     self.run()"]  # fmt: skip
    (fields,) = failed(read_all(thread))
    assert fields["error"] == "Exception in thread Thread-3 (_loop_forever):"
    assert fields["src"]["pid"] == 707093
    ipython = [
        "-" * 75,
        "RuntimeError" + " " * 30 + "Traceback (most recent call last)",
        "Cell In[19], line 13",
        "---> 13 trainer.train()",
        "",
        "File ~/.conda/envs/b/lib/python3.11/site-packages/transformers/trainer.py:2245, "
        "in Trainer.train(self)",
        "   2243         hf_hub_utils.enable_progress_bars()",
    ]
    (fields,) = failed(read_all(ipython))
    assert fields["error"] == "RuntimeError"


#: vllm#6102 (corpus12 dev): rank 0's traceback from llm.generate, the paste ending in its frames
CUT = ["[rank0]: Traceback (most recent call last):",
       '[rank0]:   File "/data/vllm/vattn/offline.py", line 52, in test_llm',
       "[rank0]:     outputs = llm.generate(prompts_choose, sampling_params)",
       '[rank0]:   File "/opt/vllm/vllm/entrypoints/llm.py", line 561, in _run_engine',
       "[rank0]:     step_outputs = self.llm_engine.step()"]  # fmt: skip


def test_a_traceback_the_output_ends_inside_is_its_process_s_last_word() -> None:
    """Cut before its exception line, nothing after it: nobody handled it (corpus12 dev's
    eight such excerpts); its frames' files name the component."""
    (fields,) = failed(read_all(CUT))
    assert fields["error"].startswith("an uncaught traceback, cut before its exception line")
    assert "vllm/entrypoints/llm.py" in fields["error"]
    assert fields["component"] == "inference"


def test_torch_s_excepthook_head_alone_is_an_uncaught_exception() -> None:
    """torch.distributed's excepthook writes `[rankN]: ` before each line of the report of an
    exception that reached the top of the rank's main thread (distributed_c10d.py
    `_distributed_excepthook`): its head alone says the rank died uncaught (ms-swift#9892,
    corpus21/dev; torchtune's `[rank1]: Traceback` after its last INFO line, corpus23/dev) --
    whatever the line before it, a WARNING included. A bare head stays too little, and so does
    one under another prefix (`[default0]:`, torchrun's `--tee`)."""
    head = "[rank1]: Traceback (most recent call last):"
    before = "[INFO:swift] images_dir: /workspace/train_get/Ling-3.0-tiny-full/v0/images"
    for lines in ([before, head], ["WARNING: NCCL_DEBUG unset", head]):
        (fields,) = failed(read_all(lines))
        assert fields["error"].startswith("an uncaught exception (torch.distributed's excepthook")
        assert scanned(lines) == read_all(lines)
    assert failed(read_all([before, "Traceback (most recent call last):"])) == []
    assert failed(read_all([before, "[default1]:Traceback (most recent call last):"])) == []
    # its process said more after all (a paste's lines out of order): no failure
    assert failed(read_all([head, "[rank1]: {'loss': 0.5, 'grad_norm': 1.0, 'step': 3}"])) == []


def test_torch_s_excepthook_head_glued_after_a_bar_is_one_too() -> None:
    """A tqdm bar has no line end: the excepthook's head its rank wrote next starts right after
    the bar's `]` (unsloth#2367, corpus15/dev) -- the same uncaught report as on a line of its
    own; a bare head glued so stays too little."""
    bar = "  0%|▎         | 2/750 [06:25<40:07:50, 193.14s/it]"
    (fields,) = failed(read_all([bar + "[rank0]: Traceback (most recent call last):"]))
    assert fields["error"].startswith("an uncaught exception (torch.distributed's excepthook")
    assert failed(read_all([bar + "Traceback (most recent call last):"])) == []


@pytest.mark.parametrize(
    "after",
    [
        ["[rank0]: INFO 08-20 10:18:40 llm_engine.py:1] shutting down"],  # its source went on
        ["[rank0]: Processed prompts: 100%|#####| 64/64 [00:09<00:00,  6.50it/s]"],  # went on
    ],
)
def test_a_cut_traceback_its_process_printed_more_after_is_no_failure(after: list[str]) -> None:
    assert failed(read_all(CUT + after)) == []


def test_loguru_s_annotations_a_terminal_s_padding_split_stay_in_the_traceback() -> None:
    """verifiers#599 (corpus dev): loguru's annotated frames (`│ ... └ <value>`), padded wide
    enough that the padding reader splits the cap from its pipes; the paste ends in them."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/alloc/prime-rl/.venv/lib/python3.12/site-packages/httpx/_transports/'
        'default.py", line 394, in handle_async_request',
        "    resp = await self._pool.handle_async_request(req)",
        "                 │    │     │                    └ <Request [b'POST']>",
        "                 │    │     └ <function AsyncConnectionPool.handle_async_request at 0x7f>",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("an uncaught traceback, cut before its exception line")


def test_faulthandler_s_dump_of_stacks_is_no_cut_traceback() -> None:
    """CPython's faulthandler (Python/traceback.c dump_frame: `  File "%s", line %d in %s`, no
    comma): a timeout's dump (`dump_traceback_later`) is no exception; a fatal signal's says so
    on its own line, which the catalogue reads -- once."""
    dump = ["Thread 0x00007f3a2c1ff700 (most recent call first):",
            '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
            '  File "/opt/train.py", line 88 in train_step']  # fmt: skip
    assert failed(read_all(["Timeout (0:05:00)!", *dump])) == []
    found = [f for k, f in read_all(["Fatal Python error: Bus error", "", *dump])
             if k == "component.failed"]  # fmt: skip
    assert [f["error"] for f in found] == ["Fatal Python error: Bus error"]


def test_a_cut_traceback_logged_as_a_warning_is_no_failure() -> None:
    warned = ["WARNING 01-24 07:01:39 [x.py:1] " + line[len("[rank0]: ") :] for line in CUT]
    assert failed(read_all(warned)) == []


@pytest.mark.parametrize(
    "lines",
    [
        # logged at WARNING: the level on the head's prefix, or on the line before it
        ["WARNING 01-24 07:01:39 [x.py:1] Traceback (most recent call last):",
         'WARNING 01-24 07:01:39 [x.py:1]   File "reward.py", line 9, in score',
         "WARNING 01-24 07:01:39 [x.py:1] KeyError: 'reward_extra_info'"],
        ["2025-11-12 20:15:31,676 WARNING reward fn failed", "Traceback (most recent call last):",
         '  File "reward.py", line 9, in score', "TimeoutError: comparison"],
        # the process went on: a step after it
        ["Traceback (most recent call last):", '  File "reward.py", line 9, in score',
         "ValueError: bad answer", "step:7 - critic/score/mean:0.5 - actor/pg_loss:0.1"],
    ],
)  # fmt: skip
def test_a_traceback_the_program_survived_is_no_failure(lines: list[str]) -> None:
    assert failed(read_all(lines)) == []


def test_a_worker_s_warning_whose_prefix_a_paste_cut_is_not_the_driver_s_level() -> None:
    """godot_rl_agents#53: Ray's `(pid=12416) ` cut to ` pid=12416) ` on a worker's WARNING;
    the driver's traceback after it is its own, uncaught."""
    lines = [
        " pid=12416) 2023-01-21 14:27:54,836     WARNING trainer.py:975 -- Worker crashed",
        "Traceback (most recent call last):",
        '  File "C:\\\\conda\\\\ray\\\\tune\\\\tune.py", line 633, in run',
        '    raise TuneError("Trials did not complete", incomplete_trials)',
        "ray.tune.error.TuneError: ('Trials did not complete', [PPO_godot_cbdfc_00000])",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("ray.tune.error.TuneError")
    assert "src" not in fields  # the driver's


def test_the_scanner_reads_the_line_before_a_marked_one_as_every_line_read_does() -> None:
    """`runwatch watch` shows the readers marked lines only; the line before a traceback's
    head (Python's `Process X:`) and a pasted tail's code line are the failure reader's too."""
    lines = ["noise", "Process SpawnProcess-31:", "Traceback (most recent call last):",
             '  File "/x/multiprocessing/process.py", line 314, in _bootstrap', "    self.run()",
             "more noise", "    work.wait()",
             "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
             "Timed out waiting 1800000ms for recv operation to complete"]  # fmt: skip
    every = read_all(lines)
    scanner = LineScanner(LineParser())
    scanned = scanner.feed("\n".join(lines).encode() + b"\n") + scanner.finish()
    scanned += scanner.parser.finish()
    assert repr(scanned) == repr(every)
    assert [f["error"][:20] for f in failed(every)] == ["RuntimeError: [../th"]


#: a traceback a handler logged at WARNING, its level on the line before its head
LOGGED_WARNING = ["2024-01-01 10:00:00 WARNING retrying the request after an error:",
                  "Traceback (most recent call last):", '  File "/app/x.py", line 242, in f',
                  "    raise ValueError('x')", "ValueError: x"]  # fmt: skip
#: an exception's line, and its message going on over the next line (detectron2's)
MESSAGE_GOES_ON = ["Traceback (most recent call last):",
                   '  File "/detectron2/engine/train_loop.py", line 242, in _detect_anomaly',
                   "FloatingPointError: Loss became infinite or NaN at iteration=27!",
                   "{'loss_cls': 0.3, 'loss_box_reg': 0.2}"]  # fmt: skip


@pytest.mark.parametrize("lines", [LOGGED_WARNING, MESSAGE_GOES_ON])
def test_a_console_whose_lines_end_in_crlf_reads_as_one_ending_in_lf(lines: list[str]) -> None:
    """`\\r\\n` (a container's or a pod's log with a TTY) is one line end: no empty line
    between the line before a marked one and it, which would hide the line before (the
    level a traceback was logged at) or stand between an exception and its message."""
    data = "\r\n".join(lines).encode() + b"\r\n"
    every = repr(read_all(lines))
    for cut in range(len(data)):  # (a pipe may cut between the "\r" and the "\n")
        scanner = LineScanner(LineParser())
        crlf = scanner.feed(data[:cut]) + scanner.feed(data[cut:]) + scanner.finish()
        assert repr(crlf + scanner.parser.finish()) == every, data[:cut]


def test_what_a_traceback_that_is_no_failure_says_and_why() -> None:
    """Issue 41 item 7: the reasons `runwatch diagnose` prints for a console it cannot place."""
    said: list[str] = []
    for lines in (
        ["WARNING 01-24 07:01:39 [x.py:1] Traceback (most recent call last):",
         'WARNING 01-24 07:01:39 [x.py:1]   File "reward.py", line 9, in score',
         "WARNING 01-24 07:01:39 [x.py:1] KeyError: 'reward_extra_info'"],
        ["Traceback (most recent call last):", '  File "reward.py", line 9, in score',
         "ValueError: bad answer", "step:7 - critic/score/mean:0.5 - actor/pg_loss:0.1"],
        ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
         "loading shards"],
        ["(APIServer pid=1) ERROR 04-11 [api_server.py:855] RuntimeError: thread crashed"],
    ):  # fmt: skip
        parser = LineParser()
        read_all(lines, parser)
        said.append(" ".join(parser.notes()))
    assert "logged as a warning" in said[0]
    assert "was handled: its process went on working" in said[1]
    assert "ends before its exception line" in said[2]
    assert "no traceback's frames come before it" in said[3]


def test_a_launcher_s_prefix_ending_in_a_colon_on_every_line_of_a_traceback() -> None:
    """A CI's `stderr: ` before each line, the head's too: not a message introducing the
    traceback (`Scheduler hit an exception: Traceback ...`), a prefix repeated."""
    lines = ["stderr: Traceback (most recent call last):",
             'stderr:   File "/opt/train.py", line 12, in <module>', "stderr:     main()",
             "stderr: RuntimeError: CUDA error: out of memory"]  # fmt: skip
    (fields,) = failed(read_all(lines))
    assert fields["error"] == "RuntimeError: CUDA error: out of memory"
    introduced = ["[2025-06-23 15:37:01 TP1] Scheduler hit an exception: Traceback (most recent "
                  "call last):", '  File "/sgl/scheduler.py", line 2546, in run_scheduler',
                  "    scheduler = Scheduler(server_args)", "ValueError: bad tp size"]  # fmt: skip
    assert [f["error"] for f in failed(read_all(introduced))] == ["ValueError: bad tp size"]


def test_an_exception_python_says_it_ignored_is_no_failure() -> None:
    """simpletransformers#763, yolov5#8406: CPython's unraisable hook reports an exception in a
    finaliser (`Exception ignored in: <... __del__ ...>`) and the program goes on -- even when
    the output ends there. A traceback after it that nothing ignored is still one."""
    ignored = [
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f49>",
        "Traceback (most recent call last):",
        '  File "/x/torch/utils/data/dataloader.py", line 1328, in __del__',
        '  File "/x/torch/utils/data/dataloader.py", line 1262, in _shutdown_workers',
        "AttributeError: 'NoneType' object has no attribute 'python_exit_status'",
    ]
    assert failed(read_all(ignored)) == []
    uncaught = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                "ValueError: bad batch"]  # fmt: skip
    assert [f["error"] for f in failed(read_all(ignored + uncaught))] == ["ValueError: bad batch"]
    parser = LineParser()
    read_all(ignored, parser)
    assert "Python said it ignored it" in " ".join(parser.notes())


#: https://github.com/QVPR/Patch-NetVLAD/issues/34 (corpus22/dev: two DataLoader iterators'
#: finalisers report on one unprefixed stream, their lines interleaved; paths shortened)
INTERLEAVED = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f4faf115ca0>",
    "Traceback (most recent call last):",
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f4faf115ca0>",
    '  File "/x/torch/utils/data/dataloader.py", line 1324, in __del__',
    "Traceback (most recent call last):",
    '  File "/x/torch/utils/data/dataloader.py", line 1324, in __del__',
    "    self._shutdown_workers()",
    '  File "/x/multiprocessing/process.py", line 160, in is_alive',
    "    assert self._parent_pid == os.getpid(), 'can only test a child process'",
    "AssertionError: can only test a child process",
    "    self._shutdown_workers()",
    '  File "/x/multiprocessing/process.py", line 160, in is_alive',
    "    assert self._parent_pid == os.getpid(), 'can only test a child process'",
    "AssertionError: can only test a child process",
]


def test_two_exceptions_python_ignored_interleaved_are_both_ignored() -> None:
    """Each `Exception ignored` stands for one report after it, whichever of the interleaved
    lines starts it (a head, or a frame after the other's head was cut off): two said, two
    ignored (one said before two reports in a row: `..._is_no_failure` above)."""
    assert failed(read_all(INTERLEAVED)) == []


def test_an_exception_named_with_its_module_ends_an_uncaught_report_without_frames() -> None:
    """icme2019#14: TensorFlow's estimator stops with its hook's exception, the frames not in
    the paste; Python's report of an uncaught exception names it with its module. An exception
    line alone at its line's start is the same report with its frames lost (gloo's `RuntimeError:
    [...pair.cc:598] Connection closed by peer`, the last thing a rank printed): the process's
    death when the output ends with it, a logged error when the process goes on; one after a
    logger's words, and a warning's category, are no failure."""
    tail = ["E0410 22:34:13.729731 4483055104 basic_session_run_hooks.py:760] Model diverged",
            "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN "
            "loss during training. "]  # fmt: skip
    (fields,) = failed(read_all(tail))
    assert fields["error"].endswith("NanLossDuringTrainingError: NaN loss during training.")
    (alone,) = failed(read_all(["RuntimeError: NaN loss during training."]))
    assert alone["error"] == "RuntimeError: NaN loss during training."
    assert failed(read_all(["RuntimeError: NaN loss during training.", "step: 5 loss: 0.3"])) == []
    assert failed(read_all(["ERROR trainer: RuntimeError: NaN loss during training."])) == []
    assert (
        failed(read_all(["RuntimeError: Process ApiServer_0 (PID: 31) died with exit code 0"]))
        == []
    )
    assert failed(read_all(["urllib3.exceptions.InsecureRequestWarning: Unverified request"])) == []
    assert failed(read_all([*tail, "step: 5 loss: 0.3 lr: 0.1"])) == []  # it went on


def test_ipython_s_head_with_the_padding_lost_and_its_older_frames() -> None:
    """TensorFlow-Time-Series-Examples#11: a notebook's traceback pasted with the exception's
    name glued to the head, then IPython 5's `<ipython-input-..> in <module>()` frame."""
    lines = [
        "NanLossDuringTrainingErrorTraceback (most recent call last)",
        "<ipython-input-43-2f65d1e5e9c4> in <module>()",
        "     32       optimizer=tf.train.AdamOptimizer(0.001))",
        "---> 34     estimator.train(input_fn=train_input_fn, steps=200)",
        "/usr/lib/python2.7/site-packages/tensorflow/python/estimator/estimator.pyc in train("
        "self, input_fn, hooks, steps, max_steps, saving_listeners)",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"] == "NanLossDuringTrainingError"
    # a word that merely ends before the head is no exception's name
    assert failed(read_all(["SomethingTraceback (most recent call last)"])) == []


def test_a_paste_indented_whole_ends_at_its_less_indented_exception_line() -> None:
    """A markdown code block indents every line: the frames by six, the exception by four."""
    lines = ["      0%|          | 0/392 [00:00<?, ?it/s]Traceback (most recent call last):",
             '      File "train.py", line 110, in <module>', "        train_model(params)",
             '      File "/x/allennlp/training/trainer.py", line 323, in _train_epoch',
             '        raise ValueError("nan loss encountered")',
             "    ValueError: nan loss encountered"]  # fmt: skip
    (fields,) = failed(read_all(lines))
    assert fields["error"] == "ValueError: nan loss encountered"
    # code lines of an ordinary traceback stay code lines: this one is cut, not ended by one
    (cut,) = failed(read_all(["Traceback (most recent call last):", '  File "x.py", line 1, in f',
                              "    RuntimeError('not raised')"]))  # fmt: skip
    assert cut["error"].startswith("an uncaught traceback, cut before its exception line")


def test_a_launcher_s_traceback_cut_short_leaves_its_child_s_uncaught_one() -> None:
    """accelerate's own traceback after the script's, cut before its exception line: the
    script's exception is still the failure; a step further after both says it was handled."""
    child = [
        "Traceback (most recent call last):",
        '  File "train.py", line 618, in main',
        "    accelerator.backward(loss)",
        "RuntimeError: CUDA error: misaligned address",
    ]
    launcher = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/accelerate", line 8, in <module>',
        "    sys.exit(main())",
    ]
    (fields,) = failed(read_all(child + launcher))
    assert fields["error"] == "RuntimeError: CUDA error: misaligned address"
    assert failed(read_all(child + launcher + ["step:3 - loss:0.5 - lr:0.1"])) == []
    # a bar repainted at the count it showed is no step further
    bar = "Steps:   0% 2/2500 [00:10<3:35:23,  5.17s/it, loss=0.239, lr=5e-6]"
    assert len(failed(read_all([bar, *child, bar]))) == 1


def test_an_abort_on_a_collective_s_timeout_is_the_timeout_s() -> None:
    """libstdc++'s `terminate called after throwing ...` is a failure of its own, unless its
    `what():` (or a line before) is a collective's timeout: torch's watchdog aborts so."""
    abort = "terminate called after throwing an instance of 'c10::DistBackendError'"
    watchdog = ("  what():  [PG 0 Rank 5] Process group watchdog thread terminated with exception: "
                "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, "
                "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds before "
                "timing out.")  # fmt: skip
    kinds = [k for k, _ in read_all([abort, watchdog])]
    assert "collective.timeout" in kinds
    assert "component.failed" not in kinds
    trt = ["terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'",
           "  what():  [TensorRT-LLM][ERROR] Assertion failed: Failed: MPI error"]  # fmt: skip
    ((_, fields),) = [f for f in read_all(trt) if f[0] == "component.failed"]
    assert fields["how"] == "fatal"
    assert "_abort" not in fields


def test_a_collective_s_failure_raised_as_an_exception_line_is_the_rank_s_death() -> None:
    """GLM-130B #132 (in markdown bold), VNext #9: a collective's timeout that stands as
    Python's exception line, frames or no frames before it, is the rank raising it -- its
    process group aborted, it cannot go on; the same timeout in a logger's record, and another
    exception named bare, are no failure of their own."""
    aborted = ("**RuntimeError: NCCL communicator was aborted on rank 2.  Original reason for "
               "failure was: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL("
               "SeqNum=10, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1805457 milliseconds "
               "before timing out.**")  # fmt: skip
    gloo = ("RuntimeError: [/opt/conda/.../gloo/transport/tcp/unbound_buffer.cc:136] Timed out "
            "waiting 1800000ms for send operation to complete")  # fmt: skip
    for line in (aborted, gloo):
        found = read_all([line])
        kinds = [k for k, _ in found]
        assert "collective.timeout" in kinds
        (fields,) = failed(found)
        assert fields["error"].startswith("RuntimeError: ")
    logged = "[E ProcessGroupGloo.cpp:138] " + gloo.removeprefix("RuntimeError: ")
    assert failed(read_all([logged])) == []
    assert failed(read_all(["2023-01-01 ERROR train: " + gloo])) == []
    # a traceback that ends in it is one failure, not two
    frames = ['Traceback (most recent call last):', '  File "train.py", line 3, in <module>',
              "    dist.all_reduce(t)", gloo]  # fmt: skip
    assert len(failed(read_all(frames))) == 1


def test_frames_a_paste_left_flush_and_their_code_lines_are_one_traceback() -> None:
    """sglang#8974 (corpus4/dev): every `File` line and code line lost its indentation."""
    lines = [
        'File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line '
        "235, in __init__",
        "min_per_gpu_memory = self.init_torch_distributed()",
        'File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/'
        'pynccl_wrapper.py", line 350, in NCCL_CHECK',
        'raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("RuntimeError: NCCL error: unhandled system error")


SEGFAULT = "ERROR: Unexpected segmentation fault encountered in worker."


def test_a_child_s_death_the_process_survives_is_no_failure_once_it_counts_on() -> None:
    """FreeVC#58 (corpus4/dev): a DataLoader worker's segfault at an epoch's end, after which
    the epochs count on; the same line as the output's last word is a failure."""
    went_on = ["INFO:freevc:Train Epoch: 1515 [70%]", SEGFAULT, "INFO:freevc:====> Epoch: 1515",
               "INFO:freevc:Train Epoch: 1516 [5%]"]  # fmt: skip
    assert [k for k, _ in read_all(went_on) if k == "component.failed"] == []
    ended = [f for k, f in read_all(went_on[:3]) if k == "component.failed"]
    assert [(f["error"], f["how"]) for f in ended] == [(SEGFAULT, "fatal")]


def test_tensorflow_1_s_op_error_report_is_an_uncaught_exception_s_last_line() -> None:
    """horovod#108 (corpus5/dev): TensorFlow 1 ends an uncaught op error's report with its
    name and `(see above for traceback)` before the colon; the failing nodes follow on lines
    a tab indents. The same words a sentence quotes are no failure of its own."""
    lines = [
        "UnknownError (see above for traceback): ncclCommInitRank failed: unhandled cuda error",
        "\t [[Node: model/HorovodAllreduce_model_Mean_25_0 = HorovodAllreduce[T=DT_FLOAT, "
        '_device="/job:localhost/replica:0/task:0/device:GPU:0"](model/Mean_25)]]',
    ]
    (fields,) = failed(read_all(lines))
    assert fields["error"].startswith("UnknownError (see above for traceback): ncclCommInitRank")
    quoted = ["I got InvalidArgumentError (see above for traceback): Minimum tensor rank: 2"]
    assert failed(read_all(quoted)) == []


def test_a_cuda_out_of_memory_the_trainer_retried_past_is_no_failure() -> None:
    """torch's `CUDA out of memory. Tried to allocate ...` (c10/cuda/CUDACachingAllocator.cpp)
    as torch 1.x raised it, a bare RuntimeError line: a failure when nothing follows it, none
    when the trainer caught it and went on (accelerate's find_executable_batch_size)."""
    oom = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB "
           "total capacity; 14.61 GiB already allocated; 5.75 MiB free)")  # fmt: skip

    def dead(lines: list[str]) -> list[str]:
        return [f["error"] for k, f in read_all(lines) if k == "component.failed"]

    assert dead([oom]) == [oom]
    assert dead([oom, "step 12 | loss 0.51 | lr 1e-05", "step 13 | loss 0.50"]) == []


#: googlearchive/PyDrive#52 (https://github.com/googlearchive/PyDrive/issues/52), as posted at
#: a program's close: CPython's unraisable hook with no traceback -- the exception line right
#: after the object's repr, which the terminal wrapped onto a line of its own
IGNORED_WRAPPED = [
    "Exception ignored in: <bound method ApiAttribute.__del__ of ",
    "    <pydrive.apiattr.ApiAttribute object at 0x7f819e8dabe0>>",
    "TypeError: __del__() missing 1 required positional argument: 'obj'",
]
#: Python's logging with `stack_info=True` (CPython Lib/logging/__init__.py `findCaller`: the
#: record's message, "Stack (most recent call last):", then `traceback.print_stack`), rendered:
#: a stack the program printed and went on from, though the output ends inside it
LOGGED_STACK = [
    "INFO:trainer:saving checkpoint 3",
    "Stack (most recent call last):",
    '  File "/opt/app/train.py", line 120, in <module>',
    "    main()",
    '  File "/opt/app/train.py", line 98, in main',
    '    log.info("saving checkpoint %d", step, stack_info=True)',
]

#: gdb's `py-bt` of a living rank (CPython Tools/gdb/libpython.py `PyBacktrace`: "Traceback
#: (most recent call first):", C functions as `  <built-in method ...>`; DeepSpeed#1969, corpus25
#: dev): a debugger's look at a process, cut at the console's end
PY_BT = [
    "(gdb) py-bt",
    "Traceback (most recent call first):",
    "  <built-in method allreduce of PyCapsule object at remote 0x7fb3b12c3f90>",
    '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", '
    "line 1209, in all_reduce",
    "    work = group.allreduce([tensor], opts)",
    '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage2.py", line '
    "1326, in allreduce_bucket",
]


@pytest.mark.parametrize(
    "lines", [IGNORED_WRAPPED, LOGGED_STACK, PY_BT], ids=["ignored", "stack", "py-bt"]
)
def test_what_python_printed_and_went_on_from_is_no_failure_at_the_output_s_end(
    lines: list[str],
) -> None:
    """An exception Python said it ignored, its repr wrapped between, and a logged stack cut at
    the console's end: no traceback a process died of -- by every line read and by the scanner."""
    assert [k for k, _ in read_all(lines) if k == "component.failed"] == []
    scanner = LineScanner(LineParser())
    found = scanner.feed("\n".join(lines).encode() + b"\n") + scanner.finish()
    assert [k for k, _ in found + scanner.parser.finish() if k == "component.failed"] == []
    # an uncaught one after either is still its process's death
    uncaught = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                "ValueError: bad batch"]  # fmt: skip
    assert [f["error"] for f in failed(read_all(lines + uncaught))] == ["ValueError: bad batch"]
    # and frames cut after a stack the program printed, under a traceback's own head
    assert len(failed(read_all(lines + uncaught[:2]))) == 1


# --- a traceback followed by silence, the process still running (`LineParser.quiet`) --------

UNCAUGHT_LINES = [
    "Traceback (most recent call last):",
    '  File "/workspace/verl/verl/workers/fsdp_workers.py", line 512, in update_actor',
    "    metrics = self.actor.update_policy(data=data)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


def test_a_traceback_that_was_the_last_word_before_a_quiet_fails_once() -> None:
    parser = LineParser()
    assert failed(read_lines(parser, UNCAUGHT_LINES)) == []  # the process may still go on
    (fields,) = failed(parser.quiet())
    assert fields["error"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert parser.quiet() == []  # said once
    assert failed(parser.finish()) == []  # and not again at the end


def test_a_quiet_after_a_handled_or_logged_traceback_decides_nothing() -> None:
    parser = LineParser()
    read_lines(parser, UNCAUGHT_LINES)
    read_lines(parser, ["step:2 - critic/score/mean:0.5 - timing_s/step:2.0"])  # it went on
    assert failed(parser.quiet()) == []
    parser = LineParser()
    read_lines(parser, ["WARNING 11-29 10:00:00 retrying after an error", *UNCAUGHT_LINES])
    assert failed(parser.quiet()) == []


def read_lines(parser: LineParser, lines: list[str]) -> list[Found]:
    return [f for line in lines for f in parser.parse(line)]


#: H1111#23 (corpus14's development part): the end of rich's traceback panel, then its unboxed
#: exception line, every line under a launcher's `SUBPROCESS: ` prefix
RICH = [
    "SUBPROCESS: │ > 105 │   │   │   module.weight.data = module.weight.data.to(device, non_bl │",
    "SUBPROCESS: │   106                                                                       │",
    "SUBPROCESS: └─────────────────────────────────────────────────────────────────────────────┘",
    "SUBPROCESS: RuntimeError: CUDA error: out of memory",
    "SUBPROCESS: CUDA kernel errors might be asynchronously reported at some other API call, so",
]


def test_rich_s_panel_then_its_exception_line_under_a_prefix_is_a_traceback_s_end() -> None:
    (fields,) = failed(read_all(RICH))
    assert fields["error"] == "RuntimeError: CUDA error: out of memory"
    scanner = LineScanner(LineParser())  # `runwatch watch` reads it the same
    found = scanner.feed(("\n".join(RICH) + "\n").encode()) + scanner.finish()
    assert failed(found + scanner.parser.finish()) == [fields]
    # without the panel before it, the prefixed exception line is a logged error
    assert failed(read_all(RICH[3:])) == []
    # the process went on after it: handled
    assert (
        failed(
            read_all([*RICH, "SUBPROCESS: Steps:  50%|█████     | 5/10 [00:05<00:05, 1.00it/s]"])
        )
        == []
    )


def test_a_quiet_inside_a_traceback_s_frames_decides_it_once() -> None:
    """The output went quiet inside a traceback's frames (head and a frame out, no exception
    line): the quiet decides it, as diagnose decides it at a file's end -- no process pauses
    `RUNWATCH_LAST_WORD` inside a traceback it prints. Should the rest come after all, it is
    read into the same record and not said a second time, at a later quiet or at the end."""
    parser = LineParser()
    parser.parse("step:1 - critic/score/mean:0.5 - timing_s/step:180.0")
    parser.parse("Traceback (most recent call last):")
    parser.parse('  File "/tmp/hung.py", line 5, in <module>')
    said = [f["error"] for f in failed(parser.quiet())]
    assert said == [f"{CUT_SAID} (last frame: /tmp/hung.py)"]
    for line in ['    {}["teacher_logprobs"]', "KeyError: 'teacher_logprobs'"]:
        said += [f["error"] for f in failed(parser.parse(line))]
    said += [f["error"] for f in failed(parser.quiet()) + failed(parser.finish())]
    assert said == [f"{CUT_SAID} (last frame: /tmp/hung.py)"]
    assert not any("logged as a warning" in note for note in parser.failures.notes)


def test_a_quiet_inside_a_launcher_s_cut_traceback_says_the_earlier_one_once() -> None:
    """The quiet came inside a traceback cut in its frames (a launcher's, after its child's
    whole one): the child's, which it ended before, names the failure -- said at the quiet,
    and not again at the end."""
    parser = LineParser()
    for line in ["Traceback (most recent call last):", '  File "/tmp/a.py", line 5, in <module>',
                 "    f()", "KeyError: 'x'", "some output", "Traceback (most recent call last):",
                 '  File "/tmp/launch.py", line 9, in <module>',
                 '  File "/tmp/launch.py", line 19, in main']:  # fmt: skip
        parser.parse(line)
    said = [f["error"] for f in failed(parser.quiet())]
    assert said == ["KeyError: 'x'"]
    assert failed(parser.quiet()) + failed(parser.finish()) == []


#: verl#4124 (corpus15 dev control): an AgentLoopWorker's tool call raised KeyError in the
#: function that caught it and logged it at ERROR; the workers went on
TOOL_CALL = [
    "(AgentLoopWorker pid=51453) 2025-11-14 03:43:10 ERROR [.../verl-0.5.0/verl/experimental/"
    "agent_loop/tool_agent_loop.py] Error when executing tool: 'solve_equation'",
    "(AgentLoopWorker pid=51453) Traceback (most recent call last):",
    '(AgentLoopWorker pid=51453)   File ".../verl-0.5.0/verl/experimental/agent_loop/'
    'tool_agent_loop.py", line 143, in _call_tool',
    "(AgentLoopWorker pid=51453)     tool = self.tools[tool_name]",
    "(AgentLoopWorker pid=51453)            ~~~~~~~~~~^^^^^^^^^^^",
    "(AgentLoopWorker pid=51453) KeyError: 'solve_equation'",
]
#: detectron2#838 (corpus2 dev): the train loop logs the exception that ends the run at ERROR,
#: its frames from the catching function down to the raise
TRAIN_LOOP = [
    "ERROR [02/10 22:55:41 d2.engine.train_loop]: Exception during training:",
    "Traceback (most recent call last):",
    '  File "/home/yview/detectron2/detectron2/engine/train_loop.py", line 132, in train',
    "    self.run_step()",
    '  File "/home/yview/detectron2/detectron2/engine/train_loop.py", line 216, in run_step',
    "    self._detect_anomaly(losses, loss_dict)",
    "FloatingPointError: Loss became infinite or NaN at iteration=2137!",
]


def test_an_exception_logged_at_error_where_it_was_raised_is_a_handler_s_report() -> None:
    """One frame under a record logged at ERROR: raised and caught in one function, whose
    handler logged it (`logger.exception`) -- no failure, though the worker says no more. Two
    frames or more (detectron2's train loop), a module's frame, or no record before it
    (Python's report of an uncaught exception) stay the process's last word."""
    parser = LineParser()
    assert failed(read_all(TOOL_CALL, parser)) == []
    (why,) = parser.notes()  # what diagnose says of it, once
    assert "a handler's report" in why
    (fields,) = failed(read_all(TRAIN_LOOP))
    assert fields["error"].startswith("FloatingPointError")
    module = [TOOL_CALL[0], TOOL_CALL[1], TOOL_CALL[2].replace("in _call_tool", "in <module>"),
              *TOOL_CALL[3:]]  # fmt: skip
    assert len(failed(read_all(module))) == 1
    assert len(failed(read_all(TOOL_CALL[1:]))) == 1  # Python's own report: uncaught
    info = TOOL_CALL[0].replace(" ERROR ", " INFO ")  # the line before is another record
    assert len(failed(read_all([info, *TOOL_CALL[1:]]))) == 1


#: a Ray worker's code logs an exception at ERROR with its frames through two calls (verl's
#: reward manager's format, rendered), then the driver's TaskRunner prints the next steps
REWARD = [
    "(WorkerDict pid=2345, ip=10.0.0.2) 2025-06-01 10:00:05,000 ERROR reward.py:120 -- "
    "reward failed",
    "(WorkerDict pid=2345, ip=10.0.0.2) Traceback (most recent call last):",
    '(WorkerDict pid=2345, ip=10.0.0.2)   File "/app/verl/workers/reward.py", line 40, in compute',
    "(WorkerDict pid=2345, ip=10.0.0.2)     score = fn(x)",
    '(WorkerDict pid=2345, ip=10.0.0.2)   File "/app/verl/utils/reward_score/math.py", line 12, '
    "in fn",
    '(WorkerDict pid=2345, ip=10.0.0.2)     raise ValueError("bad answer")',
    "(WorkerDict pid=2345, ip=10.0.0.2) ValueError: bad answer",
]
STEP = "(TaskRunner pid=1234) step:{} - critic/score/mean:0.5 - actor/entropy:0.6"


def test_a_ray_worker_s_logged_traceback_then_the_job_s_next_step_is_a_report() -> None:
    """Ray carries a task's exception to its caller (`_raylet.pyx` `store_task_errors`); a
    worker's console shows one only when its code logs it. A step of the job after it says
    the caller went on: no failure. Without that step, Python's own report (no record before
    its head), or a rank's logged traceback under torchrun (its peers can print a step before
    they block) stay the worker's last word."""
    steps = [STEP.format(1), *REWARD, STEP.format(2), STEP.format(3)]
    parser = LineParser()
    assert failed(read_all(steps, parser)) == []
    assert any("the job made a step after it" in note for note in parser.notes())
    assert len(failed(read_all([STEP.format(1), *REWARD]))) == 1
    assert len(failed(read_all([STEP.format(1), *REWARD[1:], STEP.format(2)]))) == 1
    ranks = [line.replace("(WorkerDict pid=2345, ip=10.0.0.2) ", "[rank1]: ") for line in REWARD]
    peers = [s.replace("(TaskRunner pid=1234) ", "[rank0]: ") for s in (STEP.format(1),
                                                                       STEP.format(2))]  # fmt: skip
    assert len(failed(read_all([peers[0], *ranks, peers[1]]))) == 1


#: pytorch/helion#470 as posted: the frames' tail and triton's exception, whose class's name
#: has none of the usual endings
OUT_OF_RESOURCES = [
    '  File "/home/lucaskabela/helion/helion/runtime/__init__.py", line 63, in default_launcher',
    "    return triton_kernel.run(",
    "           ^^^^^^^^^^^^^^^^^^",
    '  File "/home/lucaskabela/.conda/envs/helion/lib/python3.12/site-packages/triton/compiler/'
    'compiler.py", line 483, in _init_handles',
    '    raise OutOfResources(self.metadata.shared, max_shared, "shared memory")',
    "triton.runtime.errors.OutOfResources: out of resource: shared memory,",
]


@pytest.mark.parametrize("last", [
    OUT_OF_RESOURCES[-1],
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",  # Infinity#31
    "omegaconf.errors.MissingMandatoryValue: Missing mandatory value: model.path",
    "OutOfResources: out of resource: shared memory",  # a class of the script's own (__main__)
])  # fmt: skip
def test_the_line_after_the_frames_names_the_exception_whatever_its_name_ends_in(
    last: str,
) -> None:
    """Python writes the class's name qualified by its module (`format_exception_only`), then
    its message: after the frames, that line ends the traceback -- also for names that end in
    none of Error, Exception, ... A lowercase word or one capitalised word before a colon (a
    metric line another writer put there) ends nothing."""
    (fields,) = failed(read_all([*OUT_OF_RESOURCES[:-1], last]))
    assert fields["error"] == last
    for other in ("loss: nan", "Epoch: 3"):
        assert all(f["error"] != other for f in failed(read_all([*OUT_OF_RESOURCES[:-1], other])))


def test_sglang_s_failed_health_check_is_its_engine_s_death_unless_it_serves_after() -> None:
    """SGLang's /health_generate got no answer from its detokenizer (http_server.py, rendered):
    the engine no longer answers -- its death when the output ends there; a pause it recovered
    from when its stats go on after it."""
    decode = ("[2025-06-01 10:00:{:02d} TP0] Decode batch. #running-req: 8, #token: 9000, token "
              "usage: 0.10, gen throughput (token/s): 900.00, #queue-req: 0")  # fmt: skip
    failed_check = ("[2025-06-01 10:00:20] ERROR: Health check failed. Server couldn't get a "
                    "response from detokenizer for last 20 seconds. tic start time: 10:00:00. "
                    "last_heartbeat time: 09:59:01")  # fmt: skip
    ended = [f for k, f in read_all([decode.format(0), failed_check]) if k == "component.failed"]
    assert [(f["how"], f["component"]) for f in ended] == [("fatal", "inference")]
    went_on = [decode.format(0), failed_check, decode.format(30)]
    assert [k for k, _ in read_all(went_on) if k == "component.failed"] == []


#: detectron2#425: `FloatingPointError`'s message goes on over a second line, the loss dict it
#: holds (a torch tensor's repr, `grad_fn=<...>` and all)
DETECTRON2_NAN = [
    "Traceback (most recent call last):",
    '  File "/detectron2/engine/train_loop.py", line 242, in _detect_anomaly',
    "    raise FloatingPointError(",
    "FloatingPointError: Loss became infinite or NaN at iteration=27!",
    "loss_dict = {'loss_cls': tensor(nan, device='cuda:1', grad_fn=<NllLossBackward>), "
    "'loss_box_reg': tensor(0.2576, device='cuda:1', grad_fn=<DivBackward0>)}",
]


def test_metrics_naming_no_step_right_after_an_exception_line_are_its_message() -> None:
    """The dict is read (its NaN said), and is no work that went on after the exception."""
    found = read_all(DETECTRON2_NAN)
    (fields,) = failed(found)
    assert fields["error"] == "FloatingPointError: Loss became infinite or NaN at iteration=27!"
    (record,) = [f for k, f in found if k == "step.metrics"]
    assert set(record["metrics"]) == {"loss_cls", "loss_box_reg"}
    assert record["step"] == 27  # the iteration the exception's line names (`=27!`)


@pytest.mark.parametrize(
    "after",
    [
        ["step 28 loss 0.25 grad_norm 0.5"],  # a record naming its step
        ["", "{'loss': 0.25, 'grad_norm': 0.5}"],  # a line between: the message had ended
    ],
)
def test_work_after_an_exception_s_message_still_says_it_was_handled(after: list[str]) -> None:
    assert failed(read_all([*DETECTRON2_NAN[:4], *after])) == []
    assert failed(scanned([*DETECTRON2_NAN[:4], *after])) == []  # (watch: no blank line shown)


def test_a_line_the_scanner_does_not_show_still_stands_between_an_exception_and_work() -> None:
    """`runwatch watch` shows the readers no unmarked line: the one between an exception
    named without frames and a record is still a line between, as `diagnose` reads it."""
    lines = ["ValueError: bad value", "resuming from the last checkpoint",
             "{'loss': 0.25, 'grad_norm': 0.5}"]  # fmt: skip
    assert failed(read_all(lines)) == failed(scanned(lines)) == []


def test_an_exception_s_message_is_its_own_whatever_other_workers_print_between() -> None:
    """Ray's workers print at once: another worker's line between a worker's exception line
    and the message going on is no line of that worker's."""
    lines = [f"(Trainer pid=5) {line}" for line in DETECTRON2_NAN]
    lines.insert(4, "(Rollout pid=6) generating the next batch")
    (fields,) = failed(read_all(lines))
    assert fields["error"] == "FloatingPointError: Loss became infinite or NaN at iteration=27!"
    assert failed(scanned(lines)) == [fields]


@pytest.mark.parametrize(
    ("between", "handled"),
    [
        ([], False),
        (["[rank1]: saving shard 3"], False),  # another rank's line: no line of rank 0's
        (["[rank0]: resuming from the last checkpoint", "[rank1]: saving shard 3"], True),
        ([f"[rank1]: saving shard {n}" for n in range(12)], True),  # too far to go on it
    ],
)
def test_whether_a_rank_s_record_goes_on_its_exception_s_message_watch_and_diagnose_agree(
    between: list[str], handled: bool
) -> None:
    """A launcher's prefixes hold no marker of the scanner's: what `runwatch watch` is shown
    of the lines after an exception's line is what `diagnose` reads."""
    lines = ["[rank0]: ValueError: bad value", *between, "[rank0]: {'loss': 0.25, 'lr': 0.5}"]
    expected = [] if handled else ["ValueError: bad value"]
    assert [f["error"] for f in failed(read_all(lines))] == expected
    assert [f["error"] for f in failed(scanned(lines))] == expected


def test_an_exception_s_message_whose_record_a_paste_wrapped_over_lines_is_its_message() -> None:
    """The dict the message holds, hard-wrapped after a pair: the record it ends on its
    second line is still the message's."""
    head, rest = DETECTRON2_NAN[4].split("), ", 1)
    lines = [*DETECTRON2_NAN[:4], head + "),", " " + rest]
    for found in (read_all(lines), scanned(lines)):
        (fields,) = failed(found)
        assert fields["error"] == "FloatingPointError: Loss became infinite or NaN at iteration=27!"
        (record,) = [f for k, f in found if k == "step.metrics"]
        assert set(record["metrics"]) == {"loss_cls", "loss_box_reg"}


#: a trainer's code whose exception rich draws, in a file of its own: a short path of the
#: test's (not this checkout's, whose length would move rich's wraps)
_RAISES = """\
def setup_distributed():
    raise RuntimeError("connection to the store timed out")


def fit():
    setup_distributed()


def main():
    fit()
"""


def _raising_main() -> Iterator[Callable[[], None]]:
    """`main` of `_RAISES`, compiled from a file under a short temporary directory (its frames
    name the file, as rich reads its lines); the directory removed after."""
    with tempfile.TemporaryDirectory(prefix="rw") as where:
        path = os.path.join(where, "train.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(_RAISES)
        namespace: dict[str, Any] = {}
        exec(compile(_RAISES, path, "exec"), namespace)
        yield namespace["main"]


def _rich_panel(width: int) -> list[str]:
    """A real uncaught exception's report as rich draws it (`rich.traceback.Traceback`, the
    version the project installs), at a terminal's width: its panel of frames, then the
    exception line."""
    from io import StringIO

    from rich.console import Console
    from rich.traceback import Traceback

    out = StringIO()
    for main in _raising_main():
        try:
            main()
        except RuntimeError:
            Console(file=out, width=width, color_system=None).print(Traceback())
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 120])
def test_rich_s_traceback_panel_is_read_whole_and_cut(width: int) -> None:
    """rich's panel (`│ path:N in f │` frames between its borders, the code around each) is a
    traceback by the same grammar: whole, its exception line after the panel names the failure;
    cut inside its frames with no head (a paste from the middle), its process's death as
    Python's own frames are; one whose process printed more after it, none."""
    panel = _rich_panel(width)
    assert any(line.startswith("╭") and "Traceback" in line for line in panel)
    (whole,) = failed(read_all(["step 1 loss 0.5", *panel]))
    assert whole["error"] == "RuntimeError: connection to the store timed out"
    frames = [n for n, line in enumerate(panel) if " in setup_distributed" in line]
    cut = panel[2 : frames[-1] + 3]  # (from below the head to past the last frame)
    (fields,) = failed(read_all(cut))
    assert fields["error"].startswith("an uncaught traceback, cut before its exception line")
    assert failed(read_all([*cut, "step 2 loss 0.4"])) == []


def test_rich_s_frames_a_terminal_s_padding_split_from_their_border() -> None:
    """DeepDeWedge's Lightning DDP set-up (corpus17/dev, its rich panel cut in its frames, the
    paths wrapped inside the panel): a frame line padded to the panel's width loses its right
    border to the padding's split and is still a frame."""
    lines = [
        "│ ~/.conda/envs/ddw_env_multigpu/lib/python3.10/site-packages/pytorc │",
        "│ h_lightning/strategies/ddp.py:204 in setup_distributed                       │",
        "│                                                                              │",
        "│ ❱ 204 │   │   _init_dist_connection(self.cluster_environment, self._process_ │",
        "│ ing_lite/utilities/distributed.py:237 in _init_dist_connection               │",
    ]
    (fields,) = failed(read_all(lines))
    assert "ing_lite/utilities/distributed.py" in fields["error"]
    assert scanned(lines) == read_all(lines)


def _rich_logged(then: str) -> list[str]:
    """A trainer's console under rich's logging handler (`rich.logging.RichHandler` with
    `rich_tracebacks=True`, as the project's rich draws it at 120 columns): steps, then an
    exception logged with its panel indented under the record, then `then`'s lines."""
    import logging
    from io import StringIO

    from rich.console import Console
    from rich.logging import RichHandler

    out = StringIO()
    log = logging.getLogger(f"runwatch-test-rich-{then}")
    log.propagate = False
    console = Console(file=out, width=120, color_system=None)
    log.addHandler(RichHandler(console=console, rich_tracebacks=True, show_time=False))
    log.setLevel(logging.INFO)

    for step in (1, 2):
        log.info(f"step {step} | loss 0.5 | grad_norm 1.2 | lr 0.001")
    for main in _raising_main():
        try:
            main()
        except RuntimeError:
            log.exception("rollout failed")
    if then == "went on":
        log.info("step 3 | loss 0.4 | grad_norm 1.1 | lr 0.001")
    return out.getvalue().splitlines()


def test_rich_s_logging_handler_s_panel_indented_under_its_record() -> None:
    """rich's logging handler indents the panel under the record's message: the panel's head
    takes the prefix before its top border, and its frames under it are the traceback's. Cut in
    its frames at the console's end, the process's death (a trainer that logs and re-raises);
    whole with steps after it, a logged error the run survived."""
    lines = _rich_logged("cut")
    head = next(n for n, line in enumerate(lines) if "╭" in line and "Traceback" in line)
    frames = [
        n for n, line in enumerate(lines) if "│" in line and ".py:" in line and " in " in line
    ]
    assert len(frames) == 4  # (the helper, main, fit, setup_distributed)
    assert lines[head][: lines[head].index("╭")].isspace()
    # its head and first frame (the border's width under the head's prefix), cut; then, with
    # no head, its first two frames (a terminal's padding splits each panel line, the right
    # border a piece of its own)
    for cut in (lines[: frames[1]], lines[frames[0] : frames[2]]):
        (fields,) = failed(read_all(cut))
        assert fields["error"].startswith("an uncaught traceback, cut before its exception line")
    assert failed(read_all(_rich_logged("went on"))) == []


def test_a_panel_s_right_border_split_off_by_a_terminal_s_padding_keeps_the_record() -> None:
    """A rich panel's line under a logging handler's indent, padded to the terminal's width:
    the padding's split leaves its right border a piece of its own, with none of the record's
    indent before it (the /tmp console of RichHandler at 120 columns): still the record's."""
    from runwatch.emitters.tracebacks import Record

    record = Record(" " * 20)
    assert record.more("│         ")
    assert not record.more("step 3 | loss 0.4")

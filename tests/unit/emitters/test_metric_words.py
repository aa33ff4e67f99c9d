"""Non-finite metrics a trainer says in words or formats as strings (issue 41, corpus14's and
corpus15's development parts): its own sentence that it stops on a value that is not finite
(torchvision's references and the loops copied from them, `Loss is nan, stopping training`;
3D-R1's `Loss in not finite. Terminate training.`), and a printed dict whose numbers are
strings with thousands separators beside a quoted `'nan'` (foundation-model-stack)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import read_all

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.printed_dicts import metrics_dict

EPOCH = ("Epoch: [0]  [ 150/1985]  eta: 0:07:57.971424  lr: 0.000500  loss: 0.5219 (0.7306)  "
         "time: 0.2477  data: 0.1055")  # fmt: skip


def non_finite(found: list[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    metrics = [f["metrics"] for kind, f in found if kind == "step.metrics"]
    return {k: v for m in metrics for k, v in m.items() if not math.isfinite(v)}


@pytest.mark.parametrize(
    "line",
    [
        "Loss is nan, stopping training",
        "Loss in not finite. Terminate training.",
        "loss is inf, stopping training",
        "Loss is NaN. Stopping the run.",
    ],
)
def test_a_trainer_s_sentence_that_it_stops_on_a_non_finite_value_is_that_value(line: str) -> None:
    assert list(non_finite(read_all([EPOCH, line]))) in (["Loss"], ["loss"])
    scanner = LineScanner(LineParser())  # `runwatch watch` finds the line too
    found = scanner.feed(f"{EPOCH}\n{line}\n".encode()) + scanner.finish()
    assert (
        non_finite(found + scanner.parser.finish()).keys()
        == non_finite(read_all([EPOCH, line])).keys()
    )


@pytest.mark.parametrize(
    "line",
    [
        "Loss in not finite. Skip this training step.",  # skipped, not applied
        "Loss is 0.5, stopping training",  # finite
        "best loss is inf, stopping",  # a best-so-far's start
        "Early stopping: val_loss is inf",
        "If loss is NaN, stop training.",  # a condition a healthy run prints, no value
        "when grad norm is inf, abort the run",
    ],
)
def test_sentences_that_are_no_stop_on_a_non_finite_value(line: str) -> None:
    assert non_finite(read_all([EPOCH, line])) == {}


@pytest.mark.parametrize(
    ("line", "key", "infinite"),
    [
        # verl's actor and SFT trainer (dp_actor.py, fsdp_sft_trainer.py), under Ray's prefix
        ("(WorkerDict pid=9092) WARN: grad_norm is not finite: nan", "grad_norm", False),
        ("(WorkerDict pid=9092) WARN: rank 3 grad_norm is not finite: inf", "grad_norm", True),
        # CosyVoice's executor (cosyvoice/utils/train_utils.py), under logging's record head
        (
            "2025-04-27 17:00:18,438 WARNING get infinite grad_norm, check your code/data if it "
            "appears frequently",
            "grad_norm",
            True,
        ),
        ("2024-01-01 10:00:00,123 - train - WARNING - loss is nan", "loss", False),
        ("WARNING:root:Loss is inf", "Loss", True),
        ("WARNING loss is nan, stopping", "loss", False),
        ("NaN loss detected", "loss", False),
        ("WARNING: non-finite grad_norm, check your data", "grad_norm", False),
        ("non-finite grad norm detected", "grad norm", False),
        ("NaN detected in loss", "loss", False),
        ("Found NaN in loss", "loss", False),
        ("loss turned nan", "loss", False),
        ("Encountered inf loss.", "loss", True),
        ("WARN: grad_norm is not finite: tensor(inf, device='cuda:0')", "grad_norm", True),
    ],
)
def test_a_sentence_that_a_metric_is_not_finite_is_that_value(
    line: str, key: str, infinite: bool
) -> None:
    """Any sentence whose subject is a metric and whose predicate says it is not finite, with
    or without a stop after it and under a record's head, is the metric's value (corpus53)."""
    got = non_finite(read_all([EPOCH, line]))
    assert list(got) == [key]
    assert math.isinf(got[key]) == infinite
    assert not infinite or got[key] > 0
    scanner = LineScanner(LineParser())  # `runwatch watch` reads it the same
    found = scanner.feed(f"{EPOCH}\n{line}\n".encode()) + scanner.finish()
    assert non_finite(found + scanner.parser.finish()).keys() == {key}


@pytest.mark.parametrize(
    "line",
    [
        # ESPnet's: the update skipped, in its words (v1's and its CTC's)
        "2018-05-23 13:05:13,682 (asr_chainer:132) WARNING: grad norm is nan. Do not update model.",
        "[host:0/8] 2022-02-21 11:44:54,398 (ctc:74) WARNING: 1/2 samples got nan grad. These "
        "were ignored for CTC loss.",
        # a value put right in its place (a reward function's)
        "WARNING: reward is nan for sample 12, setting it to 0",
        "reward is NaN; replacing with 0.0",
        "reward is nan, returning 0.0",
        "kl is nan, clipping to 10",
        "reward is nan -> 0",
        "ValueError: loss is nan",  # an exception's message: component_failed reads it
        # no metric's (TensorFlow's tf.data cardinality, a sampler, a loop)
        "The dataset is infinite.",
        "INFO: dataset is infinite, relying on max_steps",
        "INFO: infinite iterator, looping over the data",
        "Infinite loop detected",
        # a condition, a cause, a question, a count around the value
        "the loss is nan if the batch is empty",
        "AUC is nan because only one class is present",
        "Note that loss is NaN for empty batches",
        "Check: loss is nan? False",
        "Loss was infinite in 0 of 100 steps",
        "Steps where grad_norm was nan: 0",
        "nan loss: 0",
        "why grad_norm is nan?",
        "Check that loss became nan",  # an instruction's words, no metric's name
        "The loss is NaN-free",  # no value: a word of its own
        "Detected nan values.",  # the values of nothing named
        "best val_loss is inf",  # a best-so-far's start
    ],
)
def test_sentences_that_say_no_metric_is_not_finite(line: str) -> None:
    assert non_finite(read_all([EPOCH, line])) == {}


@pytest.mark.parametrize(
    "line",
    [
        "step 100: loss nan, lr set to 0.0001",  # a setting's words beside: still the step's
        "step 12: loss=nan, reward=inf, kl reset to 0.05",
    ],
)
def test_a_metric_line_beside_a_setting_s_words_is_still_read(line: str) -> None:
    assert "loss" in non_finite(read_all([EPOCH, line]))


def test_a_negative_infinity_said_first_keeps_its_sign() -> None:
    got = non_finite(read_all([EPOCH, "-inf loss detected"]))
    assert got == {"loss": -math.inf}


#: ultralytics' yolov5 progress bar (its epoch, memory, losses, instances, size), which the
#: trainer's warning is glued to where it printed it without a newline (corpus28, yolov5#673)
YOLO_BAR = ("    16/999     7.38G   0.03433   0.01034   0.01147   0.05613       130       800:  "
            "85%|########5 | 23/27 [00:15<00:02,  1.66it/s]")  # fmt: skip


@pytest.mark.parametrize(
    "lines",
    [
        # ultralytics yolov3's train.py (`print('WARNING: non-finite loss, ending training ',
        # loss_items)`), a pruning fork's console (corpus28)
        [
            EPOCH,
            "WARNING: non-finite loss, ending training  tensor([    nan, 0.22070, 0.00000, "
            "    nan], device='cuda:0')",
        ],
        # yolov5's, glued after the bar it was drawing
        [
            YOLO_BAR + "WARNING: non-finite loss, ending training  tensor([nan, nan, nan, nan], "
            "device='cuda:0')"
        ],
        [EPOCH, "NaN loss, stopping the run."],
    ],
)
def test_the_same_sentence_with_the_value_first_is_that_value(lines: list[str]) -> None:
    assert list(non_finite(read_all(lines))) == ["loss"]
    scanner = LineScanner(LineParser())
    found = scanner.feed(("\n".join(lines) + "\n").encode()) + scanner.finish()
    assert list(non_finite(found + scanner.parser.finish())) == ["loss"]


@pytest.mark.parametrize(
    "line",
    [
        "If non-finite loss, stop training.",  # what it would do
        "When NaN loss, abort the job",
        "WARNING: non-finite loss, skipping this step",  # skipped, not stopped
        "non-finite loss values are ending up in the log",  # no stop of a run
    ],
)
def test_value_first_sentences_that_are_no_stop(line: str) -> None:
    assert non_finite(read_all([EPOCH, line])) == {}


def test_numbers_printed_as_strings_with_thousands_separators_are_numbers() -> None:
    """foundation-model-stack#342: every value a string, `'nan'` among them."""
    line = ("{'loss': 'nan', 'avg_loss': 'nan', 'tok/stp': '1,024.0', 's/stp': '33.875', "
            "'tok/gpu/s': '30.2', 'cum_tokens': '3,072'}")  # fmt: skip
    got = metrics_dict(line)
    assert got is not None
    metrics, _ = got
    assert metrics["tok/stp"] == 1024.0
    assert metrics["cum_tokens"] == 3072.0
    assert non_finite(read_all([f"0 2 2024-09-19 16:35:29.926102 {line}"])).keys() == {
        "loss", "avg_loss"}  # fmt: skip
    # words with commas stay words: a configuration printed as a dict is none
    assert metrics_dict("{'name': 'a,b', 'size': '1,2', 'mode': 'x', 'lr': '0.1'}") is None


def test_a_dict_of_tensors_with_their_autograd_node_is_read() -> None:
    """`grad_fn=<NllLossBackward>` is no Python literal: the object's repr reads as nothing,
    the number the tensor holds as the value (detectron2#425's loss_dict)."""
    text = ("{'loss_cls': tensor(nan, device='cuda:1', grad_fn=<NllLossBackward>), "
            "'loss_box_reg': tensor(0.2576, device='cuda:1', grad_fn=<DivBackward0>)}")  # fmt: skip
    got = metrics_dict(text)
    assert got is not None
    assert math.isnan(got[0]["loss_cls"])
    assert got[0]["loss_box_reg"] == 0.2576


def test_a_dict_of_tensorflow_s_eager_tensors_is_read() -> None:
    """TensorFlow's `<tf.Tensor: shape=(), dtype=float32, numpy=nan>` (framework/ops.py
    `_EagerTensorBase.__repr__`; numpy 2 writes the scalar `np.float32(nan)`) holds its value
    after `numpy=`: a Keras custom loop's printed logs."""
    text = (
        "{'loss': <tf.Tensor: shape=(), dtype=float32, numpy=nan>, "
        "'accuracy': <tf.Tensor: shape=(), dtype=float32, numpy=np.float32(0.25)>}"
    )
    got = metrics_dict(text)
    assert got is not None
    assert math.isnan(got[0]["loss"])
    assert got[0]["accuracy"] == 0.25


@pytest.mark.parametrize(
    "line",
    [
        # secretflow#192 (corpus24 dev), Ray's autoscaler: a request no node has room for
        "(scheduler +4m44s) Warning: The following resource request cannot be scheduled right "
        "now: {'CPU': 1.0, 'alice': 1.0}. This is likely due to all cluster resources being "
        "claimed by actors. Consider creating fewer actors or adding more nodes to this Ray "
        "cluster.",
        "Resources requested: {'GPU': 1.0, 'CPU': 8.0, 'memory': 1024.0}",
    ],
)
def test_a_cluster_s_resource_dict_is_no_metrics(line: str) -> None:
    """Ray names its resources `CPU`, `GPU`, ...: quantities asked for, not a step's metrics
    (read as one, each warning was a step of its own, the wait it declares progress)."""
    assert [k for k, _ in read_all([line]) if k == "step.metrics"] == []
    assert metrics_dict("{'CPU': 1.0, 'alice': 1.0}") is None
    got = metrics_dict("{'step': 5, 'loss': nan, 'GPU': 0.5, 'CPU': 12.0}")  # (the review's)
    assert got is not None
    assert math.isnan(got[0]["loss"])


#: the DPO trainer's `train stats` (direct-preference-optimization#42, corpus21/dev): its values
#: strings, a terminal's garbage overwritten into two keys, a stray quote among them
DPO = (
    "★---> train stats after 160544 examples: {'rewards_train/chosen': 'nan', "
    "'rewards_train/accuracies': '0', 'rewards_train/margins': 'nan', 'l  's0ogps_train/rejected'"
    ": 'nan', 'logps_train/chosen': 'nan', 'loss/train': 'nan', 'examples_per_second': '5.3297', "
    "'grad_norm': 'nan', 'counters/examples': 160544, 'counters/upog     2dates': 5017}"
)


def test_a_dict_a_terminal_overwrote_in_places_is_read_by_the_items_that_stand() -> None:
    """No literal parses a dict with a stray quote; its whole `'key': value` items still say
    the step's values -- the garbled keys (a terminal's run of spaces in them) are left out.
    A configuration so garbled stays none (words are most of it)."""
    got = metrics_dict(DPO[DPO.index("{") :])
    assert got is not None
    assert "loss/train" in got[0]
    assert math.isnan(got[0]["loss/train"])
    assert not any("  " in key for key in got[0])
    assert non_finite(read_all([DPO])).keys() == {
        "rewards_train/chosen", "rewards_train/margins", "logps_train/chosen", "loss/train",
        "grad_norm"}  # fmt: skip
    config = "{'model': 'llama', 'l  'sx': 'a', 'path': '/data/x', 'lr': '0.1', 'seed': 3}"
    assert metrics_dict(config) is None

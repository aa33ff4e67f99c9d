"""Trainers' metric lines the corpora lack, rendered with the trainers' own format code (issue
41 item 1): a NaN in each is found at its key and at the step the console names, in
`runwatch diagnose`'s reading and in `runwatch watch`'s scanner alike."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from helpers import non_finite as bad
from helpers import read_all, scanned

from runwatch.emitters.metric_pairs import labelled_groups

NAN = math.nan


def sb3_table(values: dict[str, Any]) -> list[str]:
    """stable-baselines3's HumanOutputFormat.write (stable_baselines3/common/logger.py,
    2.x): a tag's row with an empty value, its keys indented under it, floats `<8.3g`."""
    key2str: dict[tuple[str, str], str] = {}
    tag = ""
    for key, value in sorted(values.items()):
        value_str = f"{value:<8.3g}" if isinstance(value, float) else str(value)
        if key.find("/") > 0:
            tag = key[: key.find("/") + 1]
            key2str[(tag, tag)] = ""
        if len(tag) > 0 and tag in key:
            key = f"{'':3}{key[len(tag) :]}"
        key2str[(tag, key)] = value_str
    key_width = max(len(k) for _, k in key2str)
    val_width = max(map(len, key2str.values()))
    dashes = "-" * (key_width + val_width + 7)
    lines = [dashes]
    for (_, key), value in key2str.items():
        key_space = " " * (key_width - len(key))
        val_space = " " * (val_width - len(value))
        lines.append(f"| {key}{key_space} | {value}{val_space} |")
    return [*lines, dashes]


def fairseq_json(stats: dict[str, Any]) -> str:
    """fairseq's JsonProgressBar.log under its logger (fairseq/logging/progress_bar.py:
    every stat formatted as a string by `format_stat`, then `json.dumps`)."""
    return "2021-03-08 12:34:45 | INFO | train_inner | " + json.dumps(
        {k: v if k == "epoch" else str(v) for k, v in stats.items()}
    )


def _cases() -> list[tuple[str, list[str], list[tuple[int, list[str]]]]]:
    sb3 = {"rollout/ep_len_mean": 200.0, "rollout/ep_rew_mean": -1200.0, "time/fps": 1000,
           "time/iterations": 5, "time/time_elapsed": 10, "time/total_timesteps": 10240,
           "train/approx_kl": NAN, "train/entropy_loss": -1.42, "train/loss": NAN,
           "train/n_updates": 40}  # fmt: skip
    slime = {"rollout/raw_reward": NAN, "rollout/response_lengths": 512.0}
    fairseq = {"epoch": 1, "update": 0.001, "loss": NAN, "ppl": NAN, "wps": 123.4,
               "num_updates": 3, "lr": 4e-05, "gnorm": NAN}  # fmt: skip
    trpo = ["***** Episode 31455, Mean R = 28911.0 *****", "Beta: 6.91", "KL: nan",
            "PolicyEntropy: nan", "Steps: 672"]  # fmt: skip
    megatron = (
        f" [2024-05-01 10:00:00] iteration {12:8d}/{1000:8d} | consumed samples: {384:12d} | "
        f"learning rate: {1e-5:.6E} | global batch size: {32:5d} | lm loss: {NAN:.6E} | "
        f"loss scale: {1.0:.1f} | grad norm: {NAN:.3f} | number of skipped iterations: {0:3d} "
        f"| number of nan iterations: {0:3d} |"
    )
    verl = (f"(TaskRunner pid=2219) step:7 - actor/entropy:{NAN:.3f} - actor/pg_loss:{NAN:.3f}"
            f" - critic/score/mean:{0.1:.3f}")  # fmt: skip
    return [
        # SB3's step is the timesteps it logs at (`logger.dump(step=self.num_timesteps)`)
        ("sb3", sb3_table(sb3), [(10240, ["approx_kl", "loss"])]),
        # slime: `logger.info(f"rollout {rollout_id}: {log_dict}")` (slime/ray/rollout.py)
        ("slime", [f"rollout 3: {slime}"], [(3, ["rollout/raw_reward"])]),
        ("fairseq", [fairseq_json(fairseq)], [(3, ["gnorm", "loss", "ppl"])]),
        # pat-coady/trpo's logger: `***** Episode {}, Mean R = {:.1f} *****` then its rows
        ("trpo", trpo, [(31455, ["KL"])]),
        # Megatron-LM's training_log: `{:.6E}` writes NaN as `NAN`
        ("megatron", [megatron], [(12, ["grad norm", "lm loss"])]),
        # verl's console logger (`concat_dict_to_str`: `step:N - k:v:.3f`) under Ray's prefix
        ("verl", [verl], [(7, ["actor/entropy", "actor/pg_loss"])]),
    ]  # fmt: skip


@pytest.mark.parametrize(("name", "lines", "expected"), _cases(), ids=lambda c: str(c)[:12])
def test_a_non_finite_value_is_found_at_its_key_and_step(
    name: str, lines: list[str], expected: list[tuple[int, list[str]]]
) -> None:
    got = bad(read_all(lines))
    assert got[:1] == expected, name
    assert bad(scanned(lines))[:1] == expected, name


def test_a_dict_s_string_epoch_is_no_step_and_a_label_is_no_peer_s() -> None:
    """transformers 5 writes the epoch's fraction as a string (`'epoch': '1'` at its end): no
    step. A label naming a peer (`rank 3: {...}`) numbers nothing."""
    lines = ["{'loss': '0.5', 'grad_norm': '0.1', 'epoch': '0.5'}",
             "{'loss': 'nan', 'grad_norm': 'nan', 'epoch': '1'}",
             "rank 3: {'loss': nan, 'grad_norm': 0.5}"]  # fmt: skip
    assert bad(read_all(lines)) == [(2, ["grad_norm", "loss"]), (3, ["loss"])]


def test_keras_terminate_on_nan_is_the_loss_at_its_batch() -> None:
    """Keras' TerminateOnNaN (keras/src/callbacks/terminate_on_nan.py) prints
    `f"Batch {batch}: Invalid loss, terminating training"` and the run ends quietly: the loss
    was NaN or inf. MindSpore's LossMonitor raises the same words as a ValueError: an
    exception, the failure reader's."""
    lines = [" 12/100 [==>...........................] - ETA: 10s - loss: 0.5123",
             f"Batch {11}: Invalid loss, terminating training"]  # fmt: skip
    # (a bar of finite values holds no marker the scanner shows: the order of lines numbers it)
    assert [keys for _, keys in bad(read_all(lines))] == [["loss"]]
    assert bad(scanned(lines)) == bad(read_all(lines))
    # glued to the bar's refresh (corpus2/dev, Mobilenet-ssd-keras#21): the bar's loss is no
    # record of `Batch 3`
    glued = ("  3/234 [..............................] - ETA: 33:37:24 - loss: 44.4110Batch 3: "
             "Invalid loss, terminating training")  # fmt: skip
    assert bad(read_all([glued])) == [(3, ["loss"])]
    raised = "ValueError: epoch: 1 step: 100. Invalid loss, terminating training."
    assert bad(read_all([raised])) == []


@pytest.mark.parametrize("nan", ["-nan", "-nan(ind)", "nan(snan)", "-1.#IND00", "1.#QNAN0"])
def test_darknet_s_values_before_their_names(nan: str) -> None:
    """darknet's detector (AlexeyAB/darknet src/detector.c: `printf("\\n %d: %f, %f avg loss,
    %f rate, %lf seconds, %d images, %f hours left\\n", ...)`): each value before its name;
    C's printf writes NaN as `-nan` (glibc), `-nan(ind)` (MSVC), `-1.#IND00` (MSVC before
    Visual Studio 2015); and infinity as `1.#INF00`."""
    line = (f" 1234: {nan}, {nan} avg loss, 0.001000 rate, 3.200000 seconds, 78976 images, "
            "10.5 hours left")  # fmt: skip
    assert bad(read_all(["", line])) == [(1234, ["avg loss"])]
    assert bad(scanned(["", line])) == [(1234, ["avg loss"])]
    healthy = " 1234: 0.512, 0.611 avg loss, 0.001000 rate, 3.2 seconds, 78976 images"
    assert bad(read_all([healthy])) == []


def _pretty(data: dict[str, Any], guides: bool) -> list[str]:
    """rich's pretty printer (`console.print(dict)`; `Pretty(indent_guides=True)`) on a
    narrow terminal: an item a line, `{` and `}` alone."""
    import io

    from rich.console import Console
    from rich.pretty import Pretty

    console = Console(file=io.StringIO(), width=60, color_system=None)
    console.print(Pretty(data, indent_guides=guides))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out).splitlines()


@pytest.mark.parametrize(
    "render",
    [lambda d: json.dumps(d, indent=2).splitlines(), lambda d: _pretty(d, True),
     lambda d: _pretty(d, False)],
    ids=["json-indent", "rich-guides", "rich"],
)  # fmt: skip
def test_a_dict_printed_an_item_a_line_with_its_brace_alone(render: Any) -> None:
    metrics = {"actor/pg_loss": NAN, "actor/grad_norm": NAN, "critic/score/mean": 0.1}
    lines = ["step 12 | loss: 0.51 | reward: 0.30", "Saving checkpoint at global_step=13",
             *render(metrics)]  # fmt: skip
    assert bad(read_all(lines))[:1] == [(13, ["actor/pg_loss"])]
    assert bad(scanned(lines))[:1] == [(13, ["actor/pg_loss"])]
    healthy = {"actor/pg_loss": 0.01, "critic/score/mean": 0.1}
    assert bad(read_all(render(healthy))) == []
    settings = {"max_grad_norm": math.inf, "clip_ratio": 0.2, "lr": 1e-6}
    assert bad(read_all(render(settings))) == []


def _fastprogress(rows: list[list[str]]) -> list[str]:
    """fastprogress' ConsoleMasterBar.write(line, table=True) (fastai's console table): names
    padded to 8, two spaces apart; each row's cells padded to their names' widths."""
    names = [n + " " * (8 - len(n)) if len(n) < 8 else n for n in rows[0]]
    out = ["  ".join(names)]
    for row in rows[1:]:
        out.append(
            "".join(t + " " * (2 + len(n) - len(t)) for t, n in zip(row, names, strict=True))
        )
    return out


def test_a_header_that_times_its_epoch_and_an_epoch_column_in_lowercase() -> None:
    """Lasagne's mnist example, copied into many scripts (`print("Epoch {} of {} took
    {:.3f}s".format(...))`, then `print("  training loss:\\t\\t{:.6f}".format(...))`); fastai's
    console table under a lowercase `epoch` column."""
    lasagne = [f"Epoch {1} of {100} took {10.512:.3f}s", f"  training loss:\t\t{NAN:.6f}",
               f"  validation loss:\t\t{NAN:.6f}",
               f"  validation accuracy:\t\t{10.0:.2f} %"]  # fmt: skip
    assert bad(read_all(lasagne))[:1] == [(1, ["training loss", "validation loss"])]
    assert bad(scanned(lasagne))[:1] == bad(read_all(lasagne))[:1]
    fastai = _fastprogress([["epoch", "train_loss", "valid_loss", "accuracy", "time"],
                            ["0", f"{0.5:.6f}", f"{0.4:.6f}", f"{0.9:.6f}", "00:10"],
                            ["1", f"{NAN:.6f}", f"{NAN:.6f}", f"{0.1:.6f}", "00:10"]])  # fmt: skip
    assert bad(read_all(fastai)) == [(1, ["train_loss", "valid_loss"])]
    assert bad(scanned(fastai)) == [(1, ["train_loss", "valid_loss"])]


def test_the_step_a_value_is_at_after_it() -> None:
    """`{key}: {value} at step {n}`: the counter after `at` is the step of the values before
    it; `at` before the values is prose (`resumed at step 5`)."""
    assert bad(read_all([f"loss: {NAN} at step {100}"])) == [(100, ["loss"])]
    assert bad(read_all([f"loss: {NAN}, acc: {0.1} at iteration {7}"])) == [(7, ["loss"])]
    assert bad(read_all(["step 3 | loss 0.5", "resumed at step 5: loss nan"])) == []


def test_a_header_after_a_timestamp_numbers_the_lines_under_it() -> None:
    """nnU-Net v2's `print_to_log_file` writes `f"{datetime.now()}: {' '.join(args)}"`
    (nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py): `Epoch 0`, then `train_loss nan` and
    `val_loss nan` on lines of their own (corpus6/dev labels them epoch 0's); a logging
    record's INFO level before a header too."""
    import datetime

    stamp = str(datetime.datetime(2023, 8, 9, 14, 55, 25, 642011))
    lines = [f"{stamp}: Epoch {0}", f"{stamp}: Current learning rate: {0.01}",
             f"{stamp}: train_loss {NAN}", f"{stamp}: val_loss {NAN}",
             f"{stamp}: Epoch time: {1345.72} s", f"{stamp}: ", f"{stamp}: Epoch {1}"]  # fmt: skip
    assert bad(read_all(lines))[:1] == [(0, ["train_loss", "val_loss"])]
    assert bad(scanned(lines))[:1] == [(0, ["train_loss", "val_loss"])]
    logged = ["2024-01-01 10:00:00,123 - INFO - Iteration 7", "  loss: nan", "  acc: 0.5"]
    assert bad(read_all(logged)) == [(7, ["loss"])]


def test_a_count_written_before_what_it_counts_is_the_step() -> None:
    """multiffn-nli (corpus3/dev): `print('%d completed epochs, %d batches' % ..., end='')`
    then its metrics; a rate (`14963 steps/s`) counts nothing."""
    line = (f"{0} completed epochs, {100} batches Average training batch loss: {NAN}        "
            f"Validation loss: {NAN}    Validation accuracy: {0.338244}")  # fmt: skip
    assert [s for s, _ in bad(read_all([line]))] == [100]
    assert bad(read_all([f"after {1200} steps: loss {NAN}, acc {0.1}"])) == [(1200, ["loss"])]
    rate = f"Computation: 14963 steps/s (collection: 6.407s), loss: {NAN}, acc: {0.1}"
    assert [s for s, _ in bad(read_all([rate]))] == [1]
    # PyTorch's word_language_model example (pytorch/examples word_language_model/main.py:
    # `'| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} |
    # ppl {:8.2f}'`): the batch the line is at, not its total
    word_lm = (
        "| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
        "loss {:5.2f} | ppl {:8.2f}"
    )
    line = word_lm.format(1, 200, 2983, 20.0, 11.4, NAN, NAN)
    assert bad(read_all([line])) == [(200, ["loss", "ppl"])]
    assert bad(scanned([line])) == bad(read_all([line]))


def test_old_msvc_infinity() -> None:
    assert bad(read_all(["step 5 | loss: 1.#INF00 | acc: 0.1"])) == [(5, ["loss"])]


@pytest.mark.parametrize("spec", ["04.2f", "05.1f", "06.3f"])
def test_a_non_finite_value_a_zero_padded_format_printed(spec: str) -> None:
    """Python pads `nan` and `inf` with zeros to a format's width (`'{:04.2f}'.format(nan)`
    is `0nan`): LaTeX_OCR_PRO's evaluation line (corpus25/dev) prints its perplexity so; a
    finite value beside it is read as before."""
    line = (
        f"Eval:  BLEU-4 is {0.0:{spec}}  ||  EditDistance is {0.0:{spec}}  ||  "
        f"perplexity is {NAN:{spec}} "
    )
    assert "0nan" in line
    for found in (read_all([line]), scanned([line])):
        assert bad(found) == [(1, ["perplexity"])]
    inf = f"step 3 | loss: {-math.inf:{spec}} | acc: {0.5:{spec}}"
    assert bad(read_all([inf])) == [(3, ["loss"])]
    assert not bad(read_all([f"step 4 | loss: {2.5:{spec}} | acc: {0.5:{spec}}"]))


def test_what_a_sentence_gives_and_what_prose_counts() -> None:
    """`to` before a value names the value a sentence gives (torch's ReduceLROnPlateau:
    `'Epoch {:5d}: reducing learning rate of group {} to {:.4e}.'`); a count in prose
    (`Training for 10000 steps`) is no step the console is at: a record after it naming a
    lower one is read."""
    lr = f"Epoch {10:5d}: reducing learning rate of group {0} to {NAN:.4e}."
    assert [keys for _, keys in bad(read_all([lr]))] == [["to"]]
    found = read_all(["Training for 10000 steps", "{'loss': 0.5, 'learning_rate': 0.1}"])
    assert [f["step"] for k, f in found if k == "step.metrics"] == [1]


def test_json_null_is_a_field_the_record_lacks() -> None:
    """LLaMA-Factory's trainer_log.jsonl (corpus17/dev's control, LlamaFactory#774) writes
    `"reward": null` in every record of a run without rewards, and `"loss": null` in its
    last: no value, not a non-finite one. Python's `None` in `Trainer.log`'s dict is a
    reward nothing could score (TRL) and stays one."""
    record = {"current_steps": 3200, "total_steps": 3235, "loss": 4.4671, "eval_loss": None,
              "reward": None, "learning_rate": 1.4e-08, "epoch": 0.99}  # fmt: skip
    last = dict(record, current_steps=3235, loss=None, learning_rate=None, epoch=1.0)
    assert bad(read_all([json.dumps(record), json.dumps(last)])) == []
    assert bad(read_all([json.dumps(dict(record, loss=NAN))])) == [(3200, ["loss"])]
    assert bad(read_all([str({"loss": 0.5, "reward": None, "epoch": 0.1})])) == [(1, ["reward"])]


def test_an_epoch_s_header_after_finer_steps_is_at_the_step_the_console_is_at() -> None:
    """A header naming an epoch (`Epoch 3`, under a timestamp too) numbers the lines under it
    by the epoch only where nothing finer was counted: after step 1000 its NaN is at step
    1000 -- at 3 the state would take it for a step gone back, and drop it."""
    lines = ["step 1000 | loss: 0.5 | acc: 0.1", "2024-01-01 10:00:00,123 - INFO - Epoch 3",
             "  loss: nan", "  acc: 0.2"]  # fmt: skip
    assert bad(read_all(lines)) == [(1000, ["loss"])]
    assert bad(scanned(lines)) == [(1000, ["loss"])]


def test_a_label_s_count_that_goes_back_numbers_nothing() -> None:
    """slime logs `step {n}: {...}` for its train steps and `rollout {id}: {...}` for its
    rollouts, two counts: a rollout's id below the train step the console is at is no step
    (the state would drop a record whose step went back)."""
    lines = ["step 12: {'train/loss': 0.5, 'train/grad_norm': 0.1}",
             "rollout 4: {'rollout/raw_reward': nan, 'rollout/response_lengths': 512.0}",
             ]  # fmt: skip
    assert bad(read_all(lines)) == [(12, ["rollout/raw_reward"])]


def _keras_bar(current: int, target: int, rest: str) -> str:
    """tf.keras' Progbar line (keras/utils/generic_utils.py, verbose=1): the count padded to
    the target's width, a 30-wide bar, then ` - ` and its values."""
    width = len(str(target))
    done = int(30 * current / target)
    bar = ("=" * (done - 1) + (">" if current < target else "=")) if done else ""
    return f"{current:{width}d}/{target} [{bar}{'.' * (30 - len(bar))}] - {rest}"


def test_a_new_epoch_s_count_that_restarts_is_not_lost(tmp_path: Any) -> None:
    """A per-epoch count restarts (Keras' bar, mmengine's `[2][50/735]`): epoch 2's NaN at
    batch 50 came after epoch 1's finite batch 234. The run's state takes a lower step for
    an old one, behind a later finite one: the record is at the step the console reached,
    and `runwatch diagnose` fires."""
    from runwatch.diagnose import diagnose

    first = _keras_bar(234, 234, "5s 20ms/step - loss: 0.5123 - accuracy: 0.8000")
    lines = ["Epoch 1/2", first, "Epoch 2/2",
             _keras_bar(50, 234, "ETA: 3s - loss: nan - accuracy: 0.1000")]  # fmt: skip
    assert [s for s, _ in bad(read_all(lines))] == [234]
    log = tmp_path / "keras.log"
    log.write_text("\n".join(lines) + "\n")
    fired = {a.rule for a in diagnose([log]).alerts if a.state == "firing"}
    assert fired == {"non_finite_metric"}


@pytest.mark.parametrize(
    "lines",
    [
        # verl's driver step line (`concat_dict_to_str`), then a Ray worker's HF-style dict
        ["(TaskRunner pid=2219) step:100 - actor/pg_loss:0.100 - critic/score/mean:0.500",
         "(WorkerDict pid=2301) {'loss': nan, 'learning_rate': 1e-06}"],
        # torchrun's --tee: rank 0's step line, then rank 1's dict
        ["[rank0]: step 100 | loss: 0.5 | acc: 0.1",
         "[rank1]: {'loss': nan, 'learning_rate': 0.1}"],
    ],
    ids=["ray-worker", "torchrun-rank"],
)  # fmt: skip
def test_a_non_finite_record_from_a_source_behind_the_run_is_not_lost(
    tmp_path: Any, lines: list[str]
) -> None:
    """A source that numbers its records by their order (a worker's dicts) is behind the
    step the run reached by another's lines: its NaN is at that step, where the run's state
    reads it (at step 1 it would be an old step's, behind step 100's finite values)."""
    from runwatch.diagnose import diagnose

    log = tmp_path / "console.log"
    log.write_text("\n".join(lines) + "\n")
    fired = [a for a in diagnose([log]).alerts if a.state == "firing"]
    assert [a.rule for a in fired] == ["non_finite_metric"]
    assert "step 100" in fired[0].summary


def test_a_header_s_block_given_up_for_its_length_is_still_a_record() -> None:
    """The lines under a header are followed up to `MetricLines.MAX_LINES`: a longer block
    (a logger's hundreds of `key: value` lines) is given up there, and what it read is one
    record -- its NaN was lost with it."""
    lines = ["Iteration 7", "  loss: nan", *[f"  metric_{i}: {i}.5" for i in range(250)]]
    assert bad(read_all(lines)) == [(7, ["loss"])]


def test_a_statistic_that_is_zero_over_zero_is_no_failure() -> None:
    """SB3's and baselines' `explained_variance` is `np.nan if var_y == 0` (constant returns,
    common early in sparse-reward tasks), and a std beside its own finite mean is one
    sample's: no measurement of a run going wrong. A std with no mean beside it (SB3's
    policy `train/std`), a variance that is a parameter (baselines' `var_mean`, corpus7/dev)
    and a std beside a mean that is NaN too are read as ever."""
    healthy = sb3_table({"rollout/ep_len_mean": 200.0, "time/iterations": 1,
                         "time/total_timesteps": 2048, "train/approx_kl": 0.01,
                         "train/explained_variance": NAN, "train/loss": 0.5})  # fmt: skip
    assert bad(read_all(healthy)) == []
    assert bad(read_all([str({"loss": 0.1, "reward": 0.5, "reward_std": NAN, "epoch": 0.1})])) == []
    assert bad(read_all([str({"loss": 0.1, "train/std": NAN, "epoch": 0.1})])) == [
        (1, ["train/std"])
    ]
    assert bad(read_all(["kl_oldnew 0.0 var_mean nan total_loss 2.38313"])) == [(1, ["var_mean"])]
    assert bad(read_all(["step 3 | loss: nan | loss_std: nan"])) == [(3, ["loss", "loss_std"])]
    # darknet's region line for a scale with no object in the batch (AlexeyAB/darknet#4529,
    # corpus32/dev): means over a count of 0; an infinity beside it, or a NaN beside a
    # counter of something else, is read as ever
    region = "Region {} Avg IOU: -nan, Class: -nan, Obj: -nan, No Obj: 0.000000, .5R: -nan, "
    assert bad(read_all(["1: 2.1, 2.3 avg", region.format(94) + ".75R: -nan,  count: 0"])) == []
    assert bad(read_all(["step 3 | loss: inf | count: 0"])) == [(3, ["loss"])]
    assert bad(read_all(["step 3 | loss: nan | incr_count: 0"])) == [(3, ["loss"])]


def test_tensorflow_s_nan_hook_sentence_is_the_loss_s_nan() -> None:
    """TensorFlow's NanTensorHook logs `failure_message = "Model diverged with loss = NaN."`
    (tensorflow/python/training/basic_session_run_hooks.py) -- at ERROR before it raises
    NanLossDuringTrainingError, at WARNING when `fail_on_nan_loss=False` and training goes
    on: the loss's NaN, at the step the console is at; the error's own line is the failure
    reader's."""
    lines = ["INFO:tensorflow:loss = 0.52, step = 100 (10.5 sec)",
             "ERROR:tensorflow:Model diverged with loss = NaN.",
             "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: "
             "NaN loss during training."]  # fmt: skip
    assert bad(read_all(lines)) == [(100, ["loss"])]
    assert bad(scanned(lines)) == [(100, ["loss"])]


def test_a_non_finite_value_padded_to_its_format_s_width() -> None:
    """PaddleOCR#11031 (corpus19/dev), as posted: ppocr's `'{}: {:x<6f}'.format(k, v)`
    (ppocr/utils/stats.py) pads a value shorter than six characters with `x` -- NaN is
    `nanxxx` -- at the global step the line names; a finite line has no padding."""
    line = ("[2023/10/09 10:49:12] ppocr INFO: epoch: [986/2000], global_step: {step}, lr: "
            "0.000516, acc: 0.000000, norm_edit_dis: 0.000000, CTCLoss: {v}, SARLoss: {v}, "
            "loss: {v}, avg_reader_cost: 0.00013 s, avg_batch_cost: 0.30189 s, avg_samples: "
            "128.0, ips: 423.98978 samples/s, eta: 2 days, 17:48:30")  # fmt: skip
    lines = [line.format(step=737790, v="1.234567"), line.format(step=737800, v="nanxxx")]
    got = [(737800, ["CTCLoss", "SARLoss", "loss"])]
    assert bad(read_all(lines)) == got
    assert bad(scanned(lines)) == got
    assert bad(read_all([line.format(step=1, v="-infxx")])) == [(1, ["CTCLoss", "SARLoss", "loss"])]


def test_a_console_that_names_its_metrics_and_steps_in_chinese() -> None:
    """Training scripts' own format strings as public repositories hold them (the code corpus
    of the search tool: `print(f"\\n轮次: {epoch + 1}, 批次: {i + 1}, 损失: {avg_loss:.4f},
    acc准确率:{acc:.4f}, f1分数:{f1:.4f}")`, `print(f'周期 [{epoch+1}/{num_epochs}], 步骤 [{i+1}/
    {len(train_loader)}], 损失: {loss.item():.4f}')`, `print(f"轨迹: {traj_idx+1}, 回合:
    {turn_idx+1}, 损失: ..., 策略损失: ..., 熵损失: ...")`) rendered with a NaN loss: the key is
    the line's own word, the step its batch, step or episode."""
    lines = [
        f"轮次: {3}, 批次: {100}, 损失: {NAN:.4f}, acc准确率:{0.5:.4f}, f1分数:{0.4:.4f}",
        f"周期 [{1}/{10}], 步骤 [{100}/{600}], 损失: {NAN:.4f}",
        f"轨迹: {2}, 回合: {3}, 损失: {NAN:.4f}, 策略损失: {NAN:.4f}, 熵损失: {0.1:.4f}",
    ]
    expected = [[(100, ["损失"])], [(100, ["损失"])], [(3, ["损失", "策略损失"])]]
    for line, want in zip(lines, expected, strict=True):
        assert bad(read_all([line])) == want
        assert bad(scanned([line])) == want


def _nemo_rl_step(step: int, reward: float) -> list[str]:
    """NeMo-RL's GRPO loop (nemo_rl/algorithms/grpo.py, 7ea279abf): a step's banner, then
    `📊 Training Results:` and one `  • Name: value` line each, the mean reward as
    `Avg Reward`."""
    return [f"{'=' * 25} Step {step}/100 {'=' * 25}", "", "📊 Training Results:",
            "  • Loss: 0.0123", f"  • Avg Reward: {reward:.4f}",
            "  • Mean Generation Length: 123.0000"]  # fmt: skip


def test_a_mean_reward_named_in_words_is_the_step_s_reward() -> None:
    """A console with none of the reward keys names its mean reward in words: NeMo-RL's `Avg
    Reward` at 0 five steps running is zero reward; a reward's spread or its best is none."""
    lines = [line for s in range(3, 8) for line in _nemo_rl_step(s, 0.0)]
    rewards = [(f["step"], f["mean"]) for k, f in read_all(lines) if k == "reward"]
    assert rewards == [(s, 0.0) for s in range(3, 8)]
    assert [(f["step"], f["mean"]) for k, f in scanned(lines) if k == "reward"] == rewards
    for key in ("reward_std", "max_reward", "Avg Filtered Reward", "reward model loss",
                "avg_reward", "mean_reward"):  # fmt: skip
        got = read_all([str({"loss": 0.1, key: 0.0, "step": 4})])
        assert [k for k, _ in got if k == "reward"] == [], key
    # a classic RL script's episode log at 0 (a sparse reward's healthy start) is no step's
    episodes = [f"Episode: {e}, Avg Reward: 0.00, Epsilon: 0.95" for e in range(10, 120, 10)]
    assert [k for k, _ in read_all(episodes) if k == "reward"] == []


#: kohya_ss#55 (corpus52/dev, a control), as posted: numpy's warnings that `np.mean` averaged
#: an empty array, its source line under each, then the script's summary of that average
KOHYA_EMPTY_MEAN = [
    r"C:\kohya_ss\venv\lib\site-packages\numpy\core\fromnumeric.py:3464: RuntimeWarning: Mean "
    "of empty slice.",
    "  return _methods._mean(a, axis=axis, dtype=dtype,",
    r"C:\kohya_ss\venv\lib\site-packages\numpy\core\_methods.py:192: RuntimeWarning: invalid "
    "value encountered in scalar divide",
    "  ret = ret.dtype.type(ret / rcount)",
    "mean ar error (without repeats): nan",
]


def test_a_nan_just_after_numpy_s_empty_mean_warning_is_no_metric() -> None:
    """The NaN an empty array's mean prints is an average of nothing; the same line without
    the warning is a lone NaN metric. numpy warns with stacklevel 2: `np.mean`'s line names
    fromnumeric.py, `np.nanmean`'s (every value NaN) and `ndarray.mean()`'s the script's own
    file -- no empty array told from NaN data, no excuse."""
    assert bad(read_all(KOHYA_EMPTY_MEAN)) == []
    assert bad(scanned(KOHYA_EMPTY_MEAN)) == []
    assert bad(read_all(KOHYA_EMPTY_MEAN[-1:])) == [(1, ["mean ar error (without repeats)"])]
    nanmean = ["/app/train.py:88: RuntimeWarning: Mean of empty slice", KOHYA_EMPTY_MEAN[-1]]
    assert bad(read_all(nanmean)) == [(1, ["mean ar error (without repeats)"])]
    # a record that names its step is the run's, warning or not
    stepped = [KOHYA_EMPTY_MEAN[0], "step 5: loss nan, lr 0.1"]
    assert bad(read_all(stepped)) == [(5, ["loss"])]
    # a trainer's dict (no step of its own) of several metrics is the run's, warning or not
    trainer = [KOHYA_EMPTY_MEAN[0], str({"loss": NAN, "grad_norm": NAN, "epoch": 0.5})]
    assert bad(read_all(trainer)) == [(1, ["grad_norm", "loss"])]
    # and the warning is forgotten after a few lines: a NaN far later is a metric's
    late = [KOHYA_EMPTY_MEAN[0], *(f"Epoch {e} done" for e in range(1, 20)),
            KOHYA_EMPTY_MEAN[-1]]  # fmt: skip
    assert [keys for _, keys in bad(read_all(late))] == [["mean ar error (without repeats)"]]


def icefall_line(batch: int, loss: float, tot_loss: float) -> str:
    """icefall's training loop (k2-fsa/icefall egs/*/ASR/*/train.py: `f"Epoch {e}, batch
    {b}, loss[{loss_info}], tot_loss[{tot_loss}], batch size: ..."`; its MetricsTracker
    prints each `key=value` with `.4g` and `over N frames. ` last): the batch's losses and
    the running totals name the same keys, their labels say which."""

    def tracker(value: float) -> str:
        return (
            f"[loss={value:.4g}, simple_loss=1.08, pruned_loss={value:.4g}, over 11669.00 frames. ]"
        )

    return (
        f"2023-04-18 21:26:04,349 INFO [train.py:966] (3/4) Epoch 0, batch {batch}, "
        f"loss{tracker(loss)}, tot_loss{tracker(tot_loss)}, batch size: 361, lr: 5.00e-05"
    )


def test_icefall_s_running_totals_are_told_from_the_batch_s_losses() -> None:
    """The running total's `inf` is not lost behind the batch's finite `loss` of the same
    name (corpus55: icefall#1011)."""
    lines = [icefall_line(450, 1.2, 2.3), icefall_line(500, 1.196, math.inf)]
    for found in (read_all(lines), scanned(lines)):
        assert bad(found) == [(500, ["tot_loss/loss", "tot_loss/pruned_loss"])]
    # a bracket without pairs in it keeps its reading (mmengine's, an iteration's)
    assert bad(read_all(["iter[ 14/ 15] loss: nan"])) == [(14, ["loss"])]


@pytest.mark.parametrize(
    ("line", "read"),
    [
        # the keys two groups share carry their group's label; the rest, a step's, as written
        (
            "loss[loss=1.2, lr=0.1], tot_loss[loss=inf]",
            "loss[loss/loss=1.2, lr=0.1], tot_loss[tot_loss/loss=inf]",
        ),
        (
            "train[step=100, loss=0.5], eval[step=100, loss=0.4]",
            "train[step=100, train/loss=0.5], eval[step=100, eval/loss=0.4]",
        ),
        ("iter[ 14/ 15] a[k=1], b[k=2]", "iter[ 14/ 15] a[a/k=1], b[b/k=2]"),
        # one group, or groups naming different keys: as written (a setting's bounds)
        ("Epoch 1 step 100 loss=0.5 lr[min=0, max=inf]", None),
        ("a[x=1], b[y=2]", None),
        (
            "total_loss[loss=1], tot_loss[loss=inf]",
            "total_loss[total_loss/loss=1], tot_loss[tot_loss/loss=inf]",
        ),
    ],
)
def test_labelled_groups_name_the_keys_they_share(line: str, read: str | None) -> None:
    assert labelled_groups(line) == (read if read is not None else line)


def test_a_setting_s_bounds_in_a_group_stay_a_setting() -> None:
    """`lr[min=0, max=inf]` is a range's bound, no measurement (the review's probe)."""
    assert bad(read_all(["Epoch 1 step 100 loss=0.5 lr[min=0, max=inf]"])) == []

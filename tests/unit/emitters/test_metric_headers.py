"""The step a console names above a block of metrics (issue 41): a header of a few words
before its step (`Eval metrics at step 6:`), and a two-column table whose first row is its
step (Spinning Up's `| Epoch | 3 |`). A NaN under either is at that step, in
`runwatch diagnose`'s reading and in `runwatch watch`'s scanner alike."""

from __future__ import annotations

import math

from helpers import non_finite as bad
from helpers import read_all, scanned

NAN = math.nan


def test_a_header_of_three_words_before_its_step() -> None:
    """https://github.com/akanazawa/fpo/issues/4 (FPO on MuJoCo playground's HumanoidWalk:
    the eval reward NaN from eval step 6 on), as posted."""
    lines = [
        "Eval metrics at step 0:",
        "  Reward: mean=3.06, min=1.92, max=10.06, std=1.38",
        "  Steps:  mean=1000.0, min=1000.0, max=1000.0, std=0.0",
        "Eval metrics at step 6:",
        "  Reward: mean=nan, min=nan, max=nan, std=nan",
        "  Steps:  mean=0.0, min=0.0, max=0.0, std=0.0",
        "Eval metrics at step 13:",
        "  Reward: mean=nan, min=nan, max=nan, std=nan",
        "  Steps:  mean=0.0, min=0.0, max=0.0, std=0.0",
    ]
    got = bad(read_all(lines))
    assert got
    assert got[0] == (6, ["max", "mean", "min", "std"])
    assert bad(scanned(lines)) == got


def spinup_table(rows: list[tuple[str, float]]) -> list[str]:
    """Spinning Up's `Logger.dump_tabular` (openai/spinningup spinup/utils/logx.py):
    `fmt = "| " + "%" + "%d" % max_key_len + "s" + " | %15s |"`, `"%8.3g" % val`, a rule of
    `22 + max_key_len` dashes above and below."""
    width = max(15, *(len(k) for k, _ in rows))
    fmt = "| %" + str(width) + "s | %15s |"
    rule = "-" * (22 + width)
    return [rule, *(fmt % (k, "%8.3g" % v) for k, v in rows), rule]  # noqa: UP031 (its format)


def _ppo_epoch(epoch: int, loss_v: float) -> list[tuple[str, float]]:
    """The rows spinup/algos/pytorch/ppo/ppo.py logs each epoch, in its order."""
    return [("Epoch", epoch), ("AverageEpRet", -171.0), ("StdEpRet", 40.2),
            ("MaxEpRet", -90.1), ("MinEpRet", -260.3), ("EpLen", 200.0),
            ("AverageVVals", -3.1), ("StdVVals", 1.2), ("MaxVVals", 0.4), ("MinVVals", -6.0),
            ("TotalEnvInteracts", 4000 * (epoch + 1)), ("LossPi", 0.01), ("LossV", loss_v),
            ("DeltaLossPi", -0.01), ("DeltaLossV", -2.0), ("Entropy", 1.4), ("KL", 0.01),
            ("ClipFrac", 0.1), ("StopIter", 79), ("Time", 30.2 * (epoch + 1))]  # fmt: skip


def test_a_two_column_table_whose_first_row_is_its_step() -> None:
    lines = [line for e in range(3) for line in spinup_table(_ppo_epoch(e, 40.1))]
    lines += ["Warning: trajectory cut off by epoch at 12 steps."]
    lines += spinup_table(_ppo_epoch(3, NAN))
    assert bad(read_all(lines)) == [(3, ["LossV"])]
    assert bad(scanned(lines)) == [(3, ["LossV"])]
    # tables back to back: each its epoch's record (the next table's step row ends one)
    lines = [line for e in range(3) for line in spinup_table(_ppo_epoch(e, NAN if e == 1 else 4.0))]
    assert bad(read_all(lines)) == [(1, ["LossV"])]
    assert bad(scanned(lines)) == [(1, ["LossV"])]
    # healthy epochs give nothing, whichever row names the step
    healthy = [line for e in range(3) for line in spinup_table(_ppo_epoch(e, 40.1))]
    assert bad(read_all(healthy)) == []
    assert bad(read_all(["| step | 10 |", "| grad_norm | 0.5 |"])) == []


def test_a_record_that_opens_ends_the_block_held_before_it() -> None:
    """RSL-RL's iteration block as https://github.com/isaac-sim/IsaacLab/issues/1999 posts it
    (`Value function loss: inf` under `Learning iteration 8391/10000`), then -- composed here,
    not from that console -- a markdown table of results naming its step, as a script prints
    one: the table's header ends the block, whose record keeps its inf (it was dropped when
    the table was opened over it)."""
    block = [
        "################################",
        "                     Learning iteration 8391/10000",
        "",
        "                       Computation: 14963 steps/s (collection: 6.407s, learning",
        "0.163s)",
        "               Value function loss: inf",
        "                    Surrogate loss: 0.0000",
        "             Mean action noise std: 0.56",
        "                 Mean total reward: 25.66",
        "               Mean episode length: 1000.00",
        "Episode_Reward/track_lin_vel_xy_exp: 1.2263",
    ]
    table = ["| step | success_rate | mean_reward |", "|------|--------------|-------------|",
             "| 8391 | 0.91         | 25.66       |"]  # fmt: skip
    assert bad(read_all(block)) == [(8391, ["Value function loss"])]
    assert bad(read_all(block + table)) == [(8391, ["Value function loss"])]
    assert bad(scanned(block + table)) == [(8391, ["Value function loss"])]


#: https://github.com/allenai/OLMo/issues/692 (OLMo pre-training: the loss falls to 0.0 in
#: three steps, all finite), as posted: olmo/train.py's `log_metrics_to_console` logs a
#: `[step=N/M,epoch=E]` prefix after the logging record's own (host:rank, module:line, level),
#: then one indented `name=value` line per metric, values over 1000 with thousands separators
OLMO = [
    "2024-08-06 09:59:26.181 intern-studio-160750:0  olmo.train:908  INFO    "
    "[step=1/739328,epoch=0]",
    "    optim/total_grad_norm=231.7",
    "    train/CrossEntropyLoss=12.18",
    "    train/Perplexity=195,153",
    "    throughput/total_tokens=1,048,576",
    "    throughput/total_training_Gflops=5,103,640",
    "    throughput/total_training_log_Gflops=15.45",
    "    System/Peak GPU Memory (MB)=46,911",
    "2024-08-06 10:00:05.520 intern-studio-160750:0  olmo.train:908  INFO    "
    "[step=2/739328,epoch=0]",
    "    optim/total_grad_norm=0.0002",
    "    train/CrossEntropyLoss=1.7872662283480167e-06",
    "    train/Perplexity=1.000",
    "    throughput/total_tokens=2,097,152",
    "    throughput/total_training_Gflops=10,207,281",
    "    throughput/total_training_log_Gflops=16.14",
    "    throughput/device/tokens_per_second=26,668",
    "    throughput/device/batches_per_second=0.0254",
    "    System/Peak GPU Memory (MB)=53,695",
]  # fmt: skip


def _olmo_nan_step(step: int) -> list[str]:
    """OLMo's record for a step whose loss is NaN: its `format_float` writes a NaN (no
    comparison holds) with `f"{value:.4f}"`, `nan`."""
    return [
        f"2024-08-06 10:00:44.815 intern-studio-160750:0  olmo.train:908  INFO    "
        f"[step={step}/739328,epoch=0]",
        "    optim/total_grad_norm=nan",
        "    train/CrossEntropyLoss=nan",
        "    train/Perplexity=nan",
        "    throughput/total_tokens=3,145,728",
        "    throughput/device/tokens_per_second=26,676",
    ]


def test_a_logging_record_whose_message_is_its_counters_heads_its_metrics() -> None:
    """Each `[step=N/M,epoch=E]` record is a header: the lines under it are that step's,
    numbers with separators among them; the prefix's `host:0` and `module:908` are no
    metrics."""
    found = read_all(OLMO)
    steps = [(f["step"], f["metrics"]) for kind, f in found if kind == "step.metrics"]
    assert [s for s, _ in steps] == [1, 2]
    assert steps[0][1]["train/Perplexity"] == 195153
    assert steps[1][1]["throughput/total_tokens"] == 2097152
    assert len(steps[1][1]) == 9
    assert not any("olmo.train" in m or "intern-studio-160750" in m for _, m in steps)
    lines = OLMO + _olmo_nan_step(3)
    got = [(3, ["optim/total_grad_norm", "train/CrossEntropyLoss", "train/Perplexity"])]
    assert bad(read_all(lines)) == got
    assert bad(scanned(lines)) == got


def _composer(progress: str, metrics: dict[str, float]) -> list[str]:
    """Composer's console logger (mosaicml/composer composer/loggers/console_logger.py,
    `log_to_console`): the progress -- `[epoch=E][batch=B/N]` for a duration in epochs,
    `[batch=B/N]` for one in batches (`[{unit}={now}/{total}]`) -- then `:` and one
    `\\n\\t Train {name}: {value}` line per metric."""
    return [f"{progress}:", *(f"\t Train {k}: {v}" for k, v in metrics.items())]


def test_a_batch_counter_alone_heads_its_metrics() -> None:
    """A run whose duration is counted in batches names its batch and nothing else on its
    header; the lines under it are that batch's -- as under an epoch and a batch."""
    for progress in ("[batch={}/64]", "[epoch=1][batch={}/64]"):
        lines = [
            *_composer(progress.format(16), {"loss/train/total": 2.31, "lr-DecoupledAdamW": 1e-4}),
            *_composer(progress.format(17), {"loss/train/total": NAN, "lr-DecoupledAdamW": 1e-4}),
        ]
        got = [(17, ["Train loss/train/total"])]
        assert bad(read_all(lines)) == got, progress
        assert bad(scanned(lines)) == got, progress
    # a batch with no total is a configuration's size, no header: a limit under it is none
    assert bad(read_all(["config:", "  batch: 64", "  grad_clip: inf"])) == []
    assert bad(read_all(["config:", "  batch: 64", "  temperature: nan"])) == []


def test_a_batch_named_in_prose_numbers_the_record_after_it() -> None:
    """KotlinDL's custom callbacks (kotlindl#8, corpus32/dev), as posted: `Training batch 64
    begins.` names the batch the logger's `Batch stat: { ... }` record after it is of; the
    reader and the scanner both see the batch's line."""
    lines = [
        "Training batch 64 begins.",
        "21:49:56.101 [main] DEBUG api.keras.Sequential - Batch stat: { lossValue: NaN "
        "metricValue: 0.082 }",
    ]
    assert bad(read_all(lines)) == [(64, ["lossValue"])]
    assert bad(scanned(lines)) == [(64, ["lossValue"])]

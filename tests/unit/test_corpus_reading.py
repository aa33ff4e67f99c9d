"""How `runwatch diagnose` reads the corpora of real consoles (issue 41, tests/fixtures/consoles/
corpus/, corpus2/ and corpus3/): each development part asserted exactly -- every label met, every
control silent, and each excerpt no reader can place (or control it false-alerts on) held to what
it fires now, with the reason -- and each held-out part read whole without a crash. Their figures
are reported by scripts/corpus_report.py, never asserted: they are not tuned on, so no test here
looks at their labels or names one of their files."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSOLES = ROOT / "tests" / "fixtures" / "consoles"
CORPORA = ("corpus", "corpus2", "corpus3")
DEV: dict[tuple[str, str], dict[str, Any]] = {
    (corpus, ident): entry
    for corpus in CORPORA
    for ident, entry in tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text()).items()
}


def _report() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "corpus_report", ROOT / "scripts" / "corpus_report.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_report"] = module
    spec.loader.exec_module(module)
    return module


REPORT = _report()

#: development excerpts no general rule reads (yet): the rules they fire instead of their
#: labels', and why. A change that reads one fails here too -- then it moves out of this list.
MISSES: dict[tuple[str, str], tuple[list[str], str]] = {
    ("corpus", "exception_roll_actor_worker_error_traceback"): (
        [], "ROLL's decorator logs a traceback at ERROR and the paste cuts it before its "
        "exception line: nothing names the exception or says it was uncaught"),
    ("corpus", "fatal_prime_rl_verifiers_connection_error_exiting"): (
        [], "loguru's `An error has been caught in function '_run'` (its catch decorator, after "
        "which a program may go on) and a traceback cut before its exception line"),
    ("corpus", "nccl_c10d_tcpstore_timeouterror_backtick"): (
        ["collective_timeout"], "the TimeoutError follows a code line that lost its "
        "indentation (`return TCPStore(`), no frames, and names a builtin exception: no "
        "traceback to read"),
    ("corpus", "nccl_llamafactory_line_numbered_flight_recorder"): (
        [], "only the flight recorder's wait and torch's `Some NCCL operations have failed or "
        "timed out` -- which ProcessGroupNCCL writes for an NCCL error as for a timeout -- and "
        "no watchdog line naming a timed-out collective"),
    ("corpus", "stalled_horovod_ready_ranks_after_bar"): (
        [], "Horovod's stall warning (ranks that did not submit a tensor) has no reader, and "
        "one warning shows a stall of its check time (60 s), short of ranks_stalled's 300 s"),
    ("corpus", "stalled_horovod_stall_inspector_mpirun"): (
        [], "Horovod's stall inspector has no reader (its list of ranks is cut here), and one "
        "report shows 60 s of a stall, short of ranks_stalled's 300 s"),
    ("corpus2", "stalled_horovod_missing_rank0_broadcast"): (
        [], "Horovod's stall inspector (`[missing ranks: 0]` per op) has no reader: it names "
        "the ranks missing, not the world size a rank's phase needs, and one report shows "
        "60 s of a stall, short of ranks_stalled's 300 s"),
    # corpus3's development part at its baseline (the reader on main at the split, d8923a5):
    # the next reader pass starts from these, each listed with the shape it misses
    ("corpus3", "exception_dreambooth_bar_glued_traceback_illegal_memory"): (
        [], "the bar refreshes after the RuntimeError and accelerate's traceback head follows, "
        "so the traceback (its head glued to a bar after a markdown `**`) reads as survived"),
    ("corpus3", "exception_evo_bare_illegal_memory_access_dsa_note"): (
        [], "a bare builtin `RuntimeError: CUDA error: an illegal memory access` and torch's "
        "notes, no frames: an exception line without frames or module is not read"),
    ("corpus3", "exception_higherhrnet_spawn_process_sigkill_tabs"): (
        [], "torch.multiprocessing.spawn's plain `Exception: process 1 terminated with signal "
        "SIGKILL` after frames: the bare `Exception` name is not taken for an exception line"),
    ("corpus3", "exception_udify_allennlp_indented_bar_glued_traceback"): (
        [], "the whole paste is indented four spaces (a markdown code block), so the exception "
        "line is indented too and the traceback grammar finds no unindented exception line"),
    ("corpus3", "fatal_argo_script_killed_pyenv_python"): (
        [], "the shell's job report `script: line 10:    93 Killed   pyenv exec python ...` "
        "(a SIGKILL) has no reader"),
    ("corpus3", "fatal_shell_killed_after_epoch_lines"): (
        [], "a bare `Killed` from the shell after the last Epoch line (the process SIGKILLed) "
        "has no reader"),
    ("corpus3", "fatal_skyrl_asyncvllm_enginecore_failed_odd_fence"): (
        [], "vLLM's `EngineCore failed to start.` at ERROR under a Ray actor prefix is not a "
        "catalogue entry, and its logged traceback is cut before the exception line"),
    ("corpus3", "fatal_skyrl_vllm_enginecore_failed_nested_prefix_repeated"): (
        [], "vLLM's `EngineCore failed to start.` under two nested prefixes is not a catalogue "
        "entry, and its logged traceback is cut before the exception line"),
    ("corpus3", "fatal_srun_tasks_out_of_memory_step_cancelled"): (
        [], "SLURM's `slurmstepd: ... oom_kill event`, `srun: error: ...: tasks 1-3: Out Of "
        "Memory` and `*** STEP ... CANCELLED` lines are not in the catalogue"),
    ("corpus3", "fatal_tgi_shard_signal4_cannot_start"): (
        [], "text-generation-inference's launcher (`Shard process was signaled to shutdown "
        "with signal 4`, `Error: ShardCannotStart`, `Shard 0 failed to start`) has no entry"),
    ("corpus3", "fatal_torch_dataloader_workers_segfault_gdb_threads"): (
        [], "the DataLoader worker's `ERROR: Unexpected segmentation fault encountered in "
        "worker.` (torch's signal handler) is not in the catalogue"),
    ("corpus3", "fatal_trtllm_terminate_tllmexception_mpi_backtrace"): (
        [], "`terminate called after throwing an instance of 'tensorrt_llm::common::"
        "TllmException'` and its numbered C++ backtrace: only c10's terminates are read"),
    ("corpus3", "healthy_espnet2_batch_report_grad_nan_skips_ctc"): (
        ["non_finite_metric"], "false alert: ESPnet2's `1/2 samples got nan grad. These were "
        "ignored for CTC loss.` is read as a metric `samples got` = nan (the grad-norm skips "
        "go on, one at a time)"),
    ("corpus3", "nan_bigdl_distrioptimizer_loss_is_infinity"): (
        [], "BigDL's prose `... Loss is Infinity. Current learning rate is ...` (`key is "
        "value.` sentences, `[Iteration N]`) is not a metric syntax the reader knows"),
    ("corpus3", "nan_deepspeech_glog_letter_training_epoch0_loss_inf"): (
        [], "`I Training of Epoch 0 - loss: inf` has one pair only; a metric line needs two"),
    ("corpus3", "nan_hf_sft_eval_dict_backticked"): (
        [], "an HF Trainer dict pasted inline between backticks (`{'eval_loss': nan, ...}`) "
        "after a line of prose is not read as a metric dict"),
    ("corpus3", "nan_keras_callback_epoch_block_cr_garbled"): (
        [], "a callback's `Epoch    :  8` / `LOSS     :  nan` block, one padded pair per line, "
        "is not read (one pair per line, no step key on the value's line)"),
    ("corpus3", "nan_lwnet_cycle_bar_slash_pairs"): (
        [], "slash-joined values (`Train/Val Loss: nan/nan`, postfix `tr_loss_lr=nan/0.000002`) "
        "are not numbers the reader parses"),
    ("corpus3", "nan_mlagents_quoted_mean_reward_empty_slice"): (
        [], "ML-Agents' `Mean Reward: nan` lines under a markdown quote `> `, one pair a line, "
        "are not read"),
    ("corpus3", "nan_pix2pix_tf_progress_block_discrim_loss"): (
        [], "a `progress  epoch 50  step 602 ...` header then `discrim_loss nan` lines "
        "(`name value`, no colon) is not read as a block of metrics"),
    ("corpus3", "nan_radar_detector_mean_training_loss_per_epoch"): (
        [], "`Mean Training loss : nan` alone on its line (one pair, a spaced colon) between "
        "epoch bars is not read"),
    ("corpus3", "nan_rllib_yaml_episode_reward_mean_dot_nan"): (
        [], "RLlib's pretty-printed YAML writes NaN as `.nan` (`episode_reward_mean: .nan`), "
        "one key a line: neither the spelling nor the shape is read"),
    ("corpus3", "nan_text_gcn_epoch_val_loss_tensor_repr"): (
        [], "`Epoch: 0111 train_loss= 0.00122 ... val_loss= nan` pairs with a space after `=` "
        "are not read as metric pairs"),
    ("corpus3", "nan_wenet_debug_train_batch_loss_inf_recovers"): (
        [], "WeNet's `DEBUG TRAIN Batch 0/4000 loss inf loss_att 78.1 loss_ctc inf` (space-"
        "separated `name value` pairs) is not read"),
    ("corpus3", "stalled_sglang_scheduler_watchdog_timeout_quoted"): (
        [], "SGLang's scheduler watchdog (`Watchdog timeout (self.watchdog_timeout=300)` after "
        "dumping a batch of 1) has no reader, and the lines are quoted with `> `"),
}  # fmt: skip


@pytest.mark.parametrize(("corpus", "ident"), sorted(DEV), ids=[f"{c}/{i}" for c, i in sorted(DEV)])
def test_a_development_excerpt_raises_exactly_what_its_labels_say(corpus: str, ident: str) -> None:
    entry = DEV[corpus, ident]
    result = REPORT.run_one(CONSOLES / corpus / "dev" / f"{ident}.log", entry["rules"])
    assert result.crash is None, result.crash
    expected, why = MISSES.get((corpus, ident), (sorted(entry["rules"]), ""))
    assert result.fired == sorted(expected), (why or "labels not met", result.summaries)
    if not entry["rules"] and (corpus, ident) not in MISSES:
        assert result.fired == [], "a healthy control raised an alert"


def test_every_listed_miss_is_a_development_excerpt_with_a_reason() -> None:
    assert set(MISSES) <= set(DEV)
    assert all(why for _, why in MISSES.values())
    # a control on the list is a false alert at the baseline and says so
    for key, (fired, why) in MISSES.items():
        if not DEV[key]["rules"]:
            assert fired, key
            assert why.startswith("false alert"), key


@pytest.mark.parametrize("corpus", CORPORA)
def test_the_held_out_part_is_read_whole_without_a_crash(corpus: str) -> None:
    """Read, not scored: its figures are scripts/corpus_report.py's to print."""
    files = sorted((CONSOLES / corpus / "heldout").glob("*.log"))
    assert len(files) >= 30
    crashes = sum(REPORT.run_one(path, []).crash is not None for path in files)
    assert crashes == 0, f"{crashes} held-out excerpts of {corpus} crashed the reader"

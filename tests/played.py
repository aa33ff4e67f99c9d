"""The consoles the suite plays through `runwatch watch` into one `runwatch serve`, and what
each must raise: the users' consoles (tests/fixtures/consoles/field/) and a representative
part of the corpus' development part (corpus/dev/), with a few of the other corpora's.
tests/e2e/test_field_consoles.py plays
them with real processes; tests/unit/service/test_shared_serve.py plays the events they make
into one service in process, on a loaded start's delivery times.

A console whose alerts need time to pass with the output still open (a collective's settle,
an engine stalled for a while) is played by a command that prints it and then hangs, as the
job did (`hangs`); the others by a command that prints it and exits, as scripts/corpus_watch.py
plays every development excerpt. The service runs with short thresholds (`CONFIG`): what is
tested is the path, the defaults are the rules' own tests'."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from scripts.corpus_watch import config
from scripts.corpus_watch import hangs as played_hung

CONSOLES = Path(__file__).resolve().parent / "fixtures" / "consoles"
FIELD = CONSOLES / "field"
CORPUS = CONSOLES / "corpus"
#: a representative part of the corpus' development part (issue 41): each shape the reader
#: by grammar reads -- metric lines, tables, overflow skips, tracebacks without their head,
#: padded, under a cut prefix, uncaught by Python's words -- and the controls that trap it
CORPUS_SUBSET = (
    "nan_deepspeed_chat_act_loss_inf_pipes", "nan_megatron_deepspeed_grad_norm_pipes",
    "nan_xtuner_mmengine_grad_norm", "nan_loguru_bracket_fields_loss_step",
    "nan_rlpyt_tabular_loss_average", "nan_trl_grpo_notebook_table_kl",
    "nan_tf_train_iter_loss_scale_norm", "nan_chatglm_ppo_dict_after_tqdm",
    "exception_nemo_rl_actor_died_padded_terminal_wrap",
    "exception_rllib_tune_error_after_worker_crash",
    "exception_unsloth_ipython_runtimeerror_header", "exception_verl_thread_loop_forever",
    "fatal_vllm_ray_executor_pyarrow", "exception_ray_malib_actor_died_headless",
    "exception_openrlhf_job_failed_module", "healthy_apex_overflow_then_deprecation",
    "healthy_deepspeed_overflow_recovered", "healthy_megatron_bert_fp16_skipped_warmup",
    "healthy_unsloth_grpo_table_negative_rewards", "healthy_ragen_reward_fn_error_noncritical",
    "healthy_vllm_v0_idle_engine_zero_throughput", "healthy_megatron_llm_bad_grad_norm_skipped",
)  # fmt: skip
#: ... and of the other corpora's development parts: consoles that end inside a wait their
#: framework declared (Horovod's stall inspector, torch's store-based barrier, vLLM's message
#: queue while it serves), which `runwatch diagnose` takes as ended in their hang and `runwatch
#: watch` fires on the live clock while the command stays hung; one whose wait ends (a
#: control)
OTHER_SUBSETS = {
    "corpus": ("stalled_horovod_ready_ranks_after_bar",),
    "corpus2": ("stalled_horovod_missing_rank0_broadcast",),
    "corpus3": ("stalled_sglang_scheduler_watchdog_timeout_quoted",),
    "corpus13": ("fail_rvt_lightning_two_gpu_store_barrier_rank0_alone_hydra_log",
                 "fail_vllm_ascend_offline_generate_stuck_0_of_4_shm_broadcast_minutes",
                 "control_vllm_v0_mqllmengine_waiting_for_output_during_startup"),
}  # fmt: skip


def _dev(corpus: str) -> dict[str, dict[str, Any]]:
    return tomllib.loads((CONSOLES / corpus / "MANIFEST.toml").read_text())


_DEV = _dev("corpus")
#: name -> (file, what it must raise and the evidence, the header lines to leave out: a
#: corpus file's `# what happened` says the failure in words, and is not the console)
PLAYED: dict[str, tuple[Path, dict[str, Any], int]] = {
    **{name: (FIELD / f"{name}.log", entry, 0)
       for name, entry in tomllib.loads((FIELD / "MANIFEST.toml").read_text()).items()},
    **{name: (CORPUS / "dev" / f"{name}.log", _DEV[name], 2) for name in CORPUS_SUBSET},
    **{name: (CONSOLES / corpus / "dev" / f"{name}.log", _dev(corpus)[name], 2)
       for corpus, names in OTHER_SUBSETS.items() for name in names},
}  # fmt: skip
MANIFEST: dict[str, dict[str, Any]] = {name: entry for name, (_, entry, _) in PLAYED.items()}
#: the rules config of the service they are played into: short thresholds, as
#: scripts/corpus_watch.py plays every development excerpt
CONFIG = config()


def hangs(name: str) -> bool:
    """Whether the console is played by a command that prints it and then hangs: its labels
    name a rule that needs time with the output open, or it is an engine's control
    (scripts/corpus_watch.py `hangs`)."""
    return played_hung(name, MANIFEST[name])


def text(name: str) -> bytes:
    """The console as its command prints it (a corpus file's header left out)."""
    path, _, header = PLAYED[name]
    return b"".join(path.read_bytes().splitlines(keepends=True)[header:])


def raised(name: str, firing: list[dict[str, Any]]) -> None:
    """Assert that `firing` (a run's firing transitions, as the API shows them) are exactly
    the rules the console's entry names, with its evidence in their summaries. Evidence an
    incident gathered itself (the stacks of a hung command, once `runwatch watch` answers) is
    not read from the text, and comes or not by how long the command stays hung: left out."""
    entry = MANIFEST[name]
    firing = [a for a in firing if (a.get("incident") or {}).get("role") != "evidence"]
    assert sorted({a["rule"] for a in firing}) == sorted(entry["rules"]), (name, firing)
    said = " | ".join(a["summary"] for a in firing)
    for wanted in entry.get("evidence", []):
        assert wanted in said, (name, wanted, said)

"""The consoles users posted (tests/fixtures/consoles/field/, and a representative part of
the corpus' development part, corpus/dev/), the way a user without any code change meets
runwatch: `runwatch watch -- cat FILE` into `runwatch serve`. Each raises the alerts its text
supports (tests/unit/test_field_consoles.py and test_corpus_reading.py read the same files
with `runwatch diagnose`), every control none.

A console whose alerts need time to pass with the output still open (a collective's settle,
an engine stalled for a while) is played by a command that prints it and then hangs, as the
job did; the others by a command that prints it and exits. The service runs with short
thresholds (settle 1 s, stalled_for 2 s): what is tested here is the path, the defaults
are the rules' own tests'."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

CONSOLES = Path(__file__).resolve().parents[1] / "fixtures" / "consoles"
FIELD = CONSOLES / "field"
CORPUS = CONSOLES / "corpus"
#: a representative part of the corpus' development part (issue 41): each shape the reader
#: by grammar reads -- metric lines, tables, overflow skips, tracebacks without their head,
#: padded, under a cut prefix, uncaught by Python's words -- and the controls that trap it
CORPUS_SUBSET = (
    "nan_deepspeed_chat_act_loss_inf_pipes", "nan_megatron_deepspeed_grad_norm_pipes",
    "nan_xtuner_mmengine_grad_norm", "nan_loguru_bracket_fields_loss_step",
    "nan_rlpyt_tabular_loss_average", "nan_trl_grpo_notebook_table_kl",
    "nan_deepspeed_overflow_to_scale1_bar_postfix", "nan_chatglm_ppo_dict_after_tqdm",
    "exception_nemo_rl_actor_died_padded_terminal_wrap",
    "exception_rllib_tune_error_after_worker_crash",
    "exception_unsloth_ipython_runtimeerror_header", "exception_verl_thread_loop_forever",
    "fatal_vllm_ray_executor_pyarrow", "exception_ray_malib_actor_died_headless",
    "exception_openrlhf_job_failed_module", "healthy_apex_overflow_then_deprecation",
    "healthy_deepspeed_overflow_recovered", "healthy_megatron_bert_fp16_skipped_warmup",
    "healthy_unsloth_grpo_table_negative_rewards", "healthy_ragen_reward_fn_error_noncritical",
    "healthy_vllm_v0_idle_engine_zero_throughput", "healthy_megatron_llm_bad_grad_norm_skipped",
)  # fmt: skip
_DEV = tomllib.loads((CORPUS / "MANIFEST.toml").read_text())
#: name -> (file, what it must raise and the evidence, the header lines to leave out: a
#: corpus file's `# what happened` says the failure in words, and is not the console)
PLAYED: dict[str, tuple[Path, dict[str, Any], int]] = {
    **{name: (FIELD / f"{name}.log", entry, 0)
       for name, entry in tomllib.loads((FIELD / "MANIFEST.toml").read_text()).items()},
    **{name: (CORPUS / "dev" / f"{name}.log", _DEV[name], 2) for name in CORPUS_SUBSET},
}  # fmt: skip
MANIFEST: dict[str, dict[str, Any]] = {name: entry for name, (_, entry, _) in PLAYED.items()}
#: rules that fire only while the job's output stays open (the job hung)
WHILE_HUNG = {"collective_timeout", "inference_stalled"}
#: how long a hung control is watched after its last event for an alert that must not come
QUIET_S = 6.0


def _hangs(name: str) -> bool:
    return bool(WHILE_HUNG & set(MANIFEST[name]["rules"])) or name.startswith("healthy_vllm")


@pytest.mark.parametrize("part", ["field", "corpus"])
def test_every_console_watched_raises_what_its_text_supports(tmp_path: Path, part: str) -> None:
    """One serve a part, so the host's clock-skew estimate sees the load it is built for."""
    entries = {n: e for n, e in MANIFEST.items() if (n in CORPUS_SUBSET) == (part == "corpus")}
    config = tmp_path / "rules.toml"
    config.write_text("[rules.collective_timeout]\nsettle = 1\n\n"
                      "[rules.inference_stalled]\nstalled_for = 2\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    watches: dict[str, subprocess.Popen[bytes]] = {}
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        try:
            for name in sorted(entries):
                path, _, header = PLAYED[name]
                show = f'tail -n +{header + 1} "{path}"'
                play = ["sh", "-c", f"{show}; exec sleep 600" if _hangs(name) else show]
                watches[name] = subprocess.Popen(
                    [sys.executable, "-m", "runwatch.cli", "watch", "--run", name, "--url",
                     serve.url, "--", *play],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                )  # fmt: skip
            for name, watch in watches.items():
                if not _hangs(name):
                    assert watch.wait(120) == 0, name

            def transitions() -> dict[str, list[dict[str, Any]]]:
                out: dict[str, list[dict[str, Any]]] = {name: [] for name in entries}
                for alert in serve.get("/v1/alerts?limit=1000")["alerts"]:  # all of them
                    out.setdefault(alert["run"], []).append(alert)
                return out

            waiting: dict[str, str] = {}
            first_seen: dict[str, float] = {}  # when the run's events began to arrive

            def settled() -> dict[str, list[dict[str, Any]]] | None:
                runs = {r["run"]: r for r in serve.get("/v1/runs")["runs"]}
                seen = transitions()
                waiting.clear()
                for name, entry in entries.items():
                    run = runs.get(name)
                    fired = {a["rule"] for a in seen[name] if a["state"] == "firing"}
                    if run is not None:
                        first_seen.setdefault(name, time.monotonic())
                    if run is None:
                        waiting[name] = "no events yet"
                    elif not set(entry["rules"]) <= fired:
                        waiting[name] = f"fired {sorted(fired)}"
                    elif _hangs(name) and time.monotonic() - first_seen[name] < QUIET_S:
                        waiting[name] = "quiet for a while yet"
                    elif not _hangs(name) and run["status"] == "running":
                        waiting[name] = "not finished"
                return None if waiting else seen

            try:
                seen = wait_for(settled, "every console's alerts", timeout=180, every=0.25)
            except AssertionError as err:
                raise AssertionError(f"{err}: {waiting}") from None
        finally:
            for watch in watches.values():
                if watch.poll() is None:
                    watch.send_signal(signal.SIGTERM)  # passed on to the hung command
            for watch in watches.values():
                watch.wait(60)
    # a hung job stopped: watch exits as the command did, killed by SIGTERM (no crash of its
    # own on any of these consoles)
    stopped = {name: w.returncode for name, w in watches.items() if _hangs(name)}
    assert set(stopped.values()) == {128 + signal.SIGTERM}, stopped
    for name, entry in entries.items():
        firing = [a for a in seen[name] if a["state"] == "firing"]
        assert sorted({a["rule"] for a in firing}) == sorted(entry["rules"]), (name, firing)
        said = " | ".join(a["summary"] for a in firing)
        for text in entry.get("evidence", []):
            assert text in said, (name, text, said)


def test_diagnose_reads_every_console_without_a_traceback() -> None:
    files = sorted(str(p) for p in FIELD.glob("*.log"))
    done = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", *files],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "collective_timeout" in done.stdout

"""A real TRL GRPO run that fits a laptop's CPU, reported to runwatch by its callback.

The two lines a TRL user adds are marked `# runwatch`; the run goes to the destination in the
environment (`RUNWATCH_RUN` and `RUNWATCH_URL` or `RUNWATCH_KAFKA`; without them the callback
does nothing). The model is a tiny random-weight Llama made locally (`--model DIR`, made by
`scripts/tiny_model.py` when missing: no hub download); the reward is the completion's
share of distinct words. `--fault KIND@STEP` breaks the reward function from that step on,
as the tests do: `zero` (it returns 0), `nan` (NaN, which TRL logs as an unscorable None),
`raise` (it raises), `hang` (it never returns).

    RUNWATCH_RUN=grpo-1 RUNWATCH_URL=http://127.0.0.1:8787 \\
        .venv/bin/python examples/trl_grpo.py --model .cache/tiny-llama --steps 30
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROMPTS = [
    "The rollout worker", "A reward model scores", "The trainer updates", "vLLM serves",
    "The sandbox runs", "A stalled job", "Slack says why", "The policy generates",
]  # fmt: skip
FAULTS = ("zero", "nan", "raise", "hang")


def parse_fault(text: str) -> tuple[str, int]:
    kind, _, step = text.partition("@")
    if kind not in FAULTS or not step.isdigit():
        raise argparse.ArgumentTypeError(f"a fault is KIND@STEP, KIND one of {FAULTS}")
    return kind, int(step)


def make_reward(fault: tuple[str, int] | None, latency: float = 0.0) -> Any:
    def distinct_words(completions: list[str], trainer_state: Any, **_: Any) -> list[float]:
        step = trainer_state.global_step + 1  # the step these completions train
        time.sleep(latency)  # a judge behind a network call
        if fault is not None and step >= fault[1]:
            kind = fault[0]
            if kind == "zero":
                return [0.0] * len(completions)
            if kind == "nan":
                return [float("nan")] * len(completions)
            if kind == "raise":
                raise RuntimeError(f"the reward service answered 500 at step {step}")
            time.sleep(24 * 3600)  # hang: a judge that never answers
        return [len(set(c.split())) / (1 + len(c.split())) for c in completions]

    return distinct_words


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--model", type=Path, required=True, help="a local model directory")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", type=Path, default=Path("/tmp/runwatch-trl-grpo"))
    p.add_argument("--fault", type=parse_fault, help="KIND@STEP: break the reward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reward-latency", type=float, default=0.0, metavar="SECONDS",
                   help="each reward call takes this long, as a remote judge does")  # fmt: skip
    p.add_argument("--no-callback", action="store_true",
                   help="no callback: the console alone, for `runwatch watch`")  # fmt: skip
    args = p.parse_args(argv)
    if not (args.model / "config.json").is_file():
        tiny = Path(__file__).resolve().parents[1] / "scripts" / "tiny_model.py"
        subprocess.run([sys.executable, str(tiny), str(args.model)], check=True)

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from runwatch.emitters.trl import Callback  # runwatch

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    config = GRPOConfig(
        output_dir=str(args.out), max_steps=args.steps, logging_steps=1, report_to=[],
        per_device_train_batch_size=8, num_generations=4, max_completion_length=12,
        learning_rate=1e-4, use_cpu=True, bf16=False, save_strategy="no", seed=args.seed,
        temperature=1.0, disable_tqdm=False,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=str(args.model), processing_class=tokenizer, args=config,
        reward_funcs=make_reward(args.fault, args.reward_latency), train_dataset=Dataset.from_dict(
            {"prompt": PROMPTS * 64}),
        callbacks=[] if args.no_callback else [Callback()],  # runwatch
    )  # fmt: skip
    trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())

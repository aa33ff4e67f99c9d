"""A tiny random-weight Llama for the real-vLLM tests, made here (no hub download): a BPE
tokenizer trained with `tokenizers` on a few lines of text, and a 2-layer Llama from
`transformers` with head_dim 64 (vLLM's CPU attention wants it: hidden 256, 4 heads).

Runs with the vLLM venv's Python (scripts/vllm_env.sh):
    .cache/vllm-env/bin/python scripts/tiny_model.py .cache/vllm-model
"""

from __future__ import annotations

import sys
from pathlib import Path

TEXT = [
    "The policy generates a trajectory, the sandbox runs the code, the reward model scores it.",
    "Training steps take minutes; a stalled rollout wastes an hour of GPU time.",
    "runwatch watches runs and says in Slack why a job has stalled.",
    "vLLM serves the rollout workers; the trainer updates the weights and syncs them back.",
] * 50


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    specials = ["<unk>", "<s>", "</s>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=512, special_tokens=specials,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")  # fmt: skip
    config = LlamaConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=256, intermediate_size=512,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=512, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / ".complete").write_text("ok\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

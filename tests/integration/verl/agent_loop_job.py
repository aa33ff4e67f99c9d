"""A verl agent-loop "rollout" on this machine, run by tests/integration/test_verl_agent_loop.py
with the verl venv's Python (scripts/verl_env.sh): verl 0.9.1's real `AgentLoopWorker`
running its real `ToolAgentLoop` over 8 samples of one step, with `patch_agent_loop()` on.

What is not verl's: the LLM server (no GPU here; a stand-in that answers with token ids --
a tool call for the last sample, a plain answer for the others), a tiny tokenizer made by
scripts/tiny_model.py with a chat template set here, and the tool -- a code sandbox whose
call never returns for the last sample (the sandbox hang of docs/architecture.md). The
worker is made without its Ray-side `__init__` (which loads a model's config and tools from
files); the attributes its methods read are set here.

    python agent_loop_job.py URL RUN TOKENIZER_DIR
"""

from __future__ import annotations

import asyncio
import sys

URL, RUN, TOKENIZER = sys.argv[1], sys.argv[2], sys.argv[3]
SAMPLES, STEP = 8, 3

from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from runwatch.emitters import Emitter  # noqa: E402
from runwatch.emitters.verl import patch_agent_loop  # noqa: E402

rollout = Emitter(run=RUN, component="rollout", url=URL, heartbeat_interval=1.0)
server = Emitter(run=RUN, component="inference", instance="vllm-0", url=URL,
                 heartbeat_interval=1.0)  # fmt: skip
assert patch_agent_loop(rollout)

from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
tokenizer.pad_token = tokenizer.eos_token
tokenizer.chat_template = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
HANG = asyncio.Event()  # never set: the sandbox of the last sample never answers


class Sandbox(BaseTool):
    async def execute(self, instance_id, parameters, **kwargs):  # type: ignore[no-untyped-def]
        if parameters.get("code") == "hang":
            await HANG.wait()
        return ToolResponse(text="ok"), 0.0, {}


class Server:
    """The LLM server verl's agent loop talks to, answering with token ids."""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)
        text = "the answer is 4"
        if "hang" in tokenizer.decode(prompt_ids):
            text = '<tool_call>\n{"name": "sandbox", "arguments": {"code": "hang"}}\n</tool_call>'
        ids = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids))


config = OmegaConf.create(
    {
        "actor_rollout_ref": {
            "rollout": {
                "prompt_length": 512,
                "response_length": 256,
                "full_determinism": False,
                "multi_turn": {
                    "max_user_turns": 2,
                    "max_assistant_turns": 2,
                    "max_parallel_calls": 1,
                    "max_tool_response_length": 64,
                    "tool_response_truncate_side": "left",
                    "format": "hermes",
                },
            }
        },
        "data": {},
    }
)
schema = OpenAIFunctionToolSchema.model_validate({"type": "function", "function": {
    "name": "sandbox", "description": "run code",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                   "required": ["code"]}}})  # fmt: skip

worker = AgentLoopWorker.__new__(AgentLoopWorker)
worker.config = config
worker.rollout_config = config.actor_rollout_ref.rollout
worker.llm_client = Server()
worker.tokenizer = tokenizer
worker.processor = None
worker.hf_model_type = None
worker.dataset_cls = None
# the sandbox's endpoint as a verl tool config names it -- a SandboxFusion on this node, as
# its docs run it locally: the tool phase waits on it, named by the machine (its host name)
worker.tools = [Sandbox(config={"sandbox_fusion_url": "http://localhost:8080/run_code"},
                        tool_schema=schema)]  # fmt: skip
worker.reward_loop_worker_handles = None
worker.teacher_client = None
worker.distillation_enabled = False
worker.mm_processor_kwargs = {}


async def main() -> None:
    async def stats() -> None:  # the inference server: idle, nothing queued
        while True:
            server.emit("inference.stats", server="vllm-0", running=0, waiting=0,
                        gen_tokens_per_s=0.0)  # fmt: skip
            await asyncio.sleep(1.0)

    beat = asyncio.ensure_future(stats())
    samples = []
    for i in range(SAMPLES):
        prompt = "please run hang" if i == SAMPLES - 1 else f"what is {i} + 4?"
        trajectory = {"step": STEP, "sample_index": i, "rollout_n": 0, "validate": False}
        samples.append(worker._run_agent_loop(
            {"temperature": 1.0}, trajectory, agent_name="tool_agent",
            raw_prompt=[{"role": "user", "content": prompt}], uid=f"prompt-{i // 4}",
        ))  # fmt: skip

    async def one(i: int, sample: object) -> None:
        try:
            out = await sample  # type: ignore[misc]
            print(f"sample {i} done: {type(out).__name__}", flush=True)
        except Exception as err:
            print(f"sample {i} failed: {err!r}", flush=True)

    await asyncio.gather(*(one(i, s) for i, s in enumerate(samples)))
    beat.cancel()


print("started", flush=True)
asyncio.run(main())

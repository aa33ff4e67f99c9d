"""The kinds of a rollout's work and its progress: trajectories, generation requests, an
inference server's queue, and a progress bar."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from runwatch.emitters.envelope import Event, Examples
from runwatch.emitters.fields import Fraction, Ident, Int64, Name, Word, note


class TrajectoryStarted(Event):
    emitted_when = "a rollout trajectory begins"
    pinned = ("traj", "step")
    examples = Examples(full={"traj": "t-1", "step": 3, "group": "p-7"}, minimal={"traj": "t"})

    kind: Literal["trajectory.started"]
    traj: Ident
    step: Int64 | None = None
    group: Ident | None = note("the prompt group it belongs to; in GRPO, the prompt's id")


#: What `dep` says (contract section 8), in the table of the fields this implementation adds.
DEP_NOTE = (
    "pinned 2026-11-28: the service the work waits on, named from its endpoint `host:port` "
    "with an optional role prefix, e.g. `reward@rm-1:8000`"
)


class TrajectoryPhase(Event):
    emitted_when = "a trajectory enters a phase"
    pinned = ("traj", "phase")
    examples = Examples(
        full={"traj": "t-1", "phase": "sandbox", "dep": "sandbox@pool-a:443"},
        minimal={"traj": "t", "phase": "tool"},
    )

    kind: Literal["trajectory.phase"]
    traj: Ident
    phase: Word = Field(description="`generate`, `tool`, `sandbox`, `reward`, or another word")
    dep: Ident | None = note(DEP_NOTE)


class TrajectoryDone(Event):
    emitted_when = "a trajectory ends"
    pinned = ("traj", "status", "reward", "duration_s")
    examples = Examples(
        full={"traj": "t-1", "status": "timeout", "reward": 0.0, "duration_s": 99.5,
              "group": "p-7", "step": 3},
        minimal={"traj": "t", "status": "ok"},
    )  # fmt: skip

    kind: Literal["trajectory.done"]
    traj: Ident
    status: Literal["ok", "error", "timeout", "aborted"]
    reward: float | None = None
    duration_s: float | None = None
    group: Ident | None = note("as in `trajectory.started`")
    step: Int64 | None = note("as in `trajectory.started`")


class RequestQueued(Event):
    emitted_when = "a generation request is sent to an inference server"
    pinned = ("req", "server")
    examples = Examples(
        full={"req": "q-1", "server": "vllm-0", "dep": "inference@10.0.0.5:8000"},
        minimal={"req": "q"},
    )

    kind: Literal["request.queued"]
    req: Ident
    server: Name | None = None
    dep: Ident | None = note(DEP_NOTE)


class RequestDone(Event):
    emitted_when = "a generation request completes"
    pinned = ("req", "server", "prompt_tokens", "completion_tokens", "status")
    examples = Examples(
        full={"req": "q-1", "server": "vllm-0", "prompt_tokens": 100, "completion_tokens": 2000,
              "status": "aborted", "dep": "inference@10.0.0.5:8000"},
        minimal={"req": "q"},
    )  # fmt: skip

    kind: Literal["request.done"]
    req: Ident
    server: Name | None = None
    prompt_tokens: Int64 | None = None
    completion_tokens: Int64 | None = None
    status: Literal["ok", "error", "aborted"] | None = None
    dep: Ident | None = note(DEP_NOTE)


class InferenceStats(Event):
    emitted_when = (
        "a snapshot of an inference server's queue (scraped from its metrics endpoint or read "
        "from its log)"
    )
    pinned = ("server", "running", "waiting", "kv_cache_usage", "gen_tokens_per_s")
    examples = Examples(
        full={"server": "vllm-0", "running": 0, "waiting": 2, "kv_cache_usage": 0.5,
              "gen_tokens_per_s": 1234.5, "prompt_tokens_per_s": 0.0, "stalled_since": None},
        minimal={"server": "s", "running": 0, "waiting": 0},
    )  # fmt: skip

    kind: Literal["inference.stats"]
    server: Ident
    running: Int64
    waiting: Int64
    kv_cache_usage: Fraction | None = None
    gen_tokens_per_s: float | None = None
    #: with `gen_tokens_per_s`, whether an engine makes progress
    prompt_tokens_per_s: float | None = note(
        'prefill throughput: vLLM\'s "Avg prompt throughput", the rate of its prompt-tokens counter'
    )
    stalled_since: float | None = note(
        "ts since when the engine itself says it made no progress with requests running (its "
        "watchdog's measure)"
    )


class Progress(Event):
    emitted_when = "a progress counter (a tqdm bar) changes"
    pinned = ("name", "n", "total")
    examples = Examples(
        full={"name": "Training Progress", "n": 511, "total": 512}, minimal={"name": "bar", "n": 0}
    )

    kind: Literal["progress"]
    name: Ident
    n: Int64
    total: Int64 | None = None

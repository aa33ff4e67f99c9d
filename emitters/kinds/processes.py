"""The kinds a process says of itself: its rank's phase, the weights it published or
serves, a collective that timed out, its failure, and its stacks when runwatch asks."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from runwatch.emitters.envelope import STRICT_OPEN, Event, Examples
from runwatch.emitters.fields import (
    MAX_STACK_FRAMES,
    MAX_STACK_THREADS,
    Ident,
    Int64,
    Name,
    Quote,
    Word,
    note,
)


class RankStatus(Event):
    emitted_when = (
        "a distributed trainer rank reports its phase (e.g. `forward`, `backward`, `all_reduce`, "
        "`recv`, `destroy_process_group`, `exited`)"
    )
    pinned = ("rank", "world_size", "phase", "since", "step")
    examples = Examples(
        full={"rank": 1, "world_size": 8, "phase": "all_reduce", "since": 99.5, "step": 3},
        minimal={"rank": 0, "world_size": 1, "phase": "forward"},
    )

    kind: Literal["rank.status"]
    rank: Int64
    world_size: Int64
    phase: Word
    since: float | None = note("ts the rank entered the phase")
    step: Int64 | None = None


class WeightsPublished(Event):
    """The trainer finished an update and published policy weights `version` (addition)."""

    emitted_when = "the trainer finished an update and published policy weights `version`"
    examples = Examples(full={"version": 12, "step": 40}, minimal={"version": 0})

    kind: Literal["weights.published"]
    version: Int64
    step: Int64 | None = None


class WeightsLoaded(Event):
    """An inference server (or rollout engine) now generates with weights `version`
    (addition); `server` names it, else the emitting process does."""

    emitted_when = "an inference server (or rollout engine) now generates with weights `version`"
    examples = Examples(full={"version": 12, "server": "vllm-0"}, minimal={"version": 0})

    kind: Literal["weights.loaded"]
    version: Int64
    server: Ident | None = note("else the emitting process's instance, else its host")


class CollectiveTimeout(Event):
    """A rank's collective operation timed out (addition): torch's NCCL watchdog, gloo, or
    the c10d store said so. One event per line that says it; the rule gathers them per
    process group."""

    emitted_when = (
        "a rank's collective operation timed out: one event per console line that says so"
    )
    examples = Examples(
        full={"backend": "nccl", "rank": 3, "group_rank": 1, "pg": "0 (default_pg)",
              "op": "ALLREDUCE", "seq": 4486, "timeout_s": 600.0, "ran_s": 600.013,
              "last_enqueued": 4489, "last_completed": 4485,
              "message": "[Rank 3] Watchdog caught collective operation timeout: ..."},
        minimal={"backend": "gloo"},
    )  # fmt: skip

    kind: Literal["collective.timeout"]
    backend: Word = Field(description="`nccl`, `gloo`, `c10d`, `hccl` (Ascend)")
    rank: Int64 | None = note("the global rank, from torch's `[rankN]:` prefix")
    group_rank: Int64 | None = note("the rank within its process group, from `[Rank N]`")
    pg: Name | None = note("the process group, e.g. `0 (default_pg)`")
    op: Name | None = note("e.g. `ALLREDUCE`, `_ALLGATHER_BASE`, `recv`")
    seq: Int64 | None = note("the collective's sequence number in its group")
    timeout_s: float | None = None
    ran_s: float | None = None
    last_enqueued: Int64 | None = None
    last_completed: Int64 | None = None
    message: Quote | None = note("up to 2,000 characters")


class ComponentFailed(Event):
    """A process of the run failed (addition): an uncaught exception, a known fatal marker
    of an engine or framework, or a command that exited non-zero (`runwatch watch`). The
    process is the event's `src`."""

    emitted_when = (
        "a process of the run (its `src`) failed: an uncaught exception, a known fatal marker, "
        "or a watched command that exited non-zero"
    )
    examples = Examples(
        full={"error": "KeyError: 'teacher_logprobs'", "how": "exit", "exit_code": 1},
        minimal={"error": "", "how": "fatal"},
    )

    kind: Literal["component.failed"]
    error: Quote = Field(
        description="the exception line, the marker line, or `exited with status N`; up to "
        "2,000 characters"
    )
    how: Literal["exception", "fatal", "exit"]
    exit_code: Int64 | None = None


class StackFrame(BaseModel):
    """One frame of a thread's stack: where, never what (no local variable is captured)."""

    model_config = STRICT_OPEN

    file: Name
    line: Int64
    function: Name


class StackThread(BaseModel):
    """One thread of a process and its stack, outermost frame first."""

    model_config = STRICT_OPEN

    name: Name
    frames: Annotated[list[StackFrame], Field(max_length=MAX_STACK_FRAMES)]


class ProcessStacks(Event):
    """Where each thread of a process is (addition): the answer to runwatch's request for
    stacks when an incident opened on a hang (`request`: the incident's id). From the
    process's own emitter (`how` = emitter), or from outside (`py-spy`, by `runwatch watch`);
    `error` when it could not be taken. Bounded in threads, frames and size."""

    emitted_when = (
        "a process answers runwatch's request for its stacks (an incident opened on a hang)"
    )
    examples = Examples(
        full={"request": "incident|r|1", "how": "emitter", "truncated": False, "error": None,
              "threads": [{"name": "MainThread", "frames": [
                  {"file": "/w/train.py", "line": 42, "function": "step"},
                  {"file": "/t/distributed_c10d.py", "line": 2310, "function": "recv"}]}]},
        minimal={"request": "i", "how": "py-spy"},
    )  # fmt: skip

    kind: Literal["process.stacks"]
    request: Ident = Field(description="the incident's id")
    how: Literal["emitter", "py-spy"]
    threads: Annotated[list[StackThread], Field(max_length=MAX_STACK_THREADS)] | None = note(
        "each thread's frames outermost first"
    )
    truncated: bool | None = note("true: threads or frames were left out to stay within the bounds")
    error: Quote | None = note("why they could not be taken")

"""Contract v1 events as pydantic models: the one definition of what a valid event is.

Emitters validate what they send with these models; consumers decode with a faster path
(`runwatch.stream.decode`) that is derived from them and falls back to them for the final
word on anything unusual. Extra fields are kept (``extra="allow"``); rules ignore them.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from runwatch.emitters.bounds import INT64_MAX, INT64_MIN, out_of_bounds

#: Largest encoded event, in bytes (contract §1).
MAX_EVENT_BYTES = 64 * 1024
#: Bounds of a `process.stacks` event: threads, frames per thread.
MAX_STACK_THREADS, MAX_STACK_FRAMES = 64, 64
#: Control characters (C0, DEL, C1), which identifiers (`id`, `src.*`, `traj`, `req`,
#: `server`, `name`) may not hold. (`stream.decode` checks this its own, cheaper way.)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

RUN_ID_PATTERN = r"^[A-Za-z0-9._:/@+-]{1,200}$"
KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
COMPONENT_PATTERN = r"^[a-z][a-z0-9_-]*$"

#: The run of fleet incidents' alerts (contract section 8): reserved, no event may carry it.
FLEET_RUN = "@fleet"


@dataclass(frozen=True)
class Reserved:
    """Values a string field may not take, and why: an `Annotated` marker that pydantic
    enforces here and `runwatch.emitters.schema` reads (`Text.reserved`), so every check
    made from the models -- the emitter's, the decoder's -- refuses them too."""

    reserved: tuple[str, ...]
    why: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        if value in self.reserved:
            raise PydanticCustomError(
                "reserved", "{value} is reserved: {why}", {"value": repr(value), "why": self.why}
            )
        return value


RunId = Annotated[
    str,
    StringConstraints(pattern=RUN_ID_PATTERN),
    Reserved((FLEET_RUN,), "the run of fleet incidents' alerts (contract section 8)"),
]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]


def _no_control(value: str) -> str:
    found = CONTROL.search(value)
    if found is not None:
        raise PydanticCustomError(
            "control_character",
            "must not hold control characters (found {char} at {at})",
            {"char": ascii(found.group()), "at": found.start()},
        )
    return value


#: An identifier: 1-200 characters, none of them a control character.
Ident = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_control)]
EventId = Ident
#: An optional name of a source or server: up to 200 characters, no control character.
Name = Annotated[str, StringConstraints(max_length=200), AfterValidator(_no_control)]
KindName = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=100)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
#: Metric values may be null, NaN or infinite: the rules want to see those.
MetricValue = Annotated[float, Field(allow_inf_nan=True)] | None
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Word = Annotated[str, StringConstraints(min_length=1, max_length=200)]

_STRICT_OPEN = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)
#: model -> `out_of_bounds`' typed fields (a kind's, as it is defined)
_TYPED: dict[type[BaseModel], dict[str, Any]] = {}


class Source(BaseModel):
    """The emitting process: which component, and where it runs."""

    model_config = _STRICT_OPEN

    component: Annotated[str, StringConstraints(pattern=COMPONENT_PATTERN, max_length=64)]
    host: Name | None = None
    pid: Int64 | None = None
    rank: Int64 | None = None
    instance: Name | None = None


def _typed_fields(model: type[BaseModel]) -> dict[str, Any]:
    """`out_of_bounds`' view of a model: its fields, with Source's own; free-form ones out."""
    out: dict[str, Any] = {}
    for name in model.model_fields:
        if name == "config":  # {rule: {param: anything}}: every bound checked beneath
            continue
        out[name] = _typed_fields(Source) if name == "src" else None
    return out


@dataclass(frozen=True)
class Examples:
    """One event's own fields (beside the envelope) twice: `full`, with every field set, and
    `minimal`, with the required ones alone. The emitter's and the decoder's tests run each
    kind through both, so a kind is tested from its model alone."""

    full: Mapping[str, Any]
    minimal: Mapping[str, Any]


def note(text: str | None = None, *, shape: str | None = None, default: Any = None) -> Any:
    """An optional field (`default` None) with what the table of kinds says of it beyond its
    type: `text`, in parentheses after it; `shape`, written instead of the type made from it."""
    return Field(default, description=text, json_schema_extra={"shape": shape} if shape else None)


class Event(BaseModel):
    """The envelope every event carries; also the model for kinds the rules do not read.

    A kind is a subclass with `kind: Literal["its.name"]`, found when it is defined (into
    `KNOWN_KINDS`); from it alone come the emit-side check (`runwatch.emitters.checks`), the
    decoder's struct (`runwatch.stream.decode`), the tests' events (`examples`) and its row
    of the table of kinds in docs/contract.md (`make docs`)."""

    model_config = _STRICT_OPEN

    #: what makes a process emit it: the table of kinds' "emitted when"
    emitted_when: ClassVar[str]
    #: its own fields, all of them and the required ones alone (see `Examples`)
    examples: ClassVar[Examples]
    #: the fields the contract's table of kinds (section 1) pins, in its order; None: a kind
    #: this implementation adds. Every other field is an addition.
    pinned: ClassVar[tuple[str, ...] | None] = None

    v: Literal[1]
    id: EventId
    ts: FiniteFloat
    run: RunId
    kind: KindName
    src: Source

    @field_validator("v", mode="before")
    @classmethod
    def _v_is_the_int_1(cls, value: Any) -> Any:
        # pydantic's Literal[1] also takes `true` and `1.0`; the contract says an int.
        if type(value) is not int:
            raise PydanticCustomError("literal_error", "Input should be 1")
        return value

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = typing.get_args(cls.model_fields["kind"].annotation)
        if len(kind) != 1 or not isinstance(kind[0], str):
            raise TypeError(f"{cls.__name__}: kind must be Literal['one.name']")
        if kind[0] in KNOWN_KINDS:
            raise TypeError(f"{cls.__name__}: {kind[0]} is {KNOWN_KINDS[kind[0]].__name__}'s")
        KNOWN_KINDS[kind[0]] = cls
        _TYPED[cls] = _typed_fields(cls)


#: Every kind the rules read, by name, each found as its model is defined. Other kinds
#: validate as plain `Event`.
KNOWN_KINDS: dict[str, type[Event]] = {}


class RunStarted(Event):
    emitted_when = "a run begins"
    pinned = ("labels", "config", "total_steps")
    examples = Examples(
        full={"labels": {"team": "rl", "model": "qwen"}, "total_steps": 680,
              "config": {"zero_reward": {"steps": 10},
                         "stuck_progress": {"stall_after": {"x": 5}}}},
        minimal={},
    )  # fmt: skip

    kind: Literal["run.started"]
    labels: dict[str, str] | None = None
    config: dict[str, dict[str, Any]] | None = note(shape="{rule id: {param: value}}")
    total_steps: Int64 | None = None


class RunFinished(Event):
    emitted_when = "a run ends"
    pinned = ("status",)
    examples = Examples(full={"status": "failed", "exit_code": 1}, minimal={"status": "ok"})

    kind: Literal["run.finished"]
    status: Literal["ok", "failed", "killed"]
    exit_code: Int64 | None = note("the exit status of a command run under `runwatch watch`")


class RunResumed(Event):
    """A person lifts the circuit breaker of a run (`runwatch resume RUN`): the alerts firing
    now stop pausing it (an addition to the contract)."""

    emitted_when = "a person lifts the circuit breaker of a run (`runwatch resume RUN`)"
    examples = Examples(
        full={"rule": "zero_reward", "by": "alice@node-1", "reason": "sandbox fixed"}, minimal={}
    )

    kind: Literal["run.resumed"]
    rule: Ident | None = note("only this rule's alerts; all of them when absent")
    by: Name | None = None
    reason: Name | None = None


class Heartbeat(Event):
    emitted_when = "every `heartbeat_interval` (default 10 s) from each live emitting process"
    pinned = ("final",)
    examples = Examples(full={"final": True, "dropped_events": 3}, minimal={})

    kind: Literal["heartbeat"]
    final: bool | None = note("true = this process is shutting down cleanly")
    dropped_events: Int64 | None = note("events the process has dropped so far")


class StepStarted(Event):
    emitted_when = "the trainer starts a training step"
    pinned = ("step",)
    examples = Examples(full={"step": 3}, minimal={"step": 0})

    kind: Literal["step.started"]
    step: Int64


class StepDone(Event):
    emitted_when = "the trainer finishes a step"
    pinned = ("step", "duration_s", "timing")
    examples = Examples(
        full={"step": 3, "duration_s": 12.5, "timing": {"gen": 7.0, "update_actor": 5}},
        minimal={"step": 0},
    )

    kind: Literal["step.done"]
    step: Int64
    duration_s: float | None = None
    timing: dict[str, float] | None = note(
        "e.g. `gen`, `old_log_prob`, `update_actor`, `testing`, `save_checkpoint`",
        shape="{phase: seconds}",
    )


class StepMetrics(Event):
    emitted_when = "the trainer logs a step's metrics (the dict it would hand to wandb)"
    pinned = ("step", "metrics")
    examples = Examples(
        full={"step": 3, "metrics": {"actor/grad_norm": 0.5, "loss": None, "n": 4}},
        minimal={"step": 0, "metrics": {}},
    )

    kind: Literal["step.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class EvalMetrics(Event):
    """A validation or evaluation pass's metrics at a step (addition): kept apart from the
    training step's `step.metrics`, which the rules read."""

    emitted_when = "a validation or evaluation pass logs its metrics at a step"
    examples = Examples(
        full={"step": 0, "metrics": {"val-core/acc": 0.31, "val-aux/n": None}},
        minimal={"step": 0, "metrics": {}},
    )

    kind: Literal["eval.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class Reward(Event):
    emitted_when = "a step's aggregated reward is known"
    pinned = ("step", "mean", "count")
    examples = Examples(
        full={"step": 3, "mean": 0.25, "count": 512}, minimal={"step": 0, "mean": 0}
    )

    kind: Literal["reward"]
    step: Int64
    mean: Annotated[float, Field(allow_inf_nan=True)]
    count: Int64 | None = None


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
              "gen_tokens_per_s": 1234.5, "prompt_tokens_per_s": 0.0},
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


#: Free text an event quotes from a console (an exception line, a watchdog's message).
Quote = Annotated[str, StringConstraints(max_length=2000)]


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
    backend: Word = Field(description="`nccl`, `gloo`, `c10d`")
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

    model_config = _STRICT_OPEN

    file: Name
    line: Int64
    function: Name


class StackThread(BaseModel):
    """One thread of a process and its stack, outermost frame first."""

    model_config = _STRICT_OPEN

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


class DepHeld(Event):
    """A process holds its work to `dep` (addition, the fleet pause): the run opted in
    (`run.started.config`, `shared_cause.hold`) and the dep's fleet incident is open. Sent
    once per hold, when the first call waits (`runwatch.emitters.hold`)."""

    emitted_when = "a process holds its calls to `dep` while the dep's fleet incident is open"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "waiting": 1},
        minimal={"dep": "sandbox@pool-a:443"},
    )  # fmt: skip

    kind: Literal["dep.held"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    waiting: Int64 | None = note("calls waiting when it was sent")


class DepCanary(Event):
    """One call let through to a held `dep` to see whether it is healthy again (addition),
    and how it ended: `ok` lifts the hold."""

    emitted_when = "a canary call to a held `dep` ends"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "status": "error", "duration_s": 0.4},
        minimal={"dep": "sandbox@pool-a:443", "status": "ok"},
    )  # fmt: skip

    kind: Literal["dep.canary"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    status: Literal["ok", "error", "timeout", "aborted"]
    duration_s: float | None = None


class DepReleased(Event):
    """A process stops holding its work to `dep` (addition): a canary succeeded (`healthy`),
    the service's own heartbeats came back (`beating`), the fleet incident left the run view
    (`resolved`), the run view cannot be read (fail open: `unreachable`), or the emitter
    closed (`closed`)."""

    emitted_when = "a process stops holding its calls to `dep`"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "reason": "healthy", "held_s": 4512.0, "waited": 1280},
        minimal={"dep": "sandbox@pool-a:443", "reason": "resolved"},
    )  # fmt: skip

    kind: Literal["dep.released"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    reason: Literal["healthy", "beating", "resolved", "unreachable", "closed"]
    held_s: float | None = note("how long it held")
    waited: Int64 | None = note("calls that waited in the hold")


_ENVELOPE = TypeAdapter(Event)


def describe_errors(err: ValidationError, prefix: str = "", limit: int | None = 5) -> str:
    """pydantic's errors as one line naming each bad field (`prefix.field: what is wrong`):
    what a person needs to fix an emitter or a config file. At most `limit` of them."""
    errors = err.errors(include_url=False)
    shown = errors if limit is None else errors[:limit]
    parts = []
    for e in shown:
        loc = ".".join(str(x) for x in (prefix, *e["loc"]) if str(x)) or "event"
        parts.append(f"{loc}: {e['msg']}")
    more = len(errors) - len(shown)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def model_for(kind: object) -> type[Event]:
    """The model that validates an event of this kind (`Event` for kinds rules ignore)."""
    return KNOWN_KINDS.get(kind, Event) if isinstance(kind, str) else Event


_TYPED[Event] = _typed_fields(Event)


def validate(obj: Any) -> Event:
    """Validate a decoded JSON object as a contract event: the bounds that hold for the whole
    object (`out_of_bounds`), then its kind's model. Raises pydantic's ValidationError."""
    model = model_for(obj.get("kind")) if isinstance(obj, dict) else Event
    problem = out_of_bounds(obj, _TYPED[model])
    if problem is not None:
        where, why = problem
        detail = InitErrorDetails(type=PydanticCustomError("bounds", why), loc=where, input=None)
        raise ValidationError.from_exception_data("event", [detail])
    if not isinstance(obj, dict):
        return _ENVELOPE.validate_python(obj)
    return model.model_validate(obj)

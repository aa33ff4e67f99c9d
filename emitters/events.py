"""Contract v1 events as pydantic models: the one definition of what a valid event is.

Emitters validate what they send with these models; consumers decode with a faster path
(`runwatch.stream.decode`) that is derived from them and falls back to them for the final
word on anything unusual. Extra fields are kept (``extra="allow"``); rules ignore them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

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
from pydantic_core import InitErrorDetails, PydanticCustomError

#: Largest encoded event, in bytes (contract §1).
MAX_EVENT_BYTES = 64 * 1024
#: Deepest nesting of objects and arrays an event may have (contract §1, bounds).
MAX_DEPTH = 32
#: Integers anywhere in an event fit in a signed 64-bit integer (contract §1, bounds).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Bounds of a `process.stacks` event: threads, frames per thread.
MAX_STACK_THREADS, MAX_STACK_FRAMES = 64, 64
#: Control characters (C0, DEL, C1), which identifiers (`id`, `src.*`, `traj`, `req`,
#: `server`, `name`) may not hold. (`stream.decode` checks this its own, cheaper way.)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

RUN_ID_PATTERN = r"^[A-Za-z0-9._:/@+-]{1,200}$"
KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
COMPONENT_PATTERN = r"^[a-z][a-z0-9_-]*$"

RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
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

_STRICT_OPEN = ConfigDict(extra="allow", strict=True, frozen=True)


class Source(BaseModel):
    """The emitting process: which component, and where it runs."""

    model_config = _STRICT_OPEN

    component: Annotated[str, StringConstraints(pattern=COMPONENT_PATTERN, max_length=64)]
    host: Name | None = None
    pid: Int64 | None = None
    rank: Int64 | None = None
    instance: Name | None = None


class Event(BaseModel):
    """The envelope every event carries; also the model for kinds the rules do not read."""

    model_config = _STRICT_OPEN

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


class RunStarted(Event):
    kind: Literal["run.started"]
    labels: dict[str, str] | None = None
    config: dict[str, dict[str, Any]] | None = None
    total_steps: Int64 | None = None


class RunFinished(Event):
    kind: Literal["run.finished"]
    status: Literal["ok", "failed", "killed"]
    exit_code: Int64 | None = None  # addition: a watched command's exit status


class RunResumed(Event):
    """A person lifts the circuit breaker of a run (`runwatch resume RUN`): the alerts firing
    now stop pausing it (an addition to the contract)."""

    kind: Literal["run.resumed"]
    rule: Ident | None = None  # only this rule's alerts; all of them when absent
    by: Name | None = None
    reason: Name | None = None


class Heartbeat(Event):
    kind: Literal["heartbeat"]
    final: bool | None = None
    dropped_events: Int64 | None = None  # addition: events the process has dropped so far


class StepStarted(Event):
    kind: Literal["step.started"]
    step: Int64


class StepDone(Event):
    kind: Literal["step.done"]
    step: Int64
    duration_s: float | None = None
    timing: dict[str, float] | None = None


class StepMetrics(Event):
    kind: Literal["step.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class EvalMetrics(Event):
    """A validation or evaluation pass's metrics at a step (addition): kept apart from the
    training step's `step.metrics`, which the rules read."""

    kind: Literal["eval.metrics"]
    step: Int64
    metrics: dict[str, MetricValue]


class Reward(Event):
    kind: Literal["reward"]
    step: Int64
    mean: Annotated[float, Field(allow_inf_nan=True)]
    count: Int64 | None = None


class TrajectoryStarted(Event):
    kind: Literal["trajectory.started"]
    traj: Ident
    step: Int64 | None = None
    group: Ident | None = None  # addition: the prompt group (GRPO) it belongs to


class TrajectoryPhase(Event):
    kind: Literal["trajectory.phase"]
    traj: Ident
    phase: Word


class TrajectoryDone(Event):
    kind: Literal["trajectory.done"]
    traj: Ident
    status: Literal["ok", "error", "timeout", "aborted"]
    reward: float | None = None
    duration_s: float | None = None
    group: Ident | None = None  # addition: as in trajectory.started
    step: Int64 | None = None  # addition: as in trajectory.started


class RequestQueued(Event):
    kind: Literal["request.queued"]
    req: Ident
    server: Name | None = None


class RequestDone(Event):
    kind: Literal["request.done"]
    req: Ident
    server: Name | None = None
    prompt_tokens: Int64 | None = None
    completion_tokens: Int64 | None = None
    status: Literal["ok", "error", "aborted"] | None = None


class InferenceStats(Event):
    kind: Literal["inference.stats"]
    server: Ident
    running: Int64
    waiting: Int64
    kv_cache_usage: Fraction | None = None
    gen_tokens_per_s: float | None = None
    #: addition: prefill throughput (vLLM's "Avg prompt throughput"; the rate of its
    #: prompt-tokens counter): with `gen_tokens_per_s`, whether an engine makes progress
    prompt_tokens_per_s: float | None = None


class Progress(Event):
    kind: Literal["progress"]
    name: Ident
    n: Int64
    total: Int64 | None = None


class RankStatus(Event):
    kind: Literal["rank.status"]
    rank: Int64
    world_size: Int64
    phase: Word
    since: float | None = None
    step: Int64 | None = None


class WeightsPublished(Event):
    """The trainer finished an update and published policy weights `version` (addition)."""

    kind: Literal["weights.published"]
    version: Int64
    step: Int64 | None = None


class WeightsLoaded(Event):
    """An inference server (or rollout engine) now generates with weights `version`
    (addition); `server` names it, else the emitting process does."""

    kind: Literal["weights.loaded"]
    version: Int64
    server: Ident | None = None


#: Free text an event quotes from a console (an exception line, a watchdog's message).
Quote = Annotated[str, StringConstraints(max_length=2000)]


class CollectiveTimeout(Event):
    """A rank's collective operation timed out (addition): torch's NCCL watchdog, gloo, or
    the c10d store said so. One event per line that says it; the rule gathers them per
    process group."""

    kind: Literal["collective.timeout"]
    backend: Word  # nccl, gloo, c10d
    rank: Int64 | None = None  # the global rank (torch's `[rankN]:` prefix), when known
    group_rank: Int64 | None = None  # the rank within its process group (`[Rank N]`)
    pg: Name | None = None  # the process group: "0(default_pg)", "1"
    op: Name | None = None  # ALLREDUCE, _ALLGATHER_BASE, recv, ...
    seq: Int64 | None = None  # the collective's sequence number in its group
    timeout_s: float | None = None
    ran_s: float | None = None
    last_enqueued: Int64 | None = None
    last_completed: Int64 | None = None
    message: Quote | None = None


class ComponentFailed(Event):
    """A process of the run failed (addition): an uncaught exception, a known fatal marker
    of an engine or framework, or a command that exited non-zero (`runwatch watch`). The
    process is the event's `src`."""

    kind: Literal["component.failed"]
    error: Quote  # the exception line, the marker line, or "exited with status N"
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

    kind: Literal["process.stacks"]
    request: Ident
    how: Literal["emitter", "py-spy"]
    threads: Annotated[list[StackThread], Field(max_length=MAX_STACK_THREADS)] | None = None
    truncated: bool | None = None  # true: threads or frames were left out (bounds)
    error: Quote | None = None


#: Every kind the rules read, by name. Other kinds validate as plain `Event`.
KNOWN_KINDS: dict[str, type[Event]] = {
    m.model_fields["kind"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in (
        RunStarted,
        RunFinished,
        RunResumed,
        Heartbeat,
        StepStarted,
        StepDone,
        StepMetrics,
        EvalMetrics,
        Reward,
        TrajectoryStarted,
        TrajectoryPhase,
        TrajectoryDone,
        RequestQueued,
        RequestDone,
        InferenceStats,
        Progress,
        RankStatus,
        WeightsPublished,
        WeightsLoaded,
        CollectiveTimeout,
        ComponentFailed,
        ProcessStacks,
    )
}

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


def out_of_bounds(
    obj: Any, typed: Mapping[str, Any] | None = None
) -> tuple[tuple[str | int, ...], str] | None:
    """Where and why a decoded JSON value breaks the bounds that hold for the whole event,
    extra fields included (contract §1): nesting deeper than `MAX_DEPTH`, an integer outside
    64 bits, a string (or key) that is not valid Unicode. None when it keeps them.

    `typed`: the model's fields (name -> their own `typed`, or None) whose numbers the model
    types itself -- an int field is bounded there, and a float field takes any integer as a
    float -- so only strings and depth are checked beneath them. Iterative, so a deep value
    cannot exhaust the stack; the caller has bounded its size."""
    stack: list[tuple[Any, tuple[str | int, ...], Mapping[str, Any] | None, bool]] = [
        (obj, (), typed, False)
    ]
    while stack:
        value, where, fields, numbers_typed = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _unicode(value):
                return where, "not valid Unicode (a lone surrogate)"
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if not numbers_typed and not INT64_MIN <= value <= INT64_MAX:
                return where, "integer does not fit in 64 bits"
        elif isinstance(value, dict | list):
            if len(where) >= MAX_DEPTH:
                return where, f"nested deeper than {MAX_DEPTH} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not key.isascii() and not _unicode(key):
                    return (*where, key), "key is not valid Unicode (a lone surrogate)"
                if fields is not None and isinstance(key, str) and key in fields:
                    sub = fields[key]
                    stack.append((item, (*where, key), sub, sub is None))
                else:
                    stack.append((item, (*where, key), None, numbers_typed))
    return None


def _typed_fields(model: type[BaseModel]) -> dict[str, Any]:
    """`out_of_bounds`' view of a model: its fields, with Source's own; free-form ones out."""
    out: dict[str, Any] = {}
    for name in model.model_fields:
        if name == "config":  # {rule: {param: anything}}: every bound checked beneath
            continue
        out[name] = _typed_fields(Source) if name == "src" else None
    return out


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: model -> `out_of_bounds`' typed fields
_TYPED: dict[type[Event], dict[str, Any]] = {Event: _typed_fields(Event)}
_TYPED.update((m, _typed_fields(m)) for m in KNOWN_KINDS.values())


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

"""Contract v1 events as pydantic models: the one definition of what a valid event is.

Emitters validate what they send with these models; consumers decode with a faster path
(`runwatch.stream.decode`) that is derived from them and falls back to them for the final
word on anything unusual. Extra fields are kept (``extra="allow"``); rules ignore them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

#: Largest encoded event, in bytes (contract §1).
MAX_EVENT_BYTES = 64 * 1024

RUN_ID_PATTERN = r"^[A-Za-z0-9._:/@+-]{1,200}$"
KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
COMPONENT_PATTERN = r"^[a-z][a-z0-9_-]*$"

RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
EventId = Annotated[str, StringConstraints(min_length=1, max_length=200)]
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
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    instance: str | None = None


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
    total_steps: int | None = None


class RunFinished(Event):
    kind: Literal["run.finished"]
    status: Literal["ok", "failed", "killed"]


class Heartbeat(Event):
    kind: Literal["heartbeat"]
    final: bool | None = None


class StepStarted(Event):
    kind: Literal["step.started"]
    step: int


class StepDone(Event):
    kind: Literal["step.done"]
    step: int
    duration_s: float | None = None
    timing: dict[str, float] | None = None


class StepMetrics(Event):
    kind: Literal["step.metrics"]
    step: int
    metrics: dict[str, MetricValue]


class Reward(Event):
    kind: Literal["reward"]
    step: int
    mean: Annotated[float, Field(allow_inf_nan=True)]
    count: int | None = None


class TrajectoryStarted(Event):
    kind: Literal["trajectory.started"]
    traj: Word
    step: int | None = None


class TrajectoryPhase(Event):
    kind: Literal["trajectory.phase"]
    traj: Word
    phase: Word


class TrajectoryDone(Event):
    kind: Literal["trajectory.done"]
    traj: Word
    status: Literal["ok", "error", "timeout", "aborted"]
    reward: float | None = None
    duration_s: float | None = None


class RequestQueued(Event):
    kind: Literal["request.queued"]
    req: Word
    server: str | None = None


class RequestDone(Event):
    kind: Literal["request.done"]
    req: Word
    server: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: Literal["ok", "error", "aborted"] | None = None


class InferenceStats(Event):
    kind: Literal["inference.stats"]
    server: Word
    running: int
    waiting: int
    kv_cache_usage: Fraction | None = None
    gen_tokens_per_s: float | None = None


class Progress(Event):
    kind: Literal["progress"]
    name: Word
    n: int
    total: int | None = None


class RankStatus(Event):
    kind: Literal["rank.status"]
    rank: int
    world_size: int
    phase: Word
    since: float | None = None
    step: int | None = None


#: Every kind the rules read, by name. Other kinds validate as plain `Event`.
KNOWN_KINDS: dict[str, type[Event]] = {
    m.model_fields["kind"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in (
        RunStarted,
        RunFinished,
        Heartbeat,
        StepStarted,
        StepDone,
        StepMetrics,
        Reward,
        TrajectoryStarted,
        TrajectoryPhase,
        TrajectoryDone,
        RequestQueued,
        RequestDone,
        InferenceStats,
        Progress,
        RankStatus,
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


def validate(obj: Any) -> Event:
    """Validate a decoded JSON object as a contract event; raises pydantic's ValidationError."""
    if not isinstance(obj, dict):
        return _ENVELOPE.validate_python(obj)
    return model_for(obj.get("kind")).model_validate(obj)

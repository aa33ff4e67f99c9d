"""Contract v1 events as pydantic models: the one definition of what a valid event is.

Emitters validate what they send with these models; consumers decode with a faster path
(`runwatch.stream.decode`) that is derived from them and falls back to them for the final
word on anything unusual. Extra fields are kept (``extra="allow"``); rules ignore them.

This module is where they are imported from and validated; they are defined beside it: the
field types in `runwatch.emitters.fields`, the envelope and the finding of kinds in
`runwatch.emitters.envelope`, each kind's model in its group of `runwatch.emitters.kinds`.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from runwatch.emitters.bounds import out_of_bounds
from runwatch.emitters.envelope import KNOWN_KINDS, TYPED_FIELDS, Event, Examples, Source
from runwatch.emitters.fields import (
    COMPONENT_PATTERN,
    CONTROL,
    FLEET_RUN,
    KIND_PATTERN,
    MAX_EVENT_BYTES,
    MAX_STACK_FRAMES,
    MAX_STACK_THREADS,
    RUN_ID_PATTERN,
    EventId,
    FiniteFloat,
    Fraction,
    Ident,
    Int64,
    KindName,
    MetricValue,
    Name,
    Quote,
    Reserved,
    RunId,
    Word,
    note,
)
from runwatch.emitters.kinds.fleet import DepCanary, DepHeld, DepReleased
from runwatch.emitters.kinds.processes import (
    CollectiveTimeout,
    ComponentFailed,
    ProcessStacks,
    RankStatus,
    StackFrame,
    StackThread,
    WeightsLoaded,
    WeightsPublished,
)
from runwatch.emitters.kinds.rollout import (
    DEP_NOTE,
    InferenceStats,
    Progress,
    RequestDone,
    RequestQueued,
    TrajectoryDone,
    TrajectoryPhase,
    TrajectoryStarted,
)
from runwatch.emitters.kinds.run import (
    EvalMetrics,
    Heartbeat,
    Reward,
    RunFinished,
    RunResumed,
    RunStarted,
    StepDone,
    StepMetrics,
    StepStarted,
)

__all__ = [
    "COMPONENT_PATTERN", "CONTROL", "DEP_NOTE", "FLEET_RUN", "KIND_PATTERN", "KNOWN_KINDS",
    "MAX_EVENT_BYTES", "MAX_STACK_FRAMES", "MAX_STACK_THREADS", "RUN_ID_PATTERN",
    "CollectiveTimeout", "ComponentFailed", "DepCanary", "DepHeld", "DepReleased", "EvalMetrics",
    "Event", "EventId", "Examples", "FiniteFloat", "Fraction", "Heartbeat", "Ident",
    "InferenceStats", "Int64", "KindName", "MetricValue", "Name", "ProcessStacks", "Progress",
    "Quote", "RankStatus", "RequestDone", "RequestQueued", "Reserved", "Reward", "RunFinished",
    "RunId", "RunResumed", "RunStarted", "Source", "StackFrame", "StackThread", "StepDone",
    "StepMetrics", "StepStarted", "TrajectoryDone", "TrajectoryPhase", "TrajectoryStarted",
    "WeightsLoaded", "WeightsPublished", "Word", "describe_errors", "model_for", "note",
    "validate",
]  # fmt: skip

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
    """Validate a decoded JSON object as a contract event: the bounds that hold for the whole
    object (`out_of_bounds`), then its kind's model. Raises pydantic's ValidationError."""
    model = model_for(obj.get("kind")) if isinstance(obj, dict) else Event
    problem = out_of_bounds(obj, TYPED_FIELDS[model])
    if problem is not None:
        where, why = problem
        detail = InitErrorDetails(type=PydanticCustomError("bounds", why), loc=where, input=None)
        raise ValidationError.from_exception_data("event", [detail])
    if not isinstance(obj, dict):
        return _ENVELOPE.validate_python(obj)
    return model.model_validate(obj)

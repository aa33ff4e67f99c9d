"""The run view: what runwatch tells a run's own processes.

The engine keeps, per run, the alerts firing now and the ones a person lifted with
`run.resumed` (`runwatch resume RUN`), and, while an incident opened on a hang, a request
for the processes' stacks. `RunView` is that as one JSON object, the same model where it is
made (`Engine.run_view`) and where it is read: `runwatch serve` answers it at
`GET /v1/breaker/RUN`; the Kafka worker publishes it, each time it may have changed, to the
compacted topic `runwatch.breaker` with the run id as key.

In a training process one follower per `Emitter` (`runwatch.emitters.follower`) reads it
where the events go, parses each new record once with `RunView.parse`, and hands the view to
the circuit breaker's guard (`runwatch.emitters.guard`) and the stack responder
(`runwatch.emitters.stacks`). Pure data: the engine makes it (`Engine.run_view`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from runwatch.emitters.events import describe_errors

#: read by older and newer runwatch alike: a field it does not know is left out, not refused
_OPEN = ConfigDict(extra="ignore", frozen=True, strict=True, defer_build=True)


class ViewAlert(BaseModel):
    """An alert firing now that no person lifted."""

    model_config = _OPEN

    id: str
    rule: str
    key: str
    subject: str | None
    severity: str
    #: the config's policy for its rule: pause, stop, notify; None leaves it to the trainer
    action: str | None
    since: float


class Resumed(BaseModel):
    """The latest `run.resumed`: when, by whom, for which rule (None: every alert)."""

    model_config = _OPEN

    ts: float
    by: str | None
    rule: str | None


class StacksAsked(BaseModel):
    """An incident asked the run's processes for their stacks (`emitters/stacks.py`)."""

    model_config = _OPEN

    request: str
    at: float | None


class RunView(BaseModel):
    """One run's view (see the module docstring); `stacks` only while a request is open."""

    model_config = _OPEN

    v: Literal[1] = 1
    run: str
    #: event time of the view
    ts: float
    alerts: list[ViewAlert]
    #: firing alerts a person lifted
    lifted: int
    resumed: Resumed | None
    stacks: StacksAsked | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: `stacks` left out when nothing is asked."""
        return self.model_dump(exclude={"stacks"} if self.stacks is None else None)

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def parse(cls, raw: bytes | str | Mapping[str, Any]) -> RunView:
        """A run view from its JSON (or the dict of it); ValueError saying what is wrong."""
        try:
            obj = raw if isinstance(raw, Mapping) else orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise ValueError(f"not a run view: not JSON ({err})") from None
        if not isinstance(obj, Mapping):
            raise ValueError(f"not a run view: a JSON {type(obj).__name__}, not an object")
        try:
            return cls.model_validate(obj)
        except ValidationError as err:
            raise ValueError(f"not a run view: {describe_errors(err, limit=3)}") from None

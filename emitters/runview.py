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
(`runwatch.emitters.stacks`), and to the fleet pause (`runwatch.emitters.hold`): a run that
opted in (`hold`) has its calls to each service in `held` -- the services whose fleet
incident is open -- held. The fleet part comes from where every run is seen (`FleetView`,
made by the fleet stage), merged into one run's view by `RunView.holding`. Pure data: the
engine makes the rest (`Engine.run_view`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


#: services one view may hold (a fleet has a handful of open fleet incidents at a time)
MAX_HELD = 256


class HoldPolicy(BaseModel):
    """The run opted into the fleet pause (`run.started.config`: `shared_cause.hold`)."""

    model_config = _OPEN

    #: seconds between two canary calls let through to a held service
    canary_every: Annotated[float, Field(gt=0, allow_inf_nan=False)]


class HeldDep(BaseModel):
    """A service whose fleet incident is open: a run that opted in holds its calls to it."""

    model_config = _OPEN

    dep: Annotated[str, Field(min_length=1, max_length=200)]
    #: the fleet incident's id (`fleet|dep:NAME|N`): a new one is a new hold
    fleet: Annotated[str, Field(min_length=1, max_length=400)]
    #: event time its fleet incident began
    since: float
    #: event time the service's own process (one that sends heartbeats, its `src.instance`
    #: the service's name) beat again after it had gone silent: it is back (None: not seen)
    back: float | None = None


class FleetView(BaseModel):
    """What the fleet stage tells every run: the services whose fleet incident is open.
    (On Kafka, the record of key `@fleet` on the breaker topic; in `serve`, merged into
    each run's view.)"""

    model_config = _OPEN

    v: Literal[1] = 1
    #: the reserved run id of the fleet: a reader of the breaker topic that picks its run's
    #: records by this field, as by the key, passes over the fleet's
    run: Literal["@fleet"] = "@fleet"
    ts: float
    held: Annotated[list[HeldDep], Field(max_length=MAX_HELD)]


class RunView(BaseModel):
    """One run's view (see the module docstring); `stacks` only while a request is open,
    `hold` only for a run that opted in, `held` only while it holds something."""

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
    hold: HoldPolicy | None = None
    held: Annotated[list[HeldDep], Field(max_length=MAX_HELD)] = []

    def to_dict(self) -> dict[str, Any]:
        """The wire form: `stacks`, `hold` and `held` left out when they say nothing."""
        empty = {"stacks": self.stacks is None, "hold": self.hold is None, "held": not self.held}
        return self.model_dump(exclude={name for name, none in empty.items() if none})

    def holding(self, fleet: FleetView | Sequence[HeldDep] | None) -> RunView:
        """This view with what the run holds: the fleet's held services when it opted in
        (`hold`), else none."""
        deps = fleet.held if isinstance(fleet, FleetView) else list(fleet or ())
        held = deps if self.hold is not None else []
        return self if held == self.held else self.model_copy(update={"held": held})

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

"""The circuit breaker's view of one run: what a training loop that guards on runwatch reads.

The engine keeps, per run, the alerts firing now and the ones a person lifted with
`run.resumed` (`runwatch resume RUN`); this is that state as one JSON object. The embedded
service answers it at `GET /v1/breaker/RUN`; the Kafka worker publishes it, each time
it may have changed, to the compacted topic `runwatch.breaker` with the run id as key. The
guard in the emitter (`runwatch.emitters.guard`) turns it into pause / stop / run with the
trainer's own rule list -- the policy is data here, the decision is the guard's:

    {"v": 1, "run": str, "ts": float,            # event time of the view
     "alerts": [{"id", "rule", "key", "subject", "severity",
                 "action": "pause" | "stop" | "notify" | null,   # the config's policy
                 "since"}],                      # firing now and not lifted
     "lifted": int,                              # firing alerts a person lifted
     "resumed": {"ts", "by", "rule"} | null,     # the latest run.resumed
     "stacks": {"request", "at"}}                # (when asked) an incident wants the
                                                 # processes' stacks (emitters.stacks)
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class BreakerAlert(TypedDict):
    """An alert firing now that no person lifted."""

    id: str
    rule: str
    key: str
    subject: str | None
    severity: str
    action: str | None  # the config's policy: pause, stop, notify; None: the trainer's
    since: float


class Resumed(TypedDict):
    """The latest `run.resumed`: when, by whom, for which rule (None: every alert)."""

    ts: float
    by: str | None
    rule: str | None


class StacksAsked(TypedDict):
    """An incident asked the run's processes for their stacks (`emitters/stacks.py`)."""

    request: str
    at: float | None


class BreakerView(TypedDict):
    """The view in its wire form (see the module docstring)."""

    v: int
    run: str
    ts: float
    alerts: list[BreakerAlert]
    lifted: int
    resumed: Resumed | None
    stacks: NotRequired[StacksAsked]


def breaker_view(
    run: str,
    now: float,
    alerts: list[BreakerAlert],
    lifted: int,
    resumed: Resumed | None,
    stacks: StacksAsked | None = None,
) -> BreakerView:
    """The view in its wire form (see the module docstring)."""
    view: BreakerView = {"v": 1, "run": run, "ts": now, "alerts": alerts, "lifted": lifted,
                         "resumed": resumed}  # fmt: skip
    if stacks is not None:
        view["stacks"] = stacks
    return view

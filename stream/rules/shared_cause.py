"""`shared_cause`: the incidents of many runs share one cause -- a fleet incident.

The incident: one of three reward servers hangs; the twenty runs that use it stall within
minutes, and Slack gets twenty threads that each say "idle with trajectories pending in
phase reward", none that says "rm-2 stopped answering; 20 runs wait on it".

This rule is judged across runs, not in one: the engine never evaluates it (it watches no
kind). The fleet stage of a driver that sees every run (`runwatch.stream.fleet`: replay,
`serve`, backtest) reads its parameters here, and it is turned off like any rule
(`enabled = false`). They cannot be set per run, but for the fleet pause: `hold` (a run's
calls to a service are held while the service's fleet incident is open, a canary let
through every `canary_every`), which a run opts into in its `run.started.config` (or the
config file for every run) and the run view carries to its emitters
(`runwatch.emitters.hold`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar

from msgspec import Meta

from runwatch.stream.rules.base import QUIET, Condition, Description, Params, Rule, Seconds, Verdict
from runwatch.stream.state.run import RunState

if TYPE_CHECKING:
    from runwatch.stream.config import RulesConfig


class SharedCauseParams(Params, frozen=True):
    #: runs whose incidents share the cause, at least
    min_runs: Annotated[int, Meta(ge=2)] = 3
    #: ... opened within this much event time of each other
    window: Seconds = 600.0
    #: the share of the thing's users affected, at least
    min_share: Annotated[float, Meta(gt=0.0, le=1.0)] = 0.5
    #: ... and at least this many times the share of the runs that do not use it affected
    #: by a cause of the same kind (a node: a silent or failed process elsewhere); with no
    #: such runs, only the failures that point at it count (`stream.fleet.decide`)
    ratio: Annotated[float, Meta(ge=1.0)] = 5.0
    #: a run uses a thing it reported within this much event time
    users_within: Seconds = 3600.0
    #: the fleet pause (per run): hold the run's calls to a service while the service's
    #: fleet incident is open, rather than let them fail
    hold: bool = False
    #: ... letting one call through this often, to see whether the service is healthy again
    canary_every: Seconds = 60.0


class SharedCause(Rule[SharedCauseParams]):
    id = "shared_cause"
    severity = "critical"
    fires_when = (
        "the incidents of at least `min_runs` ({min_runs}) runs, opened within `window` "
        "({window:g} s), share one cause -- the service their stalled work waits on, the node "
        "their silent or failed processes ran on, the inference server -- and at least "
        "`min_share` ({min_share:.0%}) of its users are affected, `ratio` ({ratio:g}) times "
        "the share of the other runs (where every run uses it, only the failures that point "
        "at it count: work waiting on a service, processes gone silent on a node, not crashes "
        "with errors of their own); `run` `@fleet`, `subject` `dep:`/`host:`/`server:` NAME"
    )
    params_model = SharedCauseParams
    #: judged by the fleet stage across runs, never by the engine in one run
    fleet: ClassVar[bool] = True
    fixed_fields = ("enabled", "min_runs", "window", "min_share", "ratio", "users_within")

    def check(self, run: RunState, now: float, params: SharedCauseParams) -> Verdict:
        return QUIET

    def describe(
        self, run: RunState, cond: Condition, now: float, params: SharedCauseParams
    ) -> Description:
        raise AssertionError("shared_cause is described by the fleet stage")


def judged(config: RulesConfig) -> bool:
    """Whether `config` has fleet incidents judged (this rule on): the fleet stage runs only
    then. Beside the rule, not the stage, so that asking does not import the stage."""
    rule = config.by_id().get(SharedCause.id)
    return rule is not None and rule.params.enabled

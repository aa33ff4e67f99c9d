"""What a rule is: a pure check of one run's state at a moment of event time.

A rule returns the conditions that currently hold (ripe or not yet) and when its verdict
could change without any new event; the engine turns ripe conditions into firing alerts,
vanished ones into resolutions, and schedules the re-check. Summaries and details are built
only on a transition, so the per-event check stays cheap.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import msgspec
from msgspec import Meta

from runwatch.stream.alerts import Action, Severity
from runwatch.stream.decode_structs import KINDS
from runwatch.stream.state.run import RunState, StateConfig

#: A custom rule's id: it becomes part of alert keys, so keep it to plain characters.
RuleId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")]
#: The bounds parameters take (pydantic's names, as `Meta`: `runwatch.stream.params_check`
#: checks a table against them with pydantic's own words).
PositiveInt = Annotated[int, Meta(gt=0)]
PositiveFloat = Annotated[float, Meta(gt=0)]
NonNegativeFloat = Annotated[float, Meta(ge=0)]


class TimeValued:
    """Marks a parameter that is a duration in event-time seconds: what a simulation played
    faster than real time scales (`time_params`)."""

    def __repr__(self) -> str:
        return "TimeValued()"


#: A rule parameter that is a duration, seconds of event time.
Seconds = Annotated[float, Meta(gt=0), TimeValued()]


class Params(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every rule's parameters: a plain record, its defaults the rule's own. A
    config's table is checked against it (`runwatch.stream.params_check`): unknown keys and
    wrong types are errors naming the key (strict: `steps = "10"` is refused, not quietly
    read as 10). A subclass with a required field says `kw_only=True`."""

    #: the circuit-breaker policy of every rule, built-in or custom; unset leaves it to the
    #: trainer's guard (`Emitter.guard(rules=...)`)
    action: Action | None = None
    #: false turns the rule off (globally, or for one run in `run.started.config`): it is
    #: not evaluated, costs nothing per event, and an alert of it that fires resolves
    enabled: bool = True
    #: the rules whose alerts an alert of this one explains in an incident (unset: the
    #: built-in table, `Rule.explains`); the config file only, not per run
    explains: list[RuleId] | None = None


def dumped(params: Params) -> dict[str, Any]:
    """Parameters as a config table writes them (keys by the names a config uses)."""
    out: dict[str, Any] = msgspec.to_builtins(params)
    return out


def params_json(params: Params) -> str:
    """Parameters as JSON, keyed by field name (`for_`, not `for`), in their order: what
    a checkpoint's rules fingerprint reads (the bytes pydantic's dump gave before)."""
    return msgspec.json.encode(msgspec.structs.asdict(params)).decode()


#: The stalls of a run's downstream -- the trainer waits, the bar stops, steps slow down,
#: the idle gap grows, the policy lag grows -- which a failure upstream explains
#: (`Rule.explains` of the rules that see one).
STALLS = frozenset(
    {"stuck_progress", "ranks_stalled", "step_slowdown", "idle_gap_growing", "staleness_growing"}
)


def time_params(model: type[Params]) -> tuple[str, ...]:
    """The names of a parameter model's `Seconds` fields (as written in a config)."""
    return tuple(
        f.encode_name
        for f in msgspec.structs.fields(model)
        if typing.get_origin(f.type) is Annotated
        and any(isinstance(m, TimeValued) for m in typing.get_args(f.type)[1:])
    )


P = TypeVar("P", bound=Params)


class Condition(msgspec.Struct, gc=False):
    """One alert-worthy condition that holds now.

    `key` tells apart conditions of one rule in one run (a process, a progress bar); empty
    for run-wide rules. `fire_at` is when it becomes an alert if it keeps holding.
    Not frozen: rules build these on the per-event path, where a frozen record costs more
    to construct (bench/replay.py). Treat instances as immutable. (This module's records
    are msgspec structs, not dataclasses: defined without generating and compiling code at
    import, a cost of every `runwatch replay`'s start (bench/RESULTS.md, "replay"); it holds
    no container, so the cyclic collector need not track it.)
    """

    key: str
    since: float
    fire_at: float
    subject: str | None = None


class Verdict(msgspec.Struct, frozen=True):
    holding: tuple[Condition, ...] = ()
    #: when the verdict may change with no new event (a timeout that would expire)
    recheck_at: float | None = None


QUIET = Verdict()


class Deadlines:
    """The loop of a rule about many subjects (processes, servers, slots), each with a
    deadline: a subject whose deadline has passed holds a condition, the others say when
    the verdict may next change (the earliest deadline still ahead)."""

    __slots__ = ("held", "now", "recheck")

    def __init__(self, now: float) -> None:
        self.now = now
        self.held: list[Condition] = []
        self.recheck: float | None = None

    def due(self, key: str, since: float, deadline: float, subject: str | None = None) -> None:
        """`key` holds from `since` once `deadline` is reached."""
        if deadline <= self.now:
            self.held.append(Condition(key, since, deadline, subject))
        else:
            self.later(deadline)

    def hold(self, key: str, since: float, fire_at: float, subject: str | None = None) -> None:
        """`key` holds now (ripe at `fire_at`)."""
        self.held.append(Condition(key, since, fire_at, subject))

    def later(self, at: float | None) -> None:
        """The verdict may change at `at` (a subject's deadline, a window that lets go)."""
        if at is not None and at > self.now and (self.recheck is None or at < self.recheck):
            self.recheck = at

    def verdict(self) -> Verdict:
        return Verdict(tuple(self.held), self.recheck) if self.held or self.recheck else QUIET


class Description(msgspec.Struct, frozen=True):
    summary: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class Rule(Generic[P]):
    """A built-in or custom rule. Subclasses set the class attributes and `check`.

    A subclass with an `id` in a module of `runwatch.stream.rules` is a built-in rule (found
    there: `BUILTIN_RULES`); docs/rules.md's and
    the contract's rule tables, the simulator's time scaling and the dashboards' stall panel
    are made from these attributes (docs/architecture.md, "Adding a rule").
    """

    id: ClassVar[str] = ""
    severity: Severity = "warning"
    #: event kinds after which the verdict may have changed (known kinds, checked)
    watches: frozenset[str] = frozenset()
    params_model: type[P]
    #: one line for the rule tables: when it fires, with `{param}` for a default value
    fires_when: ClassVar[str] = ""
    #: a hang: something stopped moving (the dashboards' stall panel)
    hang: ClassVar[bool] = False
    #: a rule on silence: its conditions ripen with time in which nothing came (a deadline
    #: after a heartbeat, a quiet period, a wait that runs out), so it is judged on the
    #: clock of what has been heard (`Engine.heard`), which a live driver holds while it
    #: cannot read everything, not on event time. Every rule whose verdict asks for a
    #: re-check or holds a condition not ripe yet is one (tests/unit/stream/test_silence.py)
    silence: ClassVar[bool] = False
    #: the rules whose alerts an alert of this one explains when both fire in a run: what
    #: waits downstream of what this rule sees fail (`runwatch.stream.incidents`)
    explains: ClassVar[frozenset[str]] = frozenset()
    #: a routine heartbeat (a live process beating again, nothing else new:
    #: `RunState.postponed`) can only postpone this rule's next check, never change what
    #: holds now: the engine skips the rule on one while none of its alerts fire in the run
    skips_routine_beats: ClassVar[bool] = False
    #: a process's `final` beat (a clean exit, nothing else new) can only take a deadline
    #: away: the engine skips the rule on one while none of its alerts fire in the run (the
    #: check it has scheduled then comes early, which changes nothing)
    skips_final_beats: ClassVar[bool] = False
    #: evidence of an incident (stacks), not a fault: its condition's key is the id of the
    #: incident it joins, and it is never the root
    evidence: ClassVar[bool] = False
    #: its conditions wait only to gather what several processes say (collective_timeout's
    #: `settle`): a run's end, after which nothing more comes, completes the gathering, so a
    #: condition that holds then (`gathered`) fires at the end, before the end closes it
    gathers: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(cls.__dict__.get("watches", ())) - set(KINDS))
        if unknown:  # a typo would leave the rule never evaluated
            raise TypeError(f"{cls.__name__}.watches: no event kind {', '.join(unknown)}")

    def __init__(self, params: P) -> None:
        self.params = params  # the global (config file) parameters

    @property
    def rule_id(self) -> str:
        return self.id

    def explained(self) -> frozenset[str]:
        """The rules this rule's alerts explain under the config in force."""
        listed = self.params.explains
        return type(self).explains if listed is None else frozenset(listed)

    def severity_of(self, params: P) -> Severity:
        """Built-in rules have a fixed severity; custom rules carry theirs in params."""
        sev: Severity = getattr(params, "severity", self.severity)
        return sev

    def state_needs(self, params: P, base: StateConfig) -> StateConfig:
        """What the run state must keep for this rule with these parameters."""
        return base

    def check(self, run: RunState, now: float, params: P) -> Verdict:
        raise NotImplementedError

    def gathered(self, run: RunState, now: float, params: P) -> Verdict:
        """What a rule that gathers (`gathers`) holds at its run's end, which completes the
        gathering: `check`, unless the rule says otherwise."""
        return self.check(run, now, params)

    def quiet(self, run: RunState) -> bool:
        """A cheap test that `check` would hold nothing and ask for no recheck, whatever
        the parameters: where it is true and the rule neither fires nor waits on a timer in
        the run, the engine does not evaluate it (that would change nothing). Rules that
        say nothing most of the time on events they watch override it; True must be exact."""
        return False

    def describe(self, run: RunState, cond: Condition, now: float, params: P) -> Description:
        """Summary and evidence for a firing; called only on the transition."""
        raise NotImplementedError

    def describe_resolved(
        self, run: RunState, cond: Condition, now: float, params: P
    ) -> Description:
        who = f" ({cond.subject})" if cond.subject else ""
        return Description(
            f"{self.rule_id}{who} resolved after {fmt_duration(now - cond.since)}",
            {"duration_s": round(now - cond.since, 3)},
        )


def run_finished(rule_id: str, run: RunState, cond: Condition, at: float) -> Description:
    """The resolution of an alert still firing when its run finished (contract section 8):
    the run's end closes its alerts, saying why."""
    who = f" ({cond.subject})" if cond.subject else ""
    held = max(0.0, at - cond.since)
    return Description(
        f"{rule_id}{who} resolved after {fmt_duration(held)}: the run finished ({run.status})",
        {"reason": "run_finished", "status": run.status, "duration_s": round(held, 3)},
    )


def fmt_duration(seconds: float) -> str:
    """Human duration: 0.4s, 45s, 14m, 1h39m (never "0s" for a pace measured in ms)."""
    if seconds < 9.95:
        return "<0.1s" if seconds < 0.05 else f"{max(0.0, seconds):.1f}s"
    s = max(0, round(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 120:
        return f"{m}m"
    return f"{m // 60}h{m % 60:02d}m"

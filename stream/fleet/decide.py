"""The fleet decision: pure, on event time, driven by run-incident summaries.

Input: one `Summary` per run incident and cause as it opens and closes (what a Kafka stage
would carry re-keyed by cause), and a `Population` that says which runs use a thing and
which are active (in one process: the engine's run states). Output: `Change`s -- a fleet
incident opened, joined, resolved.

When a run incident naming thing C opens at t, C's fleet incident opens if

- the incidents naming C opened within `window` before t come from at least `min_runs`
  runs (the affected runs), and
- they are at least `min_share` of C's users (the runs that reported C within
  `users_within`; the affected ones are users by definition), and
- that share is at least `ratio` times the share of the other active runs *affected by a
  cause of the same kind* within the window -- the contrast.

"Affected" is per kind because the base rate must be of the same kind of failure. Counted
as "any incident", the runs that do not use a node would count every stall and NaN of a
busy fleet -- with 30 of 60 runs in trouble for other reasons, a node whose 4 runs all died
would fail the test (4/4 against 26/56) -- while a failure of its kind elsewhere (a process
that went silent or failed on another node) is what a coincidence looks like. And a run is
affected by C only when its incident's root names C, so `details.runs` never names a run C
did not affect.

Where every active run uses C there is no contrast (every run of a one-machine `serve` is
on its one host), and then only the failures that *point at* C count (`Summary.points`,
`causes.points_at`): at least `min_runs` of them, `min_share` of C's users. Work that waits
on a service points at it -- when one reward server serves every run and hangs, each run's
alert says "the work waits on reward@rm-1:8000", which independent failures do not say
together; so do processes that go silent on a node (a node that dies, or is cut off,
silences every process on it, and a silent process gives no reason of its own). A process
that fails with its own exception or exit status, or an inference engine that stalls,
says only where it happened: three jobs on one machine that crash within seconds of each
other share the machine as they share everything, and make no fleet incident. With runs
elsewhere, those count too (a full disk or a bad GPU makes a node's processes raise): the
contrast says whether the node is special.

Open, it takes every later incident naming C (joiners); it resolves when the last of its
member incidents has closed.
"""

from __future__ import annotations

from collections import deque
from typing import Literal, Protocol, TypeVar

import msgspec

from runwatch.stream.fleet.causes import subject
from runwatch.stream.rules.shared_cause import SharedCauseParams
from runwatch.stream.state.fleet import FleetIncident, FleetState, Thing


class Summary(msgspec.Struct, frozen=True):
    """One run incident naming one cause, as it opened (`open`) or closed, at event time;
    `points`: its failure points at the cause, not only happened there (module docstring)."""

    thing: Thing
    run: str
    incident: str
    ts: float
    open: bool
    points: bool = False


class Population(Protocol):
    """Who uses what: the runs that reported `thing` since `since`, the runs active since."""

    def users(self, thing: Thing, since: float) -> set[str]: ...

    def active(self, since: float) -> set[str]: ...


class Figures(msgspec.Struct, frozen=True):
    """Why a fleet incident opened: the counts behind its tests (`pointed`: the affected
    runs whose failures point at the thing, which alone count where there are no others)."""

    affected: int
    users: int
    others: int
    others_affected: int
    pointed: int = 0

    @property
    def share(self) -> float:
        return self.affected / self.users

    @property
    def others_share(self) -> float:
        return self.others_affected / self.others if self.others else 0.0

    def shared(self, p: SharedCauseParams) -> bool:
        """The test (module docstring): against the others where there are some, else on
        the failures that point at the thing alone."""
        if not self.others:
            return self.pointed >= p.min_runs and self.pointed >= p.min_share * self.users
        return self.share >= p.min_share and self.share >= p.ratio * self.others_share


class Change(msgspec.Struct, frozen=True):
    """What a summary did to a fleet incident."""

    what: Literal["opened", "joined", "resolved"]
    fleet: FleetIncident
    ts: float
    figures: Figures | None = None  # for "opened"


def fleet_id(thing: Thing, number: int) -> str:
    """`fleet|KIND:NAME|N`: the thing's n-th fleet incident, the same in every replay."""
    return f"fleet|{subject(thing)}|{number}"


class FleetBook:
    """Fleet incidents from run-incident summaries (module docstring)."""

    def __init__(self, state: FleetState, params: SharedCauseParams) -> None:
        self.state = state
        self.params = params

    def summary(self, s: Summary, population: Population) -> list[Change]:
        return self._opened(s, population) if s.open else self._closed(s)

    def _opened(self, s: Summary, population: Population) -> list[Change]:
        state, p = self.state, self.params
        state.open[s.incident] = s.run
        recent = _window(state.recent.setdefault(s.thing, deque()), s.ts - p.window)
        recent.append((s.ts, s.run, s.incident))
        kind = _window(state.kinds.setdefault(s.thing[0], deque()), s.ts - p.window)
        kind.append((s.ts, s.run))
        pointing = _window(state.pointing.setdefault(s.thing, deque()), s.ts - p.window)
        if s.points:
            pointing.append((s.ts, s.run))
        fleet = state.fleets.get(s.thing)
        if fleet is not None:
            self._join(fleet, s.incident, s.run)
            return [Change("joined", fleet, s.ts)]
        affected = {run for _, run, _ in recent}
        if len(affected) < p.min_runs:
            return []
        since = s.ts - p.users_within
        users = population.users(s.thing, since) | affected
        others = (population.active(since) | affected) - users
        others_affected = {run for _, run in kind} & others
        pointed = {run for _, run in pointing}
        figures = Figures(
            len(affected), len(users), len(others), len(others_affected), len(pointed)
        )
        if not figures.shared(p):
            return []
        number = state.numbers.get(s.thing, 0) + 1
        state.numbers[s.thing] = number
        fleet = FleetIncident(s.thing, fleet_id(s.thing, number), s.ts, recent[0][0])
        fleet.founders = sorted(affected)
        state.fleets[s.thing] = fleet
        for _, run, incident in recent:
            fleet.members[incident] = run
            if incident in state.open:
                self._join(fleet, incident, run)
        return [Change("opened", fleet, s.ts, figures)]

    def _join(self, fleet: FleetIncident, incident: str, run: str) -> None:
        fleet.members[incident] = run
        fleet.open_members.add(incident)
        self.state.member_of.setdefault(incident, fleet.id)

    def _closed(self, s: Summary) -> list[Change]:
        state = self.state
        state.open.pop(s.incident, None)
        fleet = state.fleets.get(s.thing)
        if fleet is None or s.incident not in fleet.open_members:
            return []
        fleet.open_members.discard(s.incident)
        if state.member_of.get(s.incident) == fleet.id:
            del state.member_of[s.incident]
        if fleet.open_members:
            return []
        del state.fleets[s.thing]
        return [Change("resolved", fleet, s.ts)]


E = TypeVar("E", tuple[float, str, str], tuple[float, str])


def _window(entries: deque[E], start: float) -> deque[E]:
    """`entries` without those before `start` (they come in event-time order)."""
    while entries and entries[0][0] < start:
        entries.popleft()
    return entries

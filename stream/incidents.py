"""Incidents: the alerts of one run that overlap in time and belong to one fault, and the
one among them that explains the others (the root cause).

Pure: the engine hands each alert transition it makes to one place, `Bookkeeper.record`,
on event time, so a replay, `serve` and the Kafka worker (rebuilt or not) put every
transition in the same incident under the same id; the bookkeeper also asks a hang's
processes for their stacks and lets them go when the incident closes. Which rule's alert
explains which is a table (`Rule.explains`, overridable per rule with `explains = [...]` in
the config, custom rules included):
upstream explains downstream -- a failed or silent component explains the stalls and
empty rewards of what waits on it.

Grouping goes one way only. A firing joins an open incident of its run only when that
incident's root explains it (directly or through a chain of the table): it is then a
symptom. Anything else opens the run's next incident, with the firing as its root -- an
alert that overlaps but is unrelated, and also one that would explain the root (an upstream
failure read after the stall it caused: the stall was already reported as a root, and an
incident never changes its root). So every incident has exactly one root, from its first
transition to its last, and a root keeps naming one cause (what the fleet stage groups).
It closes when its last alert resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from runwatch.stream.state.incidents import Incident, Member, RunIncidents

if TYPE_CHECKING:
    from runwatch.stream.rules.base import Condition, Rule
    from runwatch.stream.state.run import RunState

#: what the engine keeps per run beside its incidents (its tracked run): handed back by
#: `Bookkeeper.settled` for the engine to evaluate the run's evidence rules again
Owner = TypeVar("Owner")


class IncidentRef(msgspec.Struct, frozen=True):
    """What an alert transition says about its incident (the alert format's `incident`)."""

    id: str
    role: str  # "root" | "symptom" | "evidence"
    root: str  # the root alert's key
    root_rule: str
    opened: float
    open: bool  # after this transition, some alert of the incident still fires
    #: the fleet incident (contract section 8: `incident.fleet`) the run's incident belongs to
    fleet: str | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "role": self.role, "root": self.root,
                                  "root_rule": self.root_rule, "opened": self.opened,
                                  "open": self.open}  # fmt: skip
        if self.fleet is not None:
            out["fleet"] = self.fleet
        return out


def incident_id(run: str, number: int) -> str:
    """`incident|RUN|N`: the run's n-th incident, the same in every replay."""
    return f"incident|{run}|{number}"


class IncidentGraph:
    """Which rule's alert explains which, directly or through others."""

    def __init__(self, explains: Mapping[str, Iterable[str]]) -> None:
        direct = {rule: set(targets) for rule, targets in explains.items()}
        self.reach: dict[str, frozenset[str]] = {}
        for rule in direct:
            seen: set[str] = set()
            todo = list(direct[rule])
            while todo:
                other = todo.pop()
                if other not in seen:
                    seen.add(other)
                    todo += direct.get(other, ())
            self.reach[rule] = frozenset(seen)

    def explains(self, a: str, b: str) -> bool:
        """Whether an alert of rule `a` explains one of rule `b` (through others too)."""
        return b in self.reach.get(a, ())


def place(
    incidents: RunIncidents,
    graph: IncidentGraph,
    run: str,
    key: str,
    rule: str,
    since: float,
    firing: bool,
    now: float,
    evidence_of: str | None = None,
) -> IncidentRef | None:
    """Put one transition of alert `key` in its incident and say which and in what role.
    `evidence_of`: the incident an evidence rule's alert belongs to (it joins that one).
    None for a resolution of an alert in no incident (a state from before incidents), and
    for evidence of an incident that is not open."""
    incident = next((i for i in incidents.open if key in i.members), None)
    closed = incidents.closed
    if incident is None and not firing and closed is not None and key in closed.members:
        closed.members[key].firing = False  # evidence, resolving after its incident closed
        return _ref(run, closed, key, False)
    if evidence_of is not None:
        if incident is None:
            incident = next((i for i in incidents.open
                             if incident_id(run, i.number) == evidence_of), None)  # fmt: skip
        if incident is None:
            return None
        member = incident.members.setdefault(key, Member(rule, since, evidence=True))
        member.firing = firing
        return _ref(run, incident, key, True)
    if firing:
        if incident is None:
            incident = _explaining(incidents.open, graph, rule)
        if incident is None:
            incidents.count += 1
            incident = Incident(incidents.count, now)
            incident.root = key
            incidents.open.append(incident)
        found = incident.members.get(key)
        if found is None:
            incident.members[key] = Member(rule, since)
        else:
            found.firing, found.since = True, since
    elif incident is not None:
        incident.members[key].firing = False
    else:
        return None
    still = any(m.firing and not m.evidence for m in incident.members.values())
    if not still:
        incidents.open.remove(incident)
        incidents.closed = incident
    return _ref(run, incident, key, still)


def _ref(run: str, incident: Incident, key: str, still: bool) -> IncidentRef:
    member = incident.members[key]
    role = "evidence" if member.evidence else "root" if key == incident.root else "symptom"
    root = incident.members[incident.root]
    ident = incident_id(run, incident.number)
    return IncidentRef(ident, role, incident.root, root.rule, incident.opened, still)


def _explaining(open_: list[Incident], graph: IncidentGraph, rule: str) -> Incident | None:
    """The open incident whose root explains an alert of `rule`: of several, the one whose
    root no other of them explains (the most upstream cause), then the earliest."""
    roots = {i.number: i.members[i.root].rule for i in open_}
    found = [i for i in open_ if graph.explains(roots[i.number], rule)]
    upstream = [
        i for i in found
        if not any(graph.explains(roots[o.number], roots[i.number])
                   and not graph.explains(roots[i.number], roots[o.number]) for o in found)
    ] or found  # fmt: skip
    return upstream[0] if upstream else None


class Bookkeeper(Generic[Owner]):
    """The engine's one call for incidents: each alert transition placed in its incident
    (`record`), the stacks a hang's incident asks for, and what an incident that closed lets
    go of (`settled`). `view_changed(run)` is told when a run's view (the stacks request it
    carries to the emitters) changed."""

    def __init__(self, graph: IncidentGraph, view_changed: Callable[[str], None]) -> None:
        self.graph = graph
        self._view_changed = view_changed
        #: incidents closed by a transition, not yet settled: the engine calls `settled`
        #: only while this holds one (a call per rule evaluation cost a generator each)
        self.closed: list[tuple[Owner, RunState, str]] = []

    def record(
        self,
        owner: Owner,
        incidents: RunIncidents,
        run: RunState,
        key: str,
        rule: Rule[Any],
        cond: Condition,
        firing: bool,
        now: float,
    ) -> IncidentRef | None:
        """Place one transition of alert `key` and say its incident (the alert's field).
        A hang's firing asks the run's processes for their stacks, once per incident."""
        ref = place(incidents, self.graph, run.run, key, rule.rule_id, cond.since, firing, now,
                    cond.key if rule.evidence else None)  # fmt: skip
        if ref is not None:
            if firing and rule.hang and run.own_stacks().ask(ref.id, now):
                self._view_changed(run.run)  # the emitters read the request there
            elif not ref.open and ref.role != "evidence":
                self.closed.append((owner, run, ref.id))
        return ref

    def settled(self) -> Iterator[Owner]:
        """The runs with an incident closed since the last call whose request for stacks
        went with it: the evidence that answered it resolves (the caller evaluates their
        evidence rules again; what that closes is yielded too)."""
        while self.closed:
            owner, run, ident = self.closed.pop()
            if run.stacks.clear(ident):
                self._view_changed(run.run)
                yield owner


def open_summaries(run: str, incidents: RunIncidents) -> list[dict[str, Any]]:
    """The incidents of `run` open now: their id, root and alerts."""
    out: list[dict[str, Any]] = []
    for i in incidents.open:
        root = i.members[i.root]
        out.append({"id": incident_id(run, i.number), "run": run, "opened": i.opened,
                    "root": i.root, "root_rule": root.rule,
                    "alerts": {k: {"rule": m.rule, "since": m.since, "firing": m.firing}
                               for k, m in i.members.items()}})  # fmt: skip
    return out

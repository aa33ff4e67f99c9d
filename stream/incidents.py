"""Incidents: the alerts of one run that overlap in time and belong to one fault, and the
one among them that explains the others (the root cause).

Pure: the engine calls `place` with each alert transition it makes, on event time, so a
replay, `serve` and the Kafka worker (rebuilt or not) put every transition in the same
incident under the same id. Which rule's alert explains which is a table (`Rule.explains`,
overridable per rule with `explains = [...]` in the config, custom rules included):
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runwatch.stream.state.incidents import Incident, Member, RunIncidents


@dataclass(frozen=True, slots=True)
class IncidentRef:
    """What an alert transition says about its incident (the alert format's `incident`)."""

    id: str
    role: str  # "root" | "symptom" | "evidence"
    root: str  # the root alert's key
    root_rule: str
    opened: float
    open: bool  # after this transition, some alert of the incident still fires

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "role": self.role, "root": self.root,
                "root_rule": self.root_rule, "opened": self.opened, "open": self.open}  # fmt: skip


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

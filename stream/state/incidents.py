"""A run's open incidents: which of its alerts belong together, and which one is the root.

State only (the engine keeps one `RunIncidents` per run and checkpoints it with the rest);
the grouping and the choice of root are `runwatch.stream.incidents`. An incident lives while
one of its alerts fires and is let go when the last one resolves, so the state is bounded by
the alerts a run has firing.
"""

from __future__ import annotations


class Member:
    """One alert of an incident: its rule, when its condition began, whether it fires."""

    __slots__ = ("evidence", "firing", "rule", "since")

    def __init__(self, rule: str, since: float, evidence: bool = False) -> None:
        self.rule = rule
        self.since = since
        self.firing = True
        self.evidence = evidence  # what the incident found out (stacks), not a fault


class Incident:
    """Alerts of one run that overlap in time and belong to one fault (by alert key)."""

    __slots__ = ("members", "number", "opened", "root")

    def __init__(self, number: int, opened: float) -> None:
        self.number = number  # the run's n-th incident: its id is deterministic
        self.opened = opened
        self.members: dict[str, Member] = {}
        self.root = ""  # the member's key that explains the others


class RunIncidents:
    """The incidents of one run that are open, and how many it has had."""

    __slots__ = ("closed", "count", "open")

    def __init__(self) -> None:
        self.count = 0
        self.open: list[Incident] = []
        self.closed: Incident | None = None  # the latest closed: its evidence resolves after

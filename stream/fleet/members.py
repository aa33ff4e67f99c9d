"""Which run incidents belong to which fleet incident, told back to the Kafka workers, so
that a member run's own transitions carry `incident.fleet` (contract section 8) on the Kafka
path as they do in replay. Pure: the record, checked at one boundary, and the stamp.

The fleet stage (`stream/kafka/fleet_stage.py`) publishes its decisions -- each open fleet
incident, its subject, when it opened and the open run incidents that belong to it -- as one
record (`Members`, key `@fleet`) on the compacted `runwatch.fleet.members` whenever they
change, in the same fenced transaction as its transitions. Every worker follows that record
and stamps each transition it publishes (`Membership.stamp`):

- a transition of a run incident the stage counts as a member of fleet incident F, stamped
  at or after F opened, carries F's id -- as in replay, where a founder's transitions carry
  it from the fleet incident's opening on, and until (and with) the incident's closing;
- a run incident that opens (its root fires) naming the thing of a fleet incident the
  worker knows is open joins it at once: its first transition carries the id, as replay's
  joiners do, and so do its later ones.

What cannot be equal: the stage decides on event time behind a watermark, and a worker
publishes at once. A transition published before the worker has read the decision that
makes its incident a member carries no `incident.fleet` (a founder's between the fleet
incident's opening and the decision reaching its worker, a joiner's first when it opened
within that time); the next one does. And a joiner stamped at once with a fleet incident
that had in fact resolved in the stage's last seconds of event time (its last members healed
just then) carries that id where replay would carry none. Each transition goes out once
either way: the stamp is made as it is published, in the partition's transaction, and a
takeover re-makes only what was never committed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from msgspec.structs import replace

from runwatch.emitters.events import FLEET_RUN
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidFleetRecord
from runwatch.stream.fleet.causes import causes, subject
from runwatch.stream.state.fleet import FleetState

#: The record's key on the members topic (the reserved run id: no run's).
KEY = FLEET_RUN.encode()
#: Member incidents a record names, at most (beyond: their transitions go unstamped).
MAX_INCIDENTS = 20_000


@dataclass(frozen=True, slots=True)
class Fleet:
    """One open fleet incident as the workers are told it."""

    id: str
    subject: str
    opened: float
    incidents: tuple[str, ...]  # the open run incidents that belong to it


@dataclass(frozen=True, slots=True)
class Members:
    """The open fleet incidents and their member run incidents (module docstring)."""

    fleets: tuple[Fleet, ...] = ()

    @classmethod
    def of(cls, state: FleetState) -> Members:
        """What `state` (the stage's, as of its watermark) tells the workers."""
        by_fleet: dict[str, list[str]] = {}
        for incident, fleet in state.member_of.items():
            by_fleet.setdefault(fleet, []).append(incident)
        fleets, left = [], MAX_INCIDENTS
        for thing, f in sorted(state.fleets.items()):
            named = sorted(by_fleet.get(f.id, ()))[: max(left, 0)]
            left -= len(named)
            fleets.append(Fleet(f.id, subject(thing), f.opened, tuple(named)))
        return cls(tuple(fleets))

    def encode(self) -> bytes:
        return orjson.dumps({"v": 1, "fleets": [
            {"id": f.id, "subject": f.subject, "opened": f.opened, "incidents": f.incidents}
            for f in self.fleets]})  # fmt: skip

    @classmethod
    def decode(cls, value: bytes | None) -> Members:
        """One value of the members topic, checked; raises InvalidFleetRecord with why."""
        try:
            obj = orjson.loads(value or b"")
        except orjson.JSONDecodeError as err:
            raise InvalidFleetRecord(f"not JSON: {err}") from None
        if not isinstance(obj, dict) or obj.get("v") != 1:
            raise InvalidFleetRecord("a members record must be a JSON object of version 1")
        fleets = obj.get("fleets")
        if not isinstance(fleets, list):
            raise InvalidFleetRecord("'fleets' must be a list")
        return cls(tuple(_fleet(f) for f in fleets))


def _fleet(obj: object) -> Fleet:
    if not isinstance(obj, dict):
        raise InvalidFleetRecord("each fleet must be an object")
    ident, name, opened, incidents = (obj.get(k) for k in ("id", "subject", "opened",
                                                           "incidents"))  # fmt: skip
    if not isinstance(ident, str) or not isinstance(name, str):
        raise InvalidFleetRecord("a fleet's 'id' and 'subject' must be strings")
    if not isinstance(opened, int | float) or isinstance(opened, bool) or not math.isfinite(opened):
        raise InvalidFleetRecord("a fleet's 'opened' must be a finite number")
    if not isinstance(incidents, list) or not all(isinstance(i, str) for i in incidents):
        raise InvalidFleetRecord("a fleet's 'incidents' must be a list of incident ids")
    return Fleet(ident, name, float(opened), tuple(incidents))


class Membership:
    """A worker's copy of the stage's decisions, and the stamp it puts on its transitions
    (module docstring)."""

    def __init__(self) -> None:
        self.member_of: dict[str, tuple[str, float]] = {}  # incident -> (fleet id, opened)
        self.open: dict[str, tuple[str, float]] = {}  # fleet subject -> (id, opened)
        #: incidents this worker joined to a fleet incident as they opened, until the stage
        #: names them (or their fleet incident is gone)
        self.joined: dict[str, str] = {}

    def update(self, members: Members) -> None:
        """The stage's newest decisions."""
        self.member_of = {i: (f.id, f.opened) for f in members.fleets for i in f.incidents}
        self.open = {f.subject: (f.id, f.opened) for f in members.fleets}
        ids = {f.id for f in members.fleets}
        self.joined = {i: f for i, f in self.joined.items() if f in ids and i not in
                       self.member_of}  # fmt: skip

    def stamp(self, alerts: Iterable[Alert]) -> list[Alert]:
        """`alerts`, each of a member run incident carrying its fleet incident's id."""
        out = []
        for alert in alerts:
            ref = alert.incident
            if ref is None or ref.fleet is not None or alert.run == FLEET_RUN:
                out.append(alert)
                continue
            fleet = self._fleet(alert)
            if not ref.open:
                self.joined.pop(ref.id, None)
            out.append(alert if fleet is None else replace(
                alert, incident=replace(ref, fleet=fleet)))  # fmt: skip
        return out

    def _fleet(self, alert: Alert) -> str | None:
        ref = alert.incident
        assert ref is not None
        decided = self.member_of.get(ref.id)
        if decided is not None:
            return decided[0] if alert.ts >= decided[1] else None
        joined = self.joined.get(ref.id)
        if joined is not None:
            return joined
        if not (ref.open and ref.role == "root" and alert.firing and alert.ts == ref.opened):
            return None
        for thing in causes(alert):  # it opens: a joiner of the first open one it names
            found = self.open.get(subject(thing))
            if found is not None and found[1] <= alert.ts:
                self.joined[ref.id] = found[0]
                return found[0]
        return None

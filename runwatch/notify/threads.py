"""What a thread is, and what each alert transition shown in it makes of it -- pure.

A thread is one Slack thread: an incident's (its alerts are replies, its root message says the
root cause and the chain), an alert key's (from older producers), or a fleet incident's (the
runs that share one cause: `runwatch.notify.fleet`). `after` says how a transition shown in
it changes it; `Message` is one reply of ours, section by section (a burst folded into one
message is several sections); `After` is what sending one message makes of the ledger.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from msgspec.structs import replace as replace_alert

from runwatch.emitters.events import FLEET_RUN
from runwatch.stream.alerts import Alert
from runwatch.stream.incidents import IncidentRef


@dataclass(frozen=True)
class Thread:
    key: str
    channel: str
    ts: str
    run: str
    rule: str
    severity: str
    state: str
    since: float
    summary: str
    alert: Alert
    last_notified: float
    reminders: int
    #: an incident's thread: its alerts by key, the latest transition of each (brief)
    members: dict[str, Alert] = field(default_factory=dict)
    #: a run's incident that is part of a fleet incident: the fleet incident's id (its thread
    #: is the fleet thread's, or links to it: `[slack] member_threads`)
    fleet: str | None = None
    #: the root message's permalink, once another thread has linked to it
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in THREAD_FIELDS}
        out["alert"] = self.alert.to_dict()
        out["members"] = {k: m.to_dict() for k, m in self.members.items()}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Thread:
        members = {k: Alert.from_dict(m) for k, m in d["members"].items()}
        return cls(**{**d, "alert": Alert.from_dict(d["alert"]), "members": members})


THREAD_FIELDS = ("key", "channel", "ts", "run", "rule", "severity", "state", "since", "summary",
                 "alert", "last_notified", "reminders", "members", "fleet", "link")  # fmt: skip


@dataclass(frozen=True)
class Section:
    """What one part of a message shows: the transitions (ids) and its text."""

    ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Message:
    """A reply (or reminder) of ours in a thread, as it shows now: `sections` in order."""

    channel: str
    ts: str
    key: str  # its thread
    kind: str  # "reply" | "reminder"
    posted: float  # when it was posted (the notifier's clock)
    sections: tuple[Section, ...]

    @property
    def ids(self) -> list[str]:
        return [i for s in self.sections for i in s.ids]

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "ts": self.ts, "key": self.key, "kind": self.kind,
                "posted": self.posted,
                "sections": [[list(s.ids), s.text] for s in self.sections]}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Message:
        sections = tuple(Section(tuple(ids), str(text)) for ids, text in d["sections"])
        return cls(str(d["channel"]), str(d["ts"]), str(d["key"]), str(d["kind"]),
                   float(d["posted"]), sections)  # fmt: skip


@dataclass(frozen=True)
class After:
    """What sending one message (or edit) makes of the ledger: kept with its pending ids, so
    a message found after a crash is recorded as its sending would have recorded it."""

    what: str  # "reply" | "fold" | ...
    thread: Thread
    message: Message | None = None

    def to_json(self) -> str:
        message = None if self.message is None else self.message.to_dict()
        return json.dumps({"what": self.what, "thread": self.thread.to_dict(),
                           "message": message}, default=str)  # fmt: skip

    @classmethod
    def from_json(cls, raw: str) -> After:
        d = json.loads(raw)
        message = None if d.get("message") is None else Message.from_dict(d["message"])
        return cls(str(d["what"]), Thread.from_dict(d["thread"]), message)


# -- what a transition makes of a thread --------------------------------------------------------


def brief(a: Alert) -> Alert:
    """What a thread keeps of a transition (and a root message's metadata carries): the alert
    less its labels and breaker policy, and less its details but a fleet alert's runs (its
    root message counts them)."""
    runs = a.details.get("runs") if a.incident is not None and a.run == FLEET_RUN else None
    details = {"runs": runs} if isinstance(runs, list) else {}
    return replace_alert(a, details=details, labels={}, action=None)


def firing_of(a: Alert, th: Thread) -> Alert | None:
    """The firing of `a`'s alert as its thread shows it, if it is firing there."""
    firing = th.members.get(a.key) if a.incident is not None else th.alert
    return firing if firing is not None and firing.firing and firing.key == a.key else None


def after(th: Thread, a: Alert, now: float) -> Thread:
    """A thread after transition `a` was shown in it."""
    if th.run == FLEET_RUN:
        return in_fleet(th, a, now)
    if a.incident is not None:
        return _in_incident(th, a, now)
    if not a.firing:
        return dataclasses.replace(th, state="resolved", last_notified=now)
    return dataclasses.replace(th, state="firing", since=a.since, summary=a.summary, alert=a,
                               last_notified=now, reminders=0)  # fmt: skip


def _shown(members: Mapping[str, Alert], a: Alert) -> dict[str, Alert]:
    """An incident's alerts after `a`: a firing's brief, or the firing marked resolved."""
    out = dict(members)
    if a.firing:
        out[a.key] = brief(a)
    elif a.key in out:  # keeps the firing's summary, marked resolved
        out[a.key] = replace_alert(out[a.key], state="resolved")
    return out


def _in_incident(th: Thread, a: Alert, now: float) -> Thread:
    """An incident's thread after transition `a`: its alerts, its root, open or closed."""
    incident = a.incident
    assert incident is not None
    members = _shown(th.members, a)
    if incident.root == a.key and a.firing:
        root = a
    elif incident.root == th.alert.key:
        root = th.alert
    else:
        root = members.get(incident.root, th.alert)
    return dataclasses.replace(
        th,
        state="firing" if incident.open else "resolved",
        rule=root.rule,
        since=root.since,
        summary=root.summary,
        alert=root,
        members=members,
        last_notified=now,
        reminders=0 if a.firing else th.reminders,
    )


def new_thread(a: Alert, key: str, channel: str, ts: str, now: float) -> Thread:
    """The thread whose root message shows `a`."""
    return Thread(
        key=key,
        channel=channel,
        ts=ts,
        run=a.run,
        rule=a.rule,
        severity=a.severity,
        state=a.state,
        since=a.since,
        summary=a.summary,
        alert=brief(a) if a.run == FLEET_RUN else a,
        last_notified=now,
        reminders=0,
        members={a.key: brief(a)} if a.incident is not None else {},
        fleet=a.incident.fleet if a.incident is not None else None,
    )


# -- a fleet incident's thread ------------------------------------------------------------------

#: what a fleet thread's root says of its cause before the fleet alert itself arrived
UNNAMED = "runs stalled together: their shared cause is being named"


def placeholder(fleet: str, member: Alert) -> Alert:
    """The stand-in root of a fleet thread opened by a member's transition that arrived
    before the fleet alert (Kafka orders by run, and the fleet alert is a run of its own):
    replaced by the fleet alert when it comes (`is_placeholder`)."""
    key = f"fleet:{fleet}"
    ref = IncidentRef(fleet, "root", key, "shared_cause", member.ts, True)
    return Alert(id=key, ts=member.ts, rule="shared_cause", run=FLEET_RUN, state="firing",
                 severity=member.severity, key=key, since=member.since, summary=UNNAMED,
                 incident=ref)  # fmt: skip


def is_placeholder(th: Thread) -> bool:
    return th.run == FLEET_RUN and th.alert.key == f"fleet:{th.key}"


def in_fleet(th: Thread, a: Alert, now: float) -> Thread:
    """A fleet thread after `a`: the fleet alert's own transitions set its state and root; a
    member's join its runs (and, before the fleet alert came, its state)."""
    members = _shown(th.members, a)
    if a.run == FLEET_RUN:
        runs = a.details.get("runs")
        root = brief(a) if a.firing else replace_alert(
            th.alert, state="resolved", details={"runs": runs} if isinstance(runs, list)
            else th.alert.details)  # fmt: skip
        return dataclasses.replace(
            th, state=a.state, rule=root.rule, severity=root.severity, since=root.since,
            summary=root.summary, alert=root, members=members, last_notified=now,
            reminders=0 if a.firing else th.reminders)  # fmt: skip
    state = th.state
    if is_placeholder(th):  # no fleet alert yet: open while a member fires
        state = "firing" if any(m.firing for m in members.values() if m.run != FLEET_RUN) \
            else "resolved"  # fmt: skip
    return dataclasses.replace(th, state=state, members=members, last_notified=now)


def runs_of(th: Thread) -> dict[str, bool]:
    """A fleet thread's runs: run -> whether it is still affected (some alert of it firing);
    the runs the fleet alert names that the thread has not seen count as affected."""
    out: dict[str, bool] = {}
    for m in th.members.values():
        if m.run != FLEET_RUN:
            out[m.run] = out.get(m.run, False) or m.firing
    named = th.alert.details.get("runs")
    for run in named if isinstance(named, list) else ():
        out.setdefault(str(run), th.state == "firing")
    return out

"""Alert transitions in the contract's format (section 3), as one type at every boundary.

An `Alert` is made by the engine, written to `runwatch.alerts` (or the service's alert log) as
JSON by `to_json`, and read back by every consumer (the sink, the notifier, `runwatch alerts`,
a restarted worker or service) through `from_json` / `from_dict`, which check the contract's
fields and types and raise `InvalidAlert` with the reason -- so no consumer decodes the dict
its own way, and none fails later on a field that is missing or of the wrong type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, get_args

import msgspec
import orjson

from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.incidents import IncidentRef

try:  # CPython's own SHA-1, the digest `hashlib.sha1` gives, without loading OpenSSL at start
    from _sha1 import sha1  # type: ignore[import-not-found]
except ImportError:  # (an interpreter built without it)
    from hashlib import sha1

AlertState = Literal["firing", "resolved"]
Severity = Literal["critical", "warning", "info"]
#: What a firing alert asks of the training loop that guards on it (`Emitter.guard`):
#: `pause` (wait for a person or the resolution), `stop`, or `notify` (nothing).
Action = Literal["pause", "stop", "notify"]
STATES: tuple[AlertState, ...] = get_args(AlertState)
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
ACTIONS: tuple[Action, ...] = get_args(Action)


class Alert(msgspec.Struct, frozen=True):
    """One transition of one alert: firing, or resolved. (A record defined without
    generated code, as every record on `runwatch replay`'s path: its start.)"""

    id: str
    ts: float
    rule: str
    run: str
    state: AlertState
    severity: Severity
    key: str
    since: float
    summary: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)
    subject: str | None = None
    #: the run's `run.started` labels (an addition to the alert format), for routing
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    #: the rule's circuit-breaker policy when the config sets one (an addition)
    action: Action | None = None
    #: the incident the transition belongs to, and its role there (an addition)
    incident: IncidentRef | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "v": 1,
            "id": self.id,
            "ts": self.ts,
            "rule": self.rule,
            "run": self.run,
            "state": self.state,
            "severity": self.severity,
            "key": self.key,
        }
        if self.subject is not None:
            out["subject"] = self.subject
        out.update(since=self.since, summary=self.summary, details=self.details)
        if self.labels:
            out["labels"] = self.labels
        if self.action is not None:
            out["action"] = self.action
        if self.incident is not None:
            out["incident"] = self.incident.to_dict()
        return out

    def to_json(self) -> bytes:
        """The transition as one JSON object (a Kafka value, a line of an alert log)."""
        return orjson.dumps(self.to_dict())

    @property
    def firing(self) -> bool:
        return self.state == "firing"

    @classmethod
    def from_json(cls, raw: bytes | str) -> Alert:
        """Decode and check one transition; raises InvalidAlert with the reason."""
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise InvalidAlert(f"not JSON: {err}") from None
        return cls.from_dict(obj)

    @classmethod
    def from_dict(cls, obj: Any) -> Alert:
        """Check a decoded transition against the contract; raises InvalidAlert."""
        if not isinstance(obj, Mapping):
            raise InvalidAlert(f"an alert must be a JSON object, not {type(obj).__name__}")
        if obj.get("v", 1) != 1 or isinstance(obj.get("v"), bool):
            raise InvalidAlert(f"alert v must be 1, not {obj.get('v')!r}")
        text = {name: _text(obj, name) for name in ("id", "rule", "run", "key", "summary")}
        state, severity = obj.get("state"), obj.get("severity")
        if state not in STATES:
            raise InvalidAlert(f"alert state must be firing or resolved, not {state!r}")
        if severity not in SEVERITIES:
            raise InvalidAlert(f"alert severity must be one of {', '.join(SEVERITIES)}")
        subject = obj.get("subject")
        if subject is not None and not isinstance(subject, str):
            raise InvalidAlert("alert field 'subject' must be a string")
        details = obj.get("details", {})
        if not isinstance(details, dict):
            raise InvalidAlert("alert field 'details' must be an object")
        labels = obj.get("labels") or {}
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise InvalidAlert("alert field 'labels' must be an object of strings")
        action = obj.get("action")
        if action not in (None, *ACTIONS):
            raise InvalidAlert(f"alert action must be one of {', '.join(ACTIONS)}")
        incident = _incident(obj.get("incident"))
        return cls(
            id=text["id"],
            ts=_time(obj, "ts"),
            rule=text["rule"],
            run=text["run"],
            state=state,
            severity=severity,
            key=text["key"],
            since=_time(obj, "since"),
            summary=text["summary"],
            details=details,
            subject=subject,
            labels=labels,
            action=action,
            incident=incident,
        )


def _incident(obj: Any) -> IncidentRef | None:
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise InvalidAlert("alert field 'incident' must be an object")
    text = {name: _text(obj, name) for name in ("id", "role", "root", "root_rule")}
    if text["role"] not in ("root", "symptom", "evidence"):
        raise InvalidAlert(f"alert incident role must be root, symptom or evidence, not "
                           f"{text['role']!r}")  # fmt: skip
    if not isinstance(obj.get("open"), bool):
        raise InvalidAlert("alert incident field 'open' must be true or false")
    fleet = obj.get("fleet")
    if fleet is not None and not isinstance(fleet, str):
        raise InvalidAlert("alert incident field 'fleet' must be a string")
    return IncidentRef(text["id"], text["role"], text["root"], text["root_rule"],
                       _time(obj, "opened"), obj["open"], fleet)  # fmt: skip


def _text(obj: Mapping[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise InvalidAlert(f"alert field {name!r} missing or not a string")
    return value


def _time(obj: Mapping[str, Any], name: str) -> float:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAlert(f"alert field {name!r} missing or not a number")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidAlert(f"alert field {name!r} must be finite")
    return value


def alert_key(rule: str, run: str, subject_key: str) -> str:
    """The fingerprint shared by every transition of one alert: rule + run + subject."""
    return f"{rule}|{run}|{subject_key}" if subject_key else f"{rule}|{run}"


def transition_id(key: str, number: int) -> str:
    """Deterministic id of the `number`-th transition of an alert: replays reproduce it,
    and a restarted worker that redoes a transition produces the same id (dedup downstream)."""
    digest: str = sha1(f"{key}#{number}".encode()).hexdigest()
    return digest[:32]

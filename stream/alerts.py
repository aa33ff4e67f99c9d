"""Alert transitions in the contract's format (section 3)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

AlertState = Literal["firing", "resolved"]


@dataclass(frozen=True, slots=True)
class Alert:
    """One transition of one alert: firing, or resolved."""

    id: str
    ts: float
    rule: str
    run: str
    state: AlertState
    severity: str
    key: str
    since: float
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    subject: str | None = None

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
        return out


def alert_key(rule: str, run: str, subject_key: str) -> str:
    """The fingerprint shared by every transition of one alert: rule + run + subject."""
    return f"{rule}|{run}|{subject_key}" if subject_key else f"{rule}|{run}"


def transition_id(key: str, number: int) -> str:
    """Deterministic id of the `number`-th transition of an alert: replays reproduce it,
    and a restarted worker that redoes a transition produces the same id (dedup downstream)."""
    return hashlib.sha1(f"{key}#{number}".encode()).hexdigest()[:32]

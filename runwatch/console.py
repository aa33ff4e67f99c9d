"""What runwatch prints for people: one line per alert transition, the same in `runwatch serve`,
`runwatch alerts` and wherever else a transition reaches a terminal.

Every string in an alert can come from an emitter (a run id, a host, a progress bar's name in
the summary), so control characters are escaped before they reach a terminal: a newline in a
host name cannot forge a second line, an escape sequence cannot repaint the screen.
"""

from __future__ import annotations

import re

from runwatch.stream.alerts import Alert
from runwatch.timeparse import iso

#: C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi controls that
#: move or reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every control character escaped (`\\n`, `\\x1b`, `\\u2028`)."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def alert_line(alert: Alert) -> str:
    """`2026-11-21 16:43:05Z  FIRING   critical inference_idle_with_pending  run=R [s]: ...`"""
    state = "FIRING" if alert.firing else "resolved"
    subject = f" [{printable(alert.subject)}]" if alert.subject else ""
    return (
        f"{iso(alert.ts)}  {state:<8} {printable(alert.severity):<8} {printable(alert.rule)}  "
        f"run={printable(alert.run)}{subject}: {printable(alert.summary)}{incident_note(alert)}"
    )


def incident_note(alert: Alert) -> str:
    """`  (incident 2: symptom of heartbeat_lost)`: where the transition belongs (`root
    cause`, `symptom of ROOT`, or `evidence for ROOT`: stacks document, they are no fault)."""
    ref = alert.incident
    if ref is None:
        return ""
    number = ref.id.rsplit("|", 1)[-1]
    root = printable(ref.root_rule)
    role = {"root": "root cause", "evidence": f"evidence for {root}"}.get(
        ref.role, f"symptom of {root}"
    )
    return f"  (incident {printable(number)}: {role})"

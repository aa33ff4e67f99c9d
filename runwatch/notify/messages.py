"""Slack messages for alert transitions (Block Kit), pure functions of the `Alert`.

Every string that comes from an alert can come from an emitter (a host name in the subject,
a progress bar's name in the summary), so it is escaped for Slack's mrkdwn before it goes
into a message: `&`, `<` and `>` become entities, so `<!channel>`, `<@U123>` and
`<https://elsewhere|a label>` show as text and ping or link nobody; and a backtick cannot end
the code span a value sits in. The only markup is runwatch's own (dates, emphasis).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runwatch.stream.alerts import Alert
from runwatch.stream.incidents import IncidentRef
from runwatch.stream.rules.base import fmt_duration

SEVERITY_EMOJI = {
    "critical": ":red_circle:",
    "warning": ":large_orange_circle:",
    "info": ":large_blue_circle:",
}
MAX_EVIDENCE = 8
MAX_VALUE = 300

Blocks = list[dict[str, Any]]


def grafana_button(link: str) -> dict[str, Any]:
    """The "Open run in Grafana" button, on the root message and on the resolve edit."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Open run in Grafana"},
                "url": link,
                "action_id": "runwatch-grafana",
            }
        ],
    }


def esc(text: object) -> str:
    """`text` as mrkdwn shows it literally: no mention, no link, no entity of its own."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: object) -> str:
    """`text` in a code span it cannot end."""
    return "`" + esc(text).replace("`", "'") + "`"


def _date(ts: float) -> str:
    return f"<!date^{int(ts)}^{{date_short_pretty}} {{time}} UTC|{int(ts)}>"


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def evidence(details: Mapping[str, Any]) -> str:
    """The key evidence: the first few detail fields, one line each."""
    lines = [
        f"• *{esc(k)}*: {code(_value(v))}"
        for k, v in list(details.items())[:MAX_EVIDENCE]
        if k != "labels"
    ]
    more = len(details) - MAX_EVIDENCE
    if more > 0:
        lines.append(f"_… {more} more_")
    return "\n".join(lines)


def headline(alert: Alert) -> str:
    emoji = SEVERITY_EMOJI.get(alert.severity, ":white_circle:")
    return f"{emoji} [{esc(alert.severity.upper())}] {esc(alert.rule)} — {esc(alert.run)}"


def root(alert: Alert, link: str | None) -> tuple[str, Blocks]:
    """The first message of an alert's thread."""
    subject = f" ({esc(alert.subject)})" if alert.subject else ""
    summary = esc(alert.summary)
    text = f"{headline(alert)}{subject}: {summary}"
    fields = [
        f"*Run*\n{code(alert.run)}",
        f"*Rule*\n{code(alert.rule)}",
        f"*Severity*\n{esc(alert.severity.upper())}",
        f"*Since*\n{_date(alert.since)}",
    ]
    if alert.subject:
        fields.append(f"*Subject*\n{code(alert.subject)}")
    blocks: Blocks = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": headline(alert)[:150], "emoji": True},
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": summary}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    ev = evidence(alert.details)
    if ev:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*Evidence*\n{ev}"}})
    if alert.action in ("pause", "stop"):  # the config's circuit-breaker policy for this rule
        resume = code(f"runwatch resume {alert.run}")
        does = f"pauses the run's guarded training loop: {resume} lifts it"
        if alert.action == "stop":
            does = "stops the run's guarded training loop"
        breaker = f"*Circuit breaker*\nThis alert {does}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": breaker}})
    if link:
        blocks.append(grafana_button(link))
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"runwatch · key {code(alert.key)}"}],
        }
    )
    return text, blocks


def resolved_root(alert: Alert, first: Alert, link: str | None) -> tuple[str, Blocks]:
    """The root message, edited on resolve: short, and says so."""
    when = _date(alert.ts)
    text = (
        f":white_check_mark: [RESOLVED] {esc(first.rule)} — {esc(first.run)}: {esc(first.summary)}"
    )
    blocks: Blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"{esc(alert.summary)} · resolved {when}",
                }
            ],
        },
    ]
    if link:
        blocks.insert(1, grafana_button(link))
    return text, blocks


def reply(alert: Alert) -> str:
    """A later transition, as a reply in the thread."""
    if not alert.firing:
        return f":white_check_mark: Resolved: {esc(alert.summary)}"
    ev = evidence(alert.details)
    again = f"{headline(alert)} firing again: {esc(alert.summary)}"
    return again + (f"\n{ev}" if ev else "")


def fold_note(firing: Alert, resolved: Alert) -> str:
    """A resolve folded into its firing's message: when, and what it said."""
    after = fmt_duration(max(0.0, resolved.ts - firing.ts))
    return f":white_check_mark: Resolved {after} after it fired: {esc(resolved.summary)}"


def with_fold(text: str, blocks: Blocks, firing: Alert, resolved: Alert) -> tuple[str, Blocks]:
    """A root message that also shows the quick resolve of its firing."""
    note = fold_note(firing, resolved)
    context = {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}
    return f"{text}\n{note}", [*blocks, context]


def folded_reply(firing: Alert, resolved: Alert, role: str) -> str:
    """A reply that showed a firing, edited to show its quick resolve too."""
    return f"{incident_reply(firing, role)}\n{fold_note(firing, resolved)}"


def reminder(first: Alert, firing_for: str) -> str:
    return f":alarm_clock: Still firing after {firing_for}: {esc(first.summary)}"


# -- incidents: one thread per incident, its root message says the chain -----------------------

MAX_MEMBERS = 8


def _who(alert: Alert) -> str:
    return f"{esc(alert.rule)} ({esc(alert.subject)})" if alert.subject else esc(alert.rule)


def _role(alert: Alert) -> str | None:
    return alert.incident.role if alert.incident is not None else None


def chain(root_alert: Alert, members: Mapping[str, Alert]) -> str:
    """What waits on what: the symptoms still firing, downstream first (the condition that
    began last), then the root -- "ranks_stalled ← heartbeat_lost (orchestrator@...)"."""
    symptoms = sorted(
        (
            m
            for k, m in members.items()
            if k != root_alert.key and m.firing and _role(m) != "evidence"
        ),
        key=lambda m: -m.since,
    )
    return " ← ".join([*(_who(m) for m in symptoms[:MAX_MEMBERS]), _who(root_alert)])


def incident_root(
    root_alert: Alert, members: Mapping[str, Alert], incident: IncidentRef, link: str | None
) -> tuple[str, Blocks]:
    """The first message of an incident's thread, re-rendered as its alerts come and go:
    the root cause with its evidence, the chain, and every alert of the incident."""
    text, blocks = root(root_alert, link)
    count = len(members)
    text = f"{text} ({count} alerts in this incident)" if count > 1 else text
    lines = []
    for key, m in list(members.items())[:MAX_MEMBERS]:
        mark = "" if m.firing else " _(resolved)_"
        role = "root cause" if key == root_alert.key else (
            "evidence" if _role(m) == "evidence" else "symptom")  # fmt: skip
        lines.append(f"• {role}: *{_who(m)}*: {esc(m.summary)}{mark}")
    if count > MAX_MEMBERS:
        lines.append(f"_… {count - MAX_MEMBERS} more_")
    extra: Blocks = [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"*Chain*\n{chain(root_alert, members)}"},
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Alerts*\n" + "\n".join(lines)}},
    ]
    blocks[2:2] = extra  # after the header and the root's summary
    blocks[-1] = {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": f"runwatch · {code(incident.id)}"}],
    }
    return text, blocks


def incident_resolved(
    last: Alert, root_alert: Alert, members: Mapping[str, Alert], link: str | None
) -> tuple[str, Blocks]:
    """The incident's root message once its last alert resolved."""
    text, blocks = resolved_root(last, root_alert, link)
    who = ", ".join(_who(m) for m in list(members.values())[:MAX_MEMBERS])
    blocks.insert(1, {"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"root cause {_who(root_alert)}; {len(members)} alerts: {who}"}
    ]})  # fmt: skip
    return text, blocks


def incident_reply(alert: Alert, role: str) -> str:
    """A transition in an incident's thread: a symptom (or a new root) firing, a resolve."""
    if not alert.firing:
        return reply(alert)
    ev = evidence(alert.details)
    what = {"root": "Root cause", "evidence": "Evidence"}.get(role, "Symptom")
    line = f"{headline(alert)} — {what}: {_who(alert)}: {esc(alert.summary)}"
    return line + (f"\n{ev}" if ev else "")


# -- fleet incidents: one thread for the runs that share a cause -------------------------------

MAX_RUNS = 20


def member_reply(alert: Alert, role: str) -> str:
    """A member run's transition in its fleet incident's thread: the run named, also when it
    heals (forty runs share the thread)."""
    if alert.firing:
        return incident_reply(alert, role)
    return f":white_check_mark: Resolved — {esc(alert.run)}: {esc(alert.summary)}"


def fleet_root(
    fleet: Alert,
    members: Mapping[str, Alert],
    runs: Mapping[str, bool],
    *,
    named: bool,
    resolved: bool,
) -> tuple[str, Blocks]:
    """A fleet incident's root message: the shared cause, how many runs it stalled and how
    many healed, and the runs -- re-rendered as runs join and heal. `named`: the fleet alert
    has come (before, a member's transition opened the thread and the cause is not known)."""
    affected = sum(1 for still in runs.values() if still)
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    cause = f"Shared cause {esc(fleet.subject)}" if named and fleet.subject else "Shared cause"
    if resolved:
        text = f":white_check_mark: [RESOLVED] {cause} — {count}, all healed"
        head = text
    else:
        emoji = SEVERITY_EMOJI.get(fleet.severity, ":white_circle:")
        head = f"{emoji} [{esc(fleet.severity.upper())}] {cause} — {count}"
        healed = len(runs) - affected
        text = f"{head}: {affected} still affected" + (f", {healed} healed" if healed else "")
    fields = [f"*Runs*\n{len(runs)}", f"*Still affected*\n{affected}",
              f"*Since*\n{_date(fleet.since)}"]  # fmt: skip
    if named and fleet.subject:
        fields.insert(0, f"*Cause*\n{code(fleet.subject)}")
    lines = []
    for run, still in sorted(runs.items(), key=lambda kv: (not kv[1], kv[0]))[:MAX_RUNS]:
        what = _run_root(run, members)
        mark = "" if still else " _(healed)_"
        lines.append(f"• {code(run)}{': ' + what if what else ''}{mark}")
    if len(runs) > MAX_RUNS:
        lines.append(f"_… {len(runs) - MAX_RUNS} more_")
    blocks: Blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": head[:150], "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": esc(fleet.summary)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    if lines:
        listed = "*Runs*\n" + "\n".join(lines)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": listed}})
    ident = fleet.incident.id if fleet.incident is not None else fleet.key
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"runwatch · fleet incident {code(ident)}"}]})  # fmt: skip
    return text, blocks


def _run_root(run: str, members: Mapping[str, Alert]) -> str:
    """What a member run's thread part says first: its incident's root cause, else its first
    alert shown."""
    mine = [m for m in members.values() if m.run == run]
    root = next((m for m in mine if _role(m) == "root"), mine[0] if mine else None)
    return "" if root is None else f"*{_who(root)}*: {esc(root.summary)}"


def fleet_link(fleet: Alert, count: int, link: str | None) -> Blocks:
    """What a member run's own thread says of its fleet incident (`member_threads = "own"`):
    part of it, and where its thread is."""
    cause = code(fleet.subject) if fleet.subject else "one cause"
    there = f"<{link}|the shared-cause thread>" if link else "the shared-cause thread"
    line = f"*Shared cause*: this run is one of {count} stalled by {cause}: see {there}"
    return [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]


def moved_root(root_alert: Alert, fleet: Alert, count: int, link: str | None,
               incident: str) -> tuple[str, Blocks]:  # fmt: skip
    """The root of a run's thread that opened before the run was known to be part of a fleet
    incident, once it went on in the fleet thread: one line that says where, so the first
    runs of a storm leave pointers in the channel rather than alerts of their own."""
    cause = esc(fleet.subject) if fleet.subject else "one cause"
    there = f"<{link}|the shared-cause thread>" if link else "the shared-cause thread"
    text = (f":arrow_right: {headline(root_alert)}: continued in the shared-cause thread "
            f"({cause}, {count} runs)")  # fmt: skip
    line = (f":arrow_right: {headline(root_alert)}: {esc(root_alert.summary)}\n"
            f"*Continued in {there}*: this run is one of {count} stalled by "
            f"{code(fleet.subject) if fleet.subject else cause}")  # fmt: skip
    blocks: Blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": line}},
        {"type": "context",
         "elements": [{"type": "mrkdwn", "text": f"runwatch · {code(incident)}"}]},
    ]  # fmt: skip
    return text, blocks

"""An incident's page: its root cause, symptoms and evidence (the stacks its processes sent,
grouped), from the transitions that carry it. Pure: JSON in, `Markup` out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runwatch.service.markup import Markup, h, join
from runwatch.service.page_layout import (
    Json,
    ago,
    alert_name,
    incident_number,
    run_link,
    severity,
    when,
)
from runwatch.service.page_views import transitions_table
from runwatch.stream.rules.base import fmt_duration


def incident_view(
    ident: str, transitions: Sequence[Json], live: Json | None, now: float
) -> Markup | None:
    """Root, symptoms, evidence (the stacks, grouped) and the transitions of one incident,
    from the transitions that carry it; None when none does."""
    mine = sorted(
        (a for a in transitions if (a.get("incident") or {}).get("id") == ident),
        key=lambda a: float(a["ts"]),
    )
    if not mine:
        return None
    run = str(mine[0]["run"])
    last = mine[-1]["incident"]
    root_key = str((live or {}).get("root") or last.get("root"))
    latest: dict[str, Json] = {}  # per alert key: its latest transition
    fired: dict[str, Json] = {}  # per alert key: its latest firing
    for a in mine:
        latest[str(a["key"])] = a
        if a["state"] == "firing":
            fired[str(a["key"])] = a
    is_open = live is not None or bool(last.get("open"))
    facts = h(
        "dl",
        h("dt", "run"),
        h("dd", run_link(run)),
        h("dt", "state"),
        h(
            "dd",
            h(
                "span",
                "open" if is_open else "closed",
                class_="badge firing" if is_open else "badge",
            ),
        ),
        h("dt", "opened"),
        h("dd", when(last.get("opened")), " (", ago(last.get("opened"), now), ")"),
        class_="facts",
    )
    root = fired.get(root_key) or latest.get(root_key)
    parts = [
        h("h1", f"Incident {incident_number(ident)} of ", run_link(run)),
        facts,
        h("h2", "Root cause"),
    ]
    if root is not None:
        parts.append(
            h(
                "div",
                h(
                    "div",
                    severity(root),
                    " ",
                    h("b", alert_name(root)),
                    " ",
                    _alert_state(latest[root_key]),
                ),
                h("p", root.get("summary", ""), class_="summary root"),
                class_="panel",
            )
        )
    else:
        parts.append(h("p", str(last.get("root_rule", root_key)), class_="panel"))
    members = [k for k in latest if k != root_key]
    symptoms = [k for k in members if latest[k]["incident"].get("role") != "evidence"]
    evidence = [k for k in members if latest[k]["incident"].get("role") == "evidence"]
    parts.append(h("h2", "Symptoms"))
    items = [
        h(
            "li",
            severity(fired.get(k, latest[k])),
            " ",
            h("b", alert_name(latest[k])),
            " ",
            _alert_state(latest[k]),
            h("div", fired.get(k, latest[k]).get("summary", ""), class_="summary"),
        )
        for k in symptoms
    ]
    parts.append(h("ul", *items) if items else h("p", "none", class_="muted"))
    parts.append(h("h2", "Evidence"))
    if not evidence:
        parts.append(h("p", "none", class_="muted"))
    for k in evidence:
        a = fired.get(k, latest[k])
        parts.append(
            h(
                "div",
                h("b", alert_name(a)),
                h("p", a.get("summary", ""), class_="summary"),
                stacks(a.get("details")),
                class_="panel evidence",
            )
        )
    parts += [h("h2", "Transitions"), transitions_table(mine, now)]
    return join(*parts)


def incident_from_history(ident: str, timeline: Json, now: float) -> Markup | None:
    """The incident as the history keeps it (`runwatch show`'s), for one whose transitions
    this service no longer holds: root, symptoms, evidence; None when the run has none."""
    found = next((i for i in timeline.get("incidents") or [] if i.get("id") == ident), None)
    if found is None:
        return None
    run = str((timeline.get("run") or {}).get("run", ""))
    opened = found.get("opened_ts")
    root = {"rule": found.get("root_rule"), "subject": found.get("root_subject")}
    said = next(
        (
            a
            for a in timeline.get("alerts") or []
            if a.get("state") == "firing"
            and a.get("rule") == root["rule"]
            and a.get("subject") == root["subject"]
            and float(a.get("ts") or 0) >= float(opened or 0)
        ),
        None,
    )
    lasted = "open" if found.get("open") else f"closed after {_dur(found.get('duration_s'))}"
    facts = h("dl", h("dt", "run"), h("dd", run_link(run)), h("dt", "state"), h("dd", lasted),
              h("dt", "opened"), h("dd", when(opened), " (", ago(opened, now), ")"),
              class_="facts")  # fmt: skip
    symptoms = [h("li", str(rule)) for rule in found.get("symptoms") or []]
    return join(
        h("h1", f"Incident {incident_number(ident)} of ", run_link(run)),
        facts,
        h("h2", "Root cause"),
        h("div", h("div", severity(said or {}), " ", h("b", alert_name(said or root))),
          h("p", (said or {}).get("summary", ""), class_="summary root"), class_="panel"),
        h("h2", "Symptoms"),
        h("ul", *symptoms) if symptoms else h("p", "none", class_="muted"),
        h("h2", "Evidence"),
        stacks((timeline.get("evidence") or {}).get(ident)) or h("p", "none", class_="muted"),
        h("p", "From the history: this service no longer holds the incident's transitions.",
          class_="muted"),
    )  # fmt: skip


def _dur(seconds: Any) -> str:
    return "-" if seconds is None else fmt_duration(float(seconds))


def _alert_state(a: Json) -> Markup:
    if a["state"] == "firing":
        return h("span", "firing", class_="badge firing")
    return h("span", "resolved", class_="badge ok")


def stacks(details: Any) -> Markup:
    """`process_stacks` evidence: per group of processes, where they were and the stack
    (innermost frame first); the processes that did not answer."""
    if isinstance(details, str):  # the history's JSON column
        try:
            details = json.loads(details)
        except ValueError:
            return Markup("")
    if not isinstance(details, Mapping):
        return Markup("")
    parts = []
    for g in details.get("groups") or []:
        who = ", ".join(str(p) for p in g.get("processes") or [])
        if g.get("ranks"):
            who = f"ranks {', '.join(map(str, g['ranks']))} ({who})"
        frames = "\n".join(
            f"{f[2]}  ({f[0]}:{f[1]})"
            for f in g.get("stack") or []
            if isinstance(f, Sequence) and len(f) >= 3
        )
        parts.append(
            h(
                "div",
                h("b", who),
                ": ",
                g.get("where", ""),
                h("pre", frames, class_="stack") if frames else None,
                class_="group",
            )
        )
    if details.get("not_answering"):
        parts.append(h("div", "not answering: ", ", ".join(map(str, details["not_answering"]))))
    return join(*parts)

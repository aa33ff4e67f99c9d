"""The pages' forms and plain answers: the silences (listed, set, removed), the circuit
breaker's resume, sign-in, and errors. Pure: JSON in, `Markup` out."""

from __future__ import annotations

from collections.abc import Sequence

from runwatch.service.markup import Markup, h, join, link, path_part
from runwatch.service.page_layout import Json, ago, when


def _csrf(csrf: str) -> Markup:
    return h("input", type="hidden", name="csrf", value=csrf)


def silences_view(
    silences: Sequence[Json] | None,
    missing: str | None,
    runs: Sequence[str],
    csrf: str,
    now: float,
    said: str = "",
    problem: str = "",
) -> Markup:
    """The silences in force, each with a remove button, and the form that sets one; `said`:
    what the last form did, `problem`: why it did not. With `missing` (the API's answer when
    this service keeps no silences), that instead."""
    parts = [
        h("h1", "Silences"),
        h("p", said, class_="panel said") if said else None,
        h("p", problem, class_="error") if problem else None,
    ]
    parts.append(
        h(
            "p",
            "A silence keeps a run's alerts (or one rule's) out of Slack for a while; "
            "they still fire here and in the history.",
            class_="muted",
        )
    )
    if missing is not None:
        return join(*parts, h("p", missing, class_="error"))
    rows = [
        h(
            "tr",
            h("td", s.get("id"), class_="num"),
            h("td", s.get("run")),
            h("td", s.get("rule") or "every rule"),
            h("td", when(s.get("until")), " (", ago(s.get("until"), now), ")"),
            h("td", s.get("comment") or ""),
            h(
                "td",
                h(
                    "form",
                    _csrf(csrf),
                    h("button", "remove", type="submit", class_="quiet"),
                    method="post",
                    action=f"/ui/silences/{path_part(str(s.get('id')))}/remove",
                    class_="inline",
                ),
            ),
            class_="silence",
        )
        for s in silences or []
    ]
    if not rows:
        rows.append(h("tr", h("td", "no silences in force", colspan=6, class_="muted")))
    head = h("tr", *(h("th", c) for c in ("id", "run", "rule", "until", "comment", "")))
    parts.append(h("table", head, *rows, id="silences"))
    parts.append(h("h2", "Silence a run"))
    parts.append(
        h(
            "form",
            _csrf(csrf),
            h("label", "run ", h("input", name="run", required=True, size=28, list="runs")),
            h("datalist", *(h("option", value=r) for r in runs), id="runs"),
            h("label", "rule ", h("input", name="rule", size=22, placeholder="every rule")),
            h("label", "for ", h("input", name="for", size=6, value="2h", required=True)),
            h("label", "comment ", h("input", name="comment", size=30)),
            h("button", "silence", type="submit"),
            method="post",
            action="/ui/silences",
            class_="filter",
            id="add-silence",
        )
    )
    return join(*parts)


def resume_form(run: str, breaker: Json, csrf: str) -> Markup | None:
    """The circuit breaker's state, and a button that lifts it while an alert that no person
    lifted could pause the run's guarded training loop."""
    resumed = breaker.get("resumed") or {}
    note = None
    if resumed.get("ts") is not None:
        note = h(
            "span", f"resumed {when(resumed['ts'])} by {resumed.get('by') or '?'}", class_="muted"
        )
    alerts = [a for a in breaker.get("alerts") or [] if a.get("action") != "notify"]
    if not alerts:
        return h("p", note, class_="panel") if note is not None else None
    rules = ", ".join(sorted({str(a.get("rule")) for a in alerts}))
    return h(
        "form",
        h(
            "span",
            f"circuit breaker: {rules} can pause this run's training loop",
            class_="badge firing",
        ),
        note,
        _csrf(csrf),
        h("input", name="reason", placeholder="why (kept in the history)", size=30),
        h("button", "resume", type="submit"),
        method="post",
        action=f"/ui/runs/{path_part(run)}/resume",
        class_="inline panel",
    )


# -- sign in --------------------------------------------------------------------------------


def login_view(next_path: str, wrong: bool) -> Markup:
    return join(
        h("h1", "Sign in"),
        h(
            "p",
            "This runwatch serve has a token (--token-file): give it once; the browser "
            "keeps a session cookie for these pages.",
        ),
        h("p", "wrong token", class_="error") if wrong else None,
        h(
            "form",
            h(
                "input",
                type="password",
                name="token",
                placeholder="token",
                size=40,
                autofocus=True,
                autocomplete="current-password",
            ),
            h("input", type="hidden", name="next", value=next_path),
            h("button", "sign in", type="submit"),
            method="post",
            action="/ui/login",
            class_="filter",
        ),
    )


def error_view(status: int, message: str) -> Markup:
    return join(
        h("h1", f"{status}"),
        h("p", message, class_="error"),
        h("p", h("a", "all runs", href=link("/"))),
    )

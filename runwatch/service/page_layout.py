"""The frame every page shares (head, navigation, the style sheet) and the small pieces the
pages repeat: times for people, a run's state badge, an alert's name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runwatch.service.markup import Markup, h, join, link, path_part
from runwatch.stream.rules.base import fmt_duration
from runwatch.timeparse import iso

Json = Mapping[str, Any]

#: Seconds between a live page's reloads: the runs and an incident (the live state, read in
#: milliseconds); a run's page, whose timeline the history computes (much longer).
REFRESH_S = 5
RUN_REFRESH_S = 15

#: The pages' one script (allowed by its per-answer nonce, nothing else is): reloads the page
#: every `data-every` seconds, but not while someone fills in one of its forms (a field
#: focused, or changed from what the page came with) -- a reload would throw their typing
#: away. Each reload it holds back is counted in `data-refresh-held` on <html>. Without
#: scripts the page reloads by its <noscript> meta refresh.
REFRESH_JS = """(() => {
  const every = 1000 * Number(document.currentScript.dataset.every);
  const fields = "input:not([type=hidden]), select, textarea";
  const changed = (e) => e.tagName === "SELECT"
    ? [...e.options].some((o) => o.selected !== o.defaultSelected)
    : e.value !== e.defaultValue;
  const busy = () => document.activeElement?.matches(fields)
    || [...document.querySelectorAll(fields)].some(changed);
  const tick = () => {
    if (!busy()) return location.reload();
    const root = document.documentElement;
    root.dataset.refreshHeld = String(Number(root.dataset.refreshHeld || 0) + 1);
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
})();"""

#: Served at /ui/style.css: the pages carry no inline style, so the Content-Security-Policy
#: can forbid it along with every script but `REFRESH_JS`.
STYLE = """
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --crit:#c0262d;
        --warn:#b7791f; --info:#2563eb; --ok:#1f8a4c; --idle:#f2a33a; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color:var(--fg); background:var(--bg); }
header { display:flex; gap:18px; align-items:baseline; padding:10px 22px; background:#1d2330;
         color:#fff; }
header a { color:#fff; text-decoration:none; }
header .brand { font-weight:700; font-size:16px; }
header .when { margin-left:auto; color:#aab2c0; font-size:12px; }
main { padding:16px 22px 40px; max-width:1400px; }
h1 { font-size:20px; margin:4px 0 12px; } h2 { font-size:16px; margin:22px 0 8px; }
a { color:#1d4ed8; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line);
         vertical-align:top; }
th { background:#eef1f5; font-weight:600; font-size:12px; color:#475467; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.muted { color:var(--muted); }
table.transitions td { white-space:nowrap; }
table.transitions td.alert, table.transitions td.run { white-space:normal; overflow-wrap:anywhere; }
table.transitions td.summary { white-space:pre-wrap; overflow-wrap:anywhere; min-width:20em;
                               width:45%; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
         font-weight:600; background:#e4e7ec; color:#344054; white-space:nowrap; }
.badge.firing, .badge.sev-critical { background:#fde2e1; color:var(--crit); }
.badge.sev-warning { background:#fdf0d5; color:var(--warn); }
.badge.sev-info { background:#dbe7fe; color:var(--info); }
.badge.ok, .badge.running { background:#dcf5e6; color:var(--ok); }
.badge.failed, .badge.killed { background:#fde2e1; color:var(--crit); }
.chip { display:inline-block; margin:0 4px 2px 0; padding:0 6px; border:1px solid var(--line);
        border-radius:4px; background:#f9fafb; font-size:12px; color:#344054;
        text-decoration:none; }
.alerts div { margin-bottom:2px; }
form.filter, form.inline { display:flex; gap:8px; align-items:center; flex-wrap:wrap;
                           margin:0 0 12px; }
form.inline { margin:0; }
input, select, button { font:inherit; padding:4px 8px; border:1px solid #c9ced6;
                        border-radius:4px; background:#fff; }
button { background:#1d4ed8; color:#fff; border-color:#1d4ed8; cursor:pointer; }
button.quiet { background:#fff; color:#344054; border-color:#c9ced6; }
.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 16px; margin:0 0 12px; }
.facts dt { color:var(--muted); }
.facts dd { margin:0; }
.summary { white-space:pre-wrap; word-break:break-word; }
.panel { background:#fff; border:1px solid var(--line); padding:10px 12px; margin:0 0 12px; }
.error { background:#fde2e1; color:var(--crit); padding:8px 12px; border-radius:4px; }
pre.stack { margin:4px 0 10px; padding:8px; background:#f4f5f7; overflow-x:auto; }
svg.timeline { width:100%; height:auto; background:#fff; border:1px solid var(--line); }
svg .rowname { font-size:12px; fill:#475467; }
svg .rowname.sev-critical { fill:var(--crit); } svg .rowname.sev-warning { fill:var(--warn); }
svg .step0 { fill:#9db7e8; } svg .step1 { fill:#c3d3f2; }
svg .step.running { fill:#dfe7f7; stroke:#9db7e8; stroke-dasharray:4 3; }
svg .step.unfinished { fill:#eef0f3; stroke:#98a2b3; stroke-dasharray:4 3; }
svg .steplabel { font-size:11px; fill:#1d2330; }
svg .idle { fill:var(--idle); }
svg .alert.sev-critical { fill:var(--crit); } svg .alert.sev-warning { fill:var(--warn); }
svg .alert.sev-info { fill:var(--info); }
svg .axis { stroke:#98a2b3; } svg .grid { stroke:#eaecf0; }
svg .ticklabel { font-size:11px; fill:#667085; }
"""


def page(
    title: str,
    main: Markup,
    *,
    now: float,
    refresh: int | None = None,
    signed_in: bool = False,
    csrf: str = "",
    nonce: str = "",
) -> bytes:
    """The whole document: head, header with the navigation, `main`. A page that reloads
    itself (`refresh`) does it by `REFRESH_JS`, allowed by `nonce` (the answer's CSP)."""
    reload = None
    if refresh:
        reload = join(
            h("script", Markup(REFRESH_JS), nonce=nonce, data_every=str(refresh)),
            h("noscript", h("meta", http_equiv="refresh", content=str(refresh))),
        )
    head = join(
        h("meta", charset="utf-8"),
        h("meta", name="viewport", content="width=device-width, initial-scale=1"),
        h("title", f"{title} · runwatch"),
        h("link", rel="stylesheet", href="/ui/style.css"),
        reload,
    )
    out = None
    if signed_in:
        out = h(
            "form",
            h("input", type="hidden", name="csrf", value=csrf),
            h("button", "sign out", type="submit", class_="quiet"),
            method="post",
            action="/ui/logout",
            class_="inline",
        )
    header = h(
        "header",
        h("a", "runwatch", href="/", class_="brand"),
        h("a", "runs", href="/"),
        h("a", "silences", href="/ui/silences"),
        h(
            "span",
            f"as of {iso(now)}" + (f" · reloads every {refresh}s" if refresh else ""),
            class_="when",
        ),
        out,
    )
    doc = "<!doctype html>" + h(
        "html", h("head", head), h("body", header, h("main", main)), lang="en"
    )
    return doc.encode()


def ago(ts: float | None, now: float) -> Markup:
    """`3m ago`, with the exact time on hover."""
    if ts is None:
        return Markup("-")
    seconds = now - float(ts)
    text = (
        "just now"
        if abs(seconds) < 1
        else (f"{fmt_duration(seconds)} ago" if seconds > 0 else f"in {fmt_duration(-seconds)}")
    )
    return h("span", text, title=iso(float(ts)))


def when(ts: Any) -> str:
    return "-" if ts is None else iso(float(ts))


def alert_name(a: Mapping[str, Any]) -> str:
    return str(a["rule"]) + (f" [{a['subject']}]" if a.get("subject") else "")


def severity(a: Mapping[str, Any]) -> Markup:
    sev = str(a.get("severity") or "info")
    return h("span", sev, class_=f"badge sev-{sev}")


def run_state(run: Mapping[str, Any]) -> Markup:
    """FIRING (alerts open), else the run's status."""
    if run.get("firing_count"):
        return h("span", f"FIRING {run['firing_count']}", class_="badge firing")
    status = str(run.get("status") or "running")
    return h("span", status, class_=f"badge {status}")


def run_link(run: str) -> Markup:
    return h("a", run, href="/ui/runs/" + path_part(run))


def incident_link(incident_id: str, text: str) -> Markup:
    return h("a", text, href="/ui/incidents/" + path_part(incident_id))


def incident_number(incident_id: str) -> str:
    return "#" + incident_id.rsplit("|", 1)[-1]


def label_chips(labels: Mapping[str, Any]) -> Markup:
    """A run's labels, each a link to the runs that share it."""
    return join(
        h("a", f"{k}={v}", href=link("/", label=f"{k}={v}"), class_="chip")
        for k, v in sorted(labels.items())
    )

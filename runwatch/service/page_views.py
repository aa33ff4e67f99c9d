"""The runs page (filtered by label and state) and a run's page (its facts, incidents, the
timeline picture, steps, slowest trajectories, alerts in time), from the JSON the service's
API answers. Pure: the JSON and the time in, `Markup` out -- unit-tested without a server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runwatch.service import page_svg
from runwatch.service.markup import Markup, h, join
from runwatch.service.page_layout import (
    Json,
    ago,
    alert_name,
    incident_link,
    incident_number,
    label_chips,
    run_link,
    run_state,
    severity,
    when,
)
from runwatch.store.report import open_step
from runwatch.stream.rules.base import fmt_duration

#: Runs listed at most (the most recently seen): a page of 10,000 rows every 5 s helps nobody.
MAX_ROWS = 500
#: A run's steps listed at most (its latest): every step is on the picture, and in `runwatch
#: show RUN`; a table of thousands of steps, reloaded every 15 s, helps nobody either.
MAX_STEPS = 50
#: The state filter's choices: firing (alerts open), quiet (running, none open), or a status.
STATES = ("firing", "quiet", "running", "ok", "failed", "killed")


@dataclass(frozen=True)
class RunFilter:
    """`?label=team=rl&label=gpu&state=firing`: every label given (`key=value`, or a bare
    `key` that the run has), and the state."""

    labels: tuple[tuple[str, str | None], ...] = ()
    state: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, Sequence[str]]) -> RunFilter:
        labels = []
        for text in query.get("label", []):
            for one in text.split(","):
                key, eq, value = one.strip().partition("=")
                if key.strip():
                    labels.append((key.strip(), value.strip() if eq else None))
        state = (query.get("state") or [""])[0].strip()
        return cls(tuple(labels), state)

    def keeps(self, run: Json) -> bool:
        labels = run.get("labels") or {}
        for key, value in self.labels:
            if key not in labels or (value is not None and str(labels[key]) != value):
                return False
        firing = bool(run.get("firing_count"))
        status = str(run.get("status") or "running")
        if self.state == "firing":
            return firing
        if self.state == "quiet":
            return status == "running" and not firing
        return not self.state or status == self.state

    def label_text(self) -> str:
        return ", ".join(k if v is None else f"{k}={v}" for k, v in self.labels)


def _filter_form(flt: RunFilter, statuses: set[str]) -> Markup:
    choices = [("", "any state"), *((s, s) for s in sorted(set(STATES) | statuses))]
    return h(
        "form",
        h(
            "label",
            "label ",
            h(
                "input",
                name="label",
                value=flt.label_text(),
                placeholder="team=reasoning, gpu",
                size=28,
            ),
        ),
        h(
            "label",
            "state ",
            h(
                "select",
                *(h("option", text, value=v, selected=v == flt.state) for v, text in choices),
                name="state",
            ),
        ),
        h("button", "filter", type="submit"),
        h("a", "clear", href="/") if flt.labels or flt.state else None,
        method="get",
        action="/",
        class_="filter",
    )


def runs_view(
    runs: Sequence[Json],
    firing: Sequence[Json],
    incidents: Sequence[Json],
    transitions: Sequence[Json],
    flt: RunFilter,
    now: float,
) -> Markup:
    """The runs, newest event first: state, step, last event, open alerts, incident roots."""
    by_run: dict[str, list[Json]] = {}
    for a in firing:
        by_run.setdefault(str(a["run"]), []).append(a)
    roots: dict[str, list[Json]] = {}
    for i in incidents:
        roots.setdefault(str(i["run"]), []).append(i)
    shown = sorted((r for r in runs if flt.keeps(r)), key=lambda r: -(r.get("last_ts") or 0))
    names = {str(r["run"]) for r in shown}
    rows = []
    for r in shown[:MAX_ROWS]:
        name = str(r["run"])
        step = "-" if r.get("step") is None else str(r["step"])
        if r.get("total_steps"):
            step += f" / {r['total_steps']}"
        alerts = [h("div", severity(a), " ", alert_name(a)) for a in by_run.get(name, [])]
        causes = [
            h(
                "div",
                incident_link(
                    str(i["id"]), f"{incident_number(str(i['id']))} {i.get('root_rule', '')}"
                ),
            )
            for i in roots.get(name, [])
        ]
        rows.append(
            h(
                "tr",
                h("td", run_link(name)),
                h("td", run_state(r)),
                h("td", step, class_="num"),
                h("td", f"{r.get('events', 0):,}", class_="num"),
                h("td", ago(r.get("last_ts"), now)),
                h("td", alerts or "-", class_="alerts"),
                h("td", causes or "-"),
                h("td", label_chips(r.get("labels") or {})),
                class_="run",
            )
        )
    head = h(
        "tr",
        *(
            h("th", c, class_="num" if c in ("step", "events") else None)
            for c in (
                "run",
                "state",
                "step",
                "events",
                "last event",
                "open alerts",
                "incident roots",
                "labels",
            )
        ),
    )
    if not rows:
        rows.append(
            h("tr", h("td", "no runs" + (" match" if runs else " yet"), colspan=8, class_="muted"))
        )
    firing_runs = sum(1 for r in runs if r.get("firing_count"))
    title = h("h1", f"Runs ({len(shown)} of {len(runs)}; {firing_runs} firing)")
    if len(shown) > MAX_ROWS:
        rows.append(
            h(
                "tr",
                h(
                    "td",
                    f"and {len(shown) - MAX_ROWS:,} more, seen longer ago: "
                    "filter by label or state",
                    colspan=8,
                    class_="muted",
                ),
            )
        )
    statuses = {str(r.get("status") or "running") for r in runs}
    return join(
        title,
        _filter_form(flt, statuses),
        h("table", head, *rows, id="runs"),
        h("h2", "Recent alert transitions" + (" of these runs" if len(shown) < len(runs) else "")),
        transitions_table(
            _by_time([a for a in transitions if a["run"] in names])[-25:], now, runs=True
        ),
    )


def _by_time(transitions: Sequence[Json]) -> list[Json]:
    """Oldest first by their times: the service lists them as it took them, and runs on other
    hosts' clocks (or a burst of one run's events) interleave."""
    return sorted(transitions, key=lambda a: float(a.get("ts") or 0))


def transitions_table(transitions: Sequence[Json], now: float, *, runs: bool = False) -> Markup:
    """Alert transitions, newest first (by their times, so that the "when" column reads
    down)."""
    rows = []
    for a in reversed(_by_time(transitions)):
        state = (
            h("span", "FIRING", class_=f"badge sev-{a.get('severity', 'info')}")
            if a["state"] == "firing"
            else h("span", "resolved", class_="badge ok")
        )
        inc = a.get("incident") or {}
        where = (
            incident_link(
                str(inc["id"]), f"{incident_number(str(inc['id']))} {inc.get('role', '')}"
            )
            if inc.get("id")
            else "-"
        )
        rows.append(
            h(
                "tr",
                h("td", ago(a.get("ts"), now)),
                h("td", state),
                h("td", run_link(str(a["run"])), class_="run") if runs else None,
                h("td", alert_name(a), class_="alert"),
                h("td", where),
                h("td", a.get("summary", ""), class_="summary"),
            )
        )
    cols = ["when", "state", *(["run"] if runs else []), "alert", "incident", "summary"]
    if not rows:
        rows.append(h("tr", h("td", "none", colspan=len(cols), class_="muted")))
    return h("table", h("tr", *(h("th", c) for c in cols)), *rows, class_="transitions")


# -- a run ---------------------------------------------------------------------------------


def run_view(
    run: Json,
    incidents: Sequence[Json],
    timeline: Json | None,
    now: float,
    breaker: Markup | None = None,
    missing: str | None = None,
) -> Markup:
    """A run: its facts, open incidents, the timeline picture, steps, slowest trajectories
    and alerts in time. The steps, idle stretches and trajectories come from the history's
    timeline (`timeline`); without it (`missing` says why), the picture shows the alerts."""
    name = str(run["run"])
    step = "-" if run.get("step") is None else str(run["step"])
    if run.get("total_steps"):
        step += f" of {run['total_steps']}"
    facts = h(
        "dl",
        h("dt", "state"),
        h("dd", run_state(run)),
        h("dt", "step"),
        h("dd", step),
        h("dt", "events"),
        h("dd", f"{run.get('events', 0):,}"),
        h("dt", "started"),
        h("dd", when(run.get("started_ts"))),
        h("dt", "last event"),
        h("dd", when(run.get("last_ts")), " (", ago(run.get("last_ts"), now), ")"),
        h("dt", "labels"),
        h("dd", label_chips(run.get("labels") or {}) or "-"),
        class_="facts",
    )
    parts = [h("h1", "Run ", h("span", name, class_="runid")), facts, breaker]
    if incidents:
        parts.append(h("h2", "Open incidents"))
        items = [
            h("li", incident_link(str(i["id"]), incident_number(str(i["id"]))),
              f" root cause: {i.get('root_rule', '')}, opened ", ago(i.get("opened"), now))
            for i in incidents
        ]  # fmt: skip
        parts.append(h("ul", *items))
    transitions = list(run.get("transitions") or [])
    history = list((timeline or {}).get("alerts") or [])
    spans = page_svg.alert_spans(history or transitions)
    steps = list((timeline or {}).get("steps") or [])
    idle = list((timeline or {}).get("idle") or [])
    # the axis: the run's events as the history has them (their own times), else the live
    # state's (put on the service's clock: a host's skew corrected)
    bounds = (timeline or {}).get("run") or run
    first, last = bounds.get("first_ts", bounds.get("started_ts")), bounds.get("last_ts")
    start = _first(first, *(s.get("start_ts") for s in steps), *(sp.start for sp in spans))
    if first is not None:
        start = float(first)
    end = max([float(last or 0), *(float(s.get("end_ts") or 0) for s in steps)])
    parts.append(h("h2", "Timeline"))
    if start is not None:
        unended = open_step(run.get("status"))
        parts.append(page_svg.timeline(start, max(end, start + 1), steps, idle, spans,
                                       unended=unended))  # fmt: skip
    if timeline is None:
        why = missing or "the history does not answer"
        parts.append(h("p", f"No steps or GPU-idle stretches: {why}", class_="muted"))
    else:
        parts += [
            h("h2", "Incidents (root cause ← symptoms)"),
            _incidents_table(timeline.get("incidents") or []),
            h("h2", "Steps"),
            _steps_table(steps, name, run.get("status")),
            h("h2", f"Slowest trajectories (of {timeline.get('trajectories', 0)})"),
            _slowest(timeline.get("slowest") or []),
        ]
    parts += [h("h2", "Alerts in time"), transitions_table(transitions, now)]
    return join(*parts)


def run_from_history(timeline: Json) -> dict[str, Any]:
    """A run the service no longer tracks, in the live API's shape, from its history."""
    r = timeline.get("run") or {}
    return {
        "run": r.get("run"),
        "status": r.get("status"),
        "labels": r.get("labels") or {},
        "events": r.get("events") or 0,
        "started_ts": r.get("first_ts"),
        "last_ts": r.get("last_ts"),
        "step": r.get("last_step"),
        "total_steps": r.get("total_steps"),
        "firing_count": 0,
        "transitions": timeline.get("alerts") or [],
    }


def _first(*values: Any) -> float | None:
    found = [float(v) for v in values if v is not None]
    return min(found) if found else None


def _dur(seconds: Any) -> str:
    return "-" if seconds is None else fmt_duration(float(seconds))


def _steps_table(steps: Sequence[Json], run: str, status: str | None) -> Markup:
    """The latest `MAX_STEPS` steps, oldest first (so a growing gap reads down the page); a
    step without an end as `open_step` says it for the run's `status`."""
    unended = open_step(status)
    head = h(
        "tr",
        *(
            h("th", c)
            for c in ("step", "start", "duration", "gap before", "GPU idle", "reward", "timing")
        ),
    )
    rows = []
    if len(steps) > MAX_STEPS:
        earlier = len(steps) - MAX_STEPS
        said = (
            f"the {earlier:,} steps before these are on the picture, and in `runwatch show {run}`"
        )
        rows.append(h("tr", h("td", said, colspan=7, class_="muted")))
    for s in steps[-MAX_STEPS:]:
        timing = ", ".join(f"{k} {_dur(v)}" for k, v in (s.get("timing") or {}).items())
        reward = s.get("reward")
        rows.append(
            h(
                "tr",
                h("td", s.get("step"), class_="num"),
                h("td", when(s.get("start_ts"))),
                h("td", _dur(s.get("duration_s")) if s.get("end_ts") is not None else unended),
                h("td", _dur(s.get("between_s"))),
                h("td", _dur(s.get("idle_s")) if s.get("idle_s") else "-", class_="idle-gap"),
                h("td", "-" if reward is None else f"{float(reward):.4g}"),
                h("td", timing),
            )
        )
    if not rows:
        rows.append(h("tr", h("td", "no step yet", colspan=7, class_="muted")))
    return h("table", head, *rows, id="steps")


def _incidents_table(incidents: Sequence[Json]) -> Markup:
    """Every incident of the run in the history, as `runwatch show` lists them."""
    head = h("tr", *(h("th", c) for c in ("incident", "opened", "lasted", "root cause",
                                           "symptoms")))  # fmt: skip
    rows = []
    for i in incidents:
        root = str(i.get("root_rule")) + (f" ({i['root_subject']})" if i.get("root_subject")
                                          else "")  # fmt: skip
        lasted = "open" if i.get("open") else _dur(i.get("duration_s"))
        rows.append(h("tr", h("td", incident_link(str(i["id"]), incident_number(str(i["id"])))),
                      h("td", when(i.get("opened_ts"))), h("td", lasted), h("td", root),
                      h("td", ", ".join(map(str, i.get("symptoms") or [])) or "-")))  # fmt: skip
    if not rows:
        rows.append(h("tr", h("td", "none", colspan=5, class_="muted")))
    return h("table", head, *rows, id="incidents")


def _slowest(slowest: Sequence[Json]) -> Markup:
    head = h("tr", *(h("th", c) for c in ("trajectory", "step", "lasted", "status", "time in")))
    rows = []
    for t in slowest:
        phases = sorted((t.get("time_per_phase") or {}).items(), key=lambda kv: -float(kv[1]))
        where = ", ".join(f"{p} {_dur(v)}" for p, v in phases if float(v) >= 0.5) or "-"
        status = str(t.get("status"))
        if status in ("pending", "unfinished"):
            status += f", last in {t.get('phase')}"
        rows.append(
            h(
                "tr",
                h("td", t.get("traj")),
                h("td", t.get("step", "-")),
                h("td", _dur(t.get("duration_s"))),
                h("td", status),
                h("td", where),
            )
        )
    if not rows:
        rows.append(h("tr", h("td", "none", colspan=5, class_="muted")))
    return h("table", head, *rows, id="slowest")

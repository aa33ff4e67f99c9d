"""A run's timeline as a picture (inline SVG): one time axis; a row of steps, a row of the
stretches when the GPU sat idle while trajectories waited, and a row per alert with the
span it fired for. Written with `markup.h`, so every text and attribute is escaped (a rule's
subject is a progress name or a server a job chose)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runwatch.service.markup import Markup, h
from runwatch.stream.rules.base import fmt_duration

WIDTH = 1000
LEFT = 210  # the rows' names
RIGHT = 12
STEP_ROW, IDLE_ROW, ALERT_ROW, AXIS = 30, 20, 18, 26
MAX_ALERT_ROWS = 14
NAME_CHARS = 29  # a row's name, cut to fit LEFT (the whole name on hover)
TICK_CHAR = 6.6  # about the width of a character of a tick's time (11 px), for the axis' room
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
#: tick spacings, seconds: the first that gives at most 8 ticks
TICKS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    172800,
    604800,
)


@dataclass(frozen=True)
class Span:
    """An alert's firing, from its firing transition to its resolution (None: still open)."""

    rule: str
    subject: str | None
    severity: str
    start: float
    end: float | None
    summary: str

    @property
    def name(self) -> str:
        return self.rule + (f" [{self.subject}]" if self.subject else "")


def alert_spans(transitions: Iterable[Mapping[str, Any]]) -> list[Span]:
    """Firing to resolved, per alert (rule and subject), from transitions in any order --
    the API's (`/v1/runs/{run}` transitions) or the history's (a timeline's alerts)."""
    open_: dict[tuple[str, str | None], Mapping[str, Any]] = {}
    out: list[Span] = []
    for a in sorted(transitions, key=lambda a: (float(a["ts"]), a["state"] != "resolved")):
        key = (str(a["rule"]), a.get("subject"))
        if a["state"] == "firing":
            open_.setdefault(key, a)
            continue
        began = open_.pop(key, None)
        if began is not None:
            out.append(_span(began, float(a["ts"])))
    out += [_span(a, None) for a in open_.values()]
    return sorted(out, key=lambda s: (s.start, s.name))


def _span(firing: Mapping[str, Any], end: float | None) -> Span:
    subject = firing.get("subject")
    return Span(
        str(firing["rule"]),
        None if subject is None else str(subject),
        str(firing.get("severity") or "info"),
        float(firing["ts"]),
        end,
        str(firing.get("summary") or ""),
    )


def _tick_every(seconds: float) -> int:
    return next((t for t in TICKS if seconds / t <= 8), TICKS[-1])


def _clock(ts: float, every: int, whole: float) -> str:
    fmt = "%H:%M:%S" if every < 60 else "%H:%M"
    if whole > 86400:
        fmt = "%b %d " + fmt
    return time.strftime(fmt, time.gmtime(ts))


def timeline(
    start: float,
    end: float,
    steps: Sequence[Mapping[str, Any]] = (),
    idle: Sequence[Mapping[str, Any]] = (),
    spans: Sequence[Span] = (),
    *,
    unended: str = "running",
) -> Markup:
    """The picture of [start, end]: steps (`step`, `start_ts`, `end_ts`), idle stretches
    (`start_ts`, `end_ts`, `seconds`) and alert spans, on one axis (UTC); a step without an
    end is drawn to `end` and called `unended` (`store.report.open_step`)."""
    end = max(end, start + 1.0)
    scale = (WIDTH - LEFT - RIGHT) / (end - start)

    def x(ts: float) -> float:
        return round(LEFT + (min(max(ts, start), end) - start) * scale, 2)

    def bar(y: float, height: float, t0: float, t1: float, cls: str, tip: str) -> Markup:
        x0, x1 = x(t0), x(t1)
        return h(
            "rect", h("title", tip), x=x0, y=y, width=max(x1 - x0, 1.5), height=height, class_=cls
        )

    def row_name(y: float, height: float, text: str, cls: str = "rowname") -> Markup:
        short = text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"
        label = h("text", short, x=LEFT - 8, y=round(y + height / 2 + 4, 2),
                  text_anchor="end", class_=cls)  # fmt: skip
        return label if short == text else h("g", h("title", text), label)

    parts: list[Markup] = []
    y = 4.0
    parts.append(row_name(y, STEP_ROW, "steps"))
    for i, s in enumerate(steps):
        s0 = s.get("start_ts")
        if s0 is None:
            continue
        s1 = s.get("end_ts")
        done = s1 is not None
        t1 = end if s1 is None else float(s1)
        label = f"step {s['step']}: " + (fmt_duration(t1 - float(s0)) if done else unended)
        parts.append(
            bar(
                y,
                STEP_ROW,
                float(s0),
                t1,
                f"step step{i % 2}" + ("" if done else f" {unended}"),
                label,
            )
        )
        if x(t1) - x(float(s0)) >= 22:
            parts.append(
                h(
                    "text",
                    s["step"],
                    x=round((x(float(s0)) + x(t1)) / 2, 2),
                    y=y + STEP_ROW / 2 + 4,
                    text_anchor="middle",
                    class_="steplabel",
                )
            )
    y += STEP_ROW + 6
    parts.append(row_name(y, IDLE_ROW, "GPU idle, work waiting"))
    for g in idle:
        g0, g1 = float(g["start_ts"]), float(g["end_ts"])
        parts.append(bar(y, IDLE_ROW, g0, g1, "idle", f"GPU idle {fmt_duration(g1 - g0)}"))
    y += IDLE_ROW + 8
    rows: dict[str, list[Span]] = {}  # one row per alert (rule and subject), first first
    for sp in spans:
        rows.setdefault(sp.name, []).append(sp)
    for name, mine in list(rows.items())[:MAX_ALERT_ROWS]:
        worst = min(mine, key=lambda sp: SEVERITY_ORDER.get(sp.severity, 3)).severity
        parts.append(row_name(y, ALERT_ROW, name, f"rowname sev-{worst}"))
        for sp in mine:
            t1 = end if sp.end is None else sp.end
            lasted = fmt_duration(t1 - sp.start) + ("" if sp.end is not None else ", firing")
            tip = f"{name} ({lasted}): {sp.summary}"
            parts.append(bar(y + 2, ALERT_ROW - 4, sp.start, t1, f"alert sev-{sp.severity}", tip))
        y += ALERT_ROW
    if len(rows) > MAX_ALERT_ROWS:
        parts.append(row_name(y, ALERT_ROW, f"+{len(rows) - MAX_ALERT_ROWS} more alerts"))
        y += ALERT_ROW
    grid, axis = _axis(y + 4, start, end, x)
    parts = [grid, *parts, axis]  # the grid behind the bars
    height = y + 4 + AXIS
    return h(
        "svg",
        h("title", "timeline"),
        *parts,
        viewBox=f"0 0 {WIDTH} {height:.0f}",
        class_="timeline",
        role="img",
        xmlns="http://www.w3.org/2000/svg",
    )


def _axis(y: float, start: float, end: float, x: Any) -> tuple[Markup, Markup]:
    """The grid lines (drawn first, behind), and the axis with its times."""
    every = _tick_every(end - start)
    grid = []
    parts = [h("line", x1=LEFT, x2=WIDTH - RIGHT, y1=y, y2=y, class_="axis")]
    tick = (int(start) // every + 1) * every
    while tick < end:
        grid.append(h("line", x1=x(tick), x2=x(tick), y1=0, y2=y + 4, class_="grid"))
        text = _clock(tick, every, end - start)
        # a tick just after the start would print its time over the axis' "UTC": its line only
        if x(tick) - TICK_CHAR * len(text) / 2 >= LEFT - 4:
            parts.append(
                h("text", text, x=x(tick), y=y + 17, text_anchor="middle", class_="ticklabel")
            )
        tick += every
    parts.append(h("text", "UTC", x=LEFT - 8, y=y + 17, text_anchor="end", class_="ticklabel"))
    return Markup("".join(grid)), Markup("".join(parts))

"""A live terminal view of a running service (rich): its runs, their state, and the alert
transitions as they happen. Reads the service's JSON API only."""

from __future__ import annotations

import time
from typing import Any, Protocol

from rich.console import Group
from rich.table import Table
from rich.text import Text


class Fetches(Protocol):
    """A client of the service's API (`ServeProcess`): the JSON answer to a GET of `path`."""

    def get(self, path: str) -> Any: ...


STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def runs_table(runs: list[dict[str, Any]], firing: list[dict[str, Any]]) -> Table:
    by_run: dict[str, list[dict[str, Any]]] = {}
    for a in firing:
        by_run.setdefault(a["run"], []).append(a)
    table = Table(title="runs", title_justify="left", expand=True)
    for col, kw in (("run", {}), ("injected", {"style": "dim"}), ("step", {"justify": "right"}),
                    ("events", {"justify": "right"}), ("state", {"ratio": 1})):  # fmt: skip
        table.add_column(col, **kw)
    for r in sorted(runs, key=lambda r: r["run"]):
        alerts = by_run.get(r["run"], [])
        if r["status"] != "running":
            state = Text(r["status"], style="dim")
        elif alerts:
            worst = "critical" if any(a["severity"] == "critical" for a in alerts) else "warning"
            names = ", ".join(sorted({a["rule"] for a in alerts}))
            state = Text(f"FIRING {names}", style=STYLE[worst])
        else:
            state = Text("ok", style="green")
        table.add_row(
            r["run"],
            r["labels"].get("sim_fault") or "-",
            str(r["step"] if r["step"] is not None else "-"),
            f"{r['events']:,}",
            state,
        )
    return table


def alerts_table(transitions: list[dict[str, Any]], limit: int = 12) -> Table:
    table = Table(title="alert transitions (newest last)", title_justify="left", expand=True)
    table.add_column("time", no_wrap=True)
    table.add_column("state", no_wrap=True)
    # rule (with its subject) and run wrap too: on 80 columns they must leave the summary room
    table.add_column("rule", ratio=1, overflow="fold")
    table.add_column("run", ratio=1, overflow="fold")
    # the summary is the evidence: wrapped at any width, never cut to "…"
    table.add_column("summary", ratio=3, overflow="fold", min_width=24)
    for a in transitions[-limit:]:
        if a["state"] == "firing":
            state = Text(f"FIRING {a['severity']}", style=STYLE.get(a["severity"], ""))
        else:
            state = Text("resolved", style="green")
        rule = a["rule"] + (f" [{a['subject']}]" if a.get("subject") else "")
        table.add_row(_clock(a["ts"]), state, rule, a["run"], a["summary"])
    if not transitions:
        table.add_row("", Text("(none yet)", style="dim"), "", "", "")
    return table


def render(api: Fetches, header: str) -> Group:
    """One frame from a client with `get(path)` (ServeProcess)."""
    runs = api.get("/v1/runs")["runs"]
    firing = api.get("/v1/alerts?state=firing")["alerts"]
    transitions = api.get("/v1/alerts")["alerts"]
    return Group(Text(header, style="bold"), runs_table(runs, firing), alerts_table(transitions))

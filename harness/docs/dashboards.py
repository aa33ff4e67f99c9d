"""Generate runwatch's Grafana dashboards (JSON) and their provisioning file.

    .venv/bin/python -m harness.docs.dashboards          # rewrites dashboards/*.json (and
                                                         # the Helm chart's copies)
    .venv/bin/python -m harness.docs.dashboards --check  # exit 1 if the committed JSON differs

Why code: every panel's query is listed once here, and tests/integration/test_prometheus.py
sends each one (via `queries()`) to a real Prometheus scraping a replayed scenario; a metric
renamed in the exporter breaks that test, not a user's dashboard. Plain dicts, no SDK: the
output is the current Grafana schema (schemaVersion 39), a `datasource` variable and no
hard-coded datasource UIDs, so the files import unchanged (UI import or provisioning).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runwatch.stream.rules import BUILTIN_RULES

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "dashboards"
SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}
RUN = 'run="$run"'
#: the rules that say a run stopped moving (`Rule.hang`)
STALL_RULES = "|".join(rule.id for rule in BUILTIN_RULES if rule.hang)

Panel = dict[str, Any]


def target(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend}
    if instant:
        t.update(instant=True, range=False, format="table")
    return t


class Layout:
    """Places panels left to right on Grafana's 24-column grid."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1

    def panel(
        self, kind: str, title: str, targets: list[dict[str, Any]], w: int, h: int, **extra: Any
    ) -> Panel:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        p: Panel = {
            "id": self.next_id,
            "type": kind,
            "title": title,
            "datasource": DS,
            "gridPos": {"x": self.x, "y": self.y, "w": w, "h": h},
            "targets": targets,
            "fieldConfig": {"defaults": extra.pop("defaults", {}), "overrides": []},
            "options": extra.pop("options", {}),
        }
        p.update(extra)
        self.next_id += 1
        self.x += w
        self.row_h = max(self.row_h, h)
        return p


def stat(
    lay: Layout,
    title: str,
    expr: str,
    w: int = 6,
    unit: str = "none",
    thresholds: Sequence[tuple[float | None, str]] | None = None,
    desc: str = "",
) -> Panel:
    steps = [{"color": c, "value": v} for v, c in (thresholds or [(None, "green")])]
    return lay.panel(
        "stat",
        title,
        [target(expr)],
        w,
        4,
        description=desc,
        defaults={"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
        },
    )


def timeseries(
    lay: Layout,
    title: str,
    targets: list[dict[str, Any]],
    w: int = 12,
    h: int = 8,
    unit: str = "none",
    desc: str = "",
    stack: bool = False,
    bars: bool = False,
) -> Panel:
    custom: dict[str, Any] = {"lineWidth": 1, "fillOpacity": 20 if stack else 0}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    if bars:
        custom["drawStyle"] = "bars"
        custom["fillOpacity"] = 80
    return lay.panel(
        "timeseries",
        title,
        targets,
        w,
        h,
        description=desc,
        defaults={"unit": unit, "custom": custom},
        options={
            "legend": {"displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "multi"},
        },
    )


def table(
    lay: Layout,
    title: str,
    targets: list[dict[str, Any]],
    w: int = 24,
    h: int = 8,
    desc: str = "",
    hide: tuple[str, ...] = ("Time",),
) -> Panel:
    transformations: list[dict[str, Any]] = []
    if len(targets) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append(
        {"id": "organize", "options": {"excludeByName": dict.fromkeys(hide, True)}}
    )
    return lay.panel(
        "table",
        title,
        targets,
        w,
        h,
        description=desc,
        transformations=transformations,
        options={"showHeader": True},
    )


def variables(with_run: bool) -> dict[str, Any]:
    var: list[dict[str, Any]] = [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
            "options": [],
        }
    ]
    if with_run:
        q = "label_values(runwatch_run_info, run)"
        var.append(
            {
                "name": "run",
                "label": "Run",
                "type": "query",
                "datasource": DS,
                "query": {"query": q, "refId": "run"},
                "definition": q,
                "current": {},
                "hide": 0,
                "refresh": 2,
                "sort": 1,
                "multi": False,
                "includeAll": False,
                "options": [],
                "regex": "",
            }
        )
    return {"list": var}


def dashboard(
    uid: str,
    title: str,
    panels: list[Panel],
    *,
    with_run: bool = False,
    annotations: list[dict[str, Any]] | None = None,
    desc: str = "",
) -> dict[str, Any]:
    builtin = {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["runwatch"],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "type": "dashboards",
                "tags": ["runwatch"],
                "asDropdown": True,
                "title": "runwatch",
                "includeVars": False,
                "keepTime": True,
            }
        ],
        "annotations": {"list": [builtin, *(annotations or [])]},
        "templating": variables(with_run),
        "panels": panels,
    }


# -- the three dashboards --------------------------------------------------------------------


#: a fleet incident open (shared_cause), on the overview and on every run's board: a run's
#: stall may be the fleet's
FLEET_ANNOTATION: dict[str, Any] = {
    "name": "runwatch fleet incidents",
    "datasource": DS,
    "enable": True,
    "iconColor": "orange",
    "expr": "max by (cause, kind) (runwatch_fleet_incident_runs) > 0",
    "step": "60s",
    "titleFormat": "fleet incident: {{cause}}",
    "textFormat": "runs stalled together on {{cause}} (runwatch show @fleet)",
    "tagKeys": "cause,kind",
    "useValueForTime": False,
}


def overview() -> dict[str, Any]:
    lay = Layout()
    red = [(None, "green"), (1, "red")]
    panels = [
        stat(
            lay,
            "Live runs",
            'sum(runwatch_runs{state="live"}) or vector(0)',
            desc="Runs with events and no run.finished",
        ),
        stat(lay, "Firing alerts", "sum(runwatch_alerts_firing) or vector(0)", thresholds=red),
        stat(
            lay,
            "Stalled runs",
            f'count(sum by (run) (runwatch_alerts_firing{{rule=~"{STALL_RULES}"}}) > 0)'
            " or vector(0)",
            thresholds=red,
            desc="Runs with a stall alert firing: idle inference with pending work, stuck "
            "progress, lost heartbeat or stalled ranks",
        ),
        stat(
            lay,
            "Idle inference servers",
            "sum(runwatch_inference_server_idle) or vector(0)",
            thresholds=[(None, "green"), (1, "orange")],
            desc="Live servers with nothing running or waiting",
        ),
        table(
            lay,
            "Runs",
            [
                target("max by (run, status) (runwatch_run_info)", ref="A", instant=True),
                target("max by (run) (runwatch_step)", ref="B", instant=True),
                target(
                    "max by (run) (runwatch_alerts_firing_total_per_run)", ref="C", instant=True
                ),
                target("max by (run) (runwatch_trajectories_pending)", ref="D", instant=True),
                target(
                    "max by (run) (runwatch_inference_idle_with_pending_seconds)",
                    ref="E",
                    instant=True,
                ),
            ],
            h=9,
            desc="Every live run: status, step, firing alerts, pending trajectories, "
            "seconds inference has been idle while trajectories wait",
        ),
        table(
            lay,
            "Open fleet incidents",
            [target("max by (cause, kind) (runwatch_fleet_incident_runs) > 0", instant=True)],
            h=6,
            hide=("Time", "__name__", "job", "instance"),
            desc="One shared thing -- a reward or sandbox service (dep), a node (host), an "
            "inference server -- whose runs stalled together (shared_cause), and how many "
            "runs it holds; runwatch show @fleet lists them",
        ),
        timeseries(
            lay,
            "Pending trajectories per run",
            [target("sum by (run) (runwatch_trajectories_pending)", "{{run}}")],
        ),
        timeseries(
            lay,
            "Inference idle while trajectories wait",
            [target("max by (run) (runwatch_inference_idle_with_pending_seconds)", "{{run}}")],
            unit="s",
        ),
        timeseries(
            lay,
            "Events per second by kind",
            [target("sum by (kind) (rate(runwatch_events_total[$__rate_interval]))", "{{kind}}")],
            unit="ops",
        ),
        timeseries(
            lay,
            "Processing lag and invalid events",
            [
                target("max(runwatch_processing_lag_seconds)", "lag (s)", "A"),
                target(
                    "sum(rate(runwatch_events_invalid_total[$__rate_interval])) or vector(0)",
                    "invalid/s",
                    "B",
                ),
            ],
        ),
    ]
    return dashboard(
        "runwatch-overview",
        "runwatch / Cluster overview",
        panels,
        annotations=[FLEET_ANNOTATION],
        desc="Every live RL run: state, alerts, stalls, idle inference",
    )


def run_drilldown() -> dict[str, Any]:
    lay = Layout()
    panels = [
        stat(lay, "Step", f"max(runwatch_step{{{RUN}}})", w=4),
        stat(
            lay,
            "Firing alerts",
            f"sum(runwatch_alerts_firing{{{RUN}}}) or vector(0)",
            w=4,
            thresholds=[(None, "green"), (1, "red")],
        ),
        stat(
            lay,
            "Idle while work waits",
            f"max(runwatch_inference_idle_with_pending_seconds{{{RUN}}})",
            w=4,
            unit="s",
            thresholds=[(None, "green"), (120, "red")],
        ),
        stat(
            lay,
            "Oldest pending trajectory",
            f"max(runwatch_trajectory_oldest_pending_age_seconds{{{RUN}}})",
            w=4,
            unit="s",
        ),
        stat(
            lay,
            "Last step duration",
            f"max(runwatch_step_duration_seconds{{{RUN}}})",
            w=4,
            unit="s",
        ),
        stat(lay, "Reward (latest step)", f"max(runwatch_step_reward{{{RUN}}})", w=4, unit="none"),
        timeseries(
            lay,
            "Inference queue vs pending trajectories by phase",
            [
                target(
                    f"sum by (phase) (runwatch_trajectories_pending{{{RUN}}})",
                    "pending: {{phase}}",
                    "A",
                ),
                target(f"sum(runwatch_inference_running{{{RUN}}})", "inference running", "B"),
                target(f"sum(runwatch_inference_waiting{{{RUN}}})", "inference waiting", "C"),
            ],
            w=24,
            h=9,
            desc="Trajectories waiting (stacked by phase) against the inference "
            "servers' queues: pending work with running+waiting at 0 is the "
            "GPU idling while trajectories wait",
        ),
        timeseries(
            lay,
            "Progress",
            [
                target(
                    f"runwatch_progress_n{{{RUN}}} / runwatch_progress_total{{{RUN}}}",
                    "{{component}}: {{name}}",
                ),
            ],
            unit="percentunit",
        ),
        timeseries(
            lay,
            "Seconds since each progress bar advanced",
            [
                target(f"runwatch_progress_stall_seconds{{{RUN}}}", "{{component}}: {{name}}"),
            ],
            unit="s",
        ),
        timeseries(
            lay,
            "Reward per step",
            [
                target(f"max(runwatch_step_reward{{{RUN}}})", "reward"),
            ],
        ),
        timeseries(
            lay,
            "Step time by phase (last finished step)",
            [
                target(f"sum by (phase) (runwatch_step_phase_seconds{{{RUN}}})", "{{phase}}", "A"),
                target(f"max(runwatch_step_duration_seconds{{{RUN}}})", "step total", "B"),
            ],
            unit="s",
            bars=True,
        ),
        timeseries(
            lay,
            "GPU-idle gap per step",
            [
                target(f"max(runwatch_step_idle_gap_seconds{{{RUN}}})", "idle gap (last step)"),
            ],
            unit="s",
            bars=True,
            desc="Time within the last finished step during which "
            "inference sat idle while trajectories waited",
        ),
        timeseries(
            lay,
            "Inference KV-cache usage",
            [
                target(f"runwatch_inference_kv_cache_usage{{{RUN}}}", "{{server}}"),
            ],
            unit="percentunit",
        ),
        timeseries(
            lay,
            "Seconds since last heartbeat, per component",
            [
                target(f"runwatch_heartbeat_age_seconds{{{RUN}}}", "{{component}}"),
            ],
            unit="s",
        ),
        table(
            lay,
            "Firing alerts",
            [
                target(f"runwatch_alerts_firing{{{RUN}}} > 0", instant=True),
            ],
            w=12,
            hide=("Time", "__name__", "job", "instance"),
        ),
    ]
    annotations = [
        {
            "name": "runwatch alerts",
            "datasource": DS,
            "enable": True,
            "iconColor": "red",
            "expr": f"runwatch_alerts_firing{{{RUN}}} > 0",
            "step": "60s",
            "titleFormat": "{{rule}} ({{severity}})",
            "textFormat": "{{rule}} firing",
            "tagKeys": "rule,severity",
            "useValueForTime": False,
        },
        {
            "name": "runwatch incidents",
            "datasource": DS,
            "enable": True,
            "iconColor": "purple",
            "expr": f"runwatch_incidents_open{{{RUN}}} > 0",
            "step": "60s",
            "titleFormat": "incident: root cause {{root_rule}}",
            "textFormat": "an incident whose root cause is {{root_rule}} (runwatch show RUN)",
            "tagKeys": "root_rule",
            "useValueForTime": False,
        },
        FLEET_ANNOTATION,
    ]
    return dashboard(
        "runwatch-run",
        "runwatch / Run drill-down",
        panels,
        with_run=True,
        annotations=annotations,
        desc="One run: where the time goes, and why it stalled",
    )


def alerts() -> dict[str, Any]:
    lay = Layout()
    panels = [
        table(
            lay,
            "Firing alerts",
            [
                target("runwatch_alerts_firing > 0", instant=True),
            ],
            h=10,
            hide=("Time", "__name__", "job", "instance"),
        ),
        timeseries(
            lay,
            "Firing alerts by rule and severity",
            [
                target(
                    "sum by (rule, severity) (runwatch_alerts_firing)", "{{rule}} ({{severity}})"
                ),
            ],
        ),
        timeseries(
            lay,
            "Alert transitions per hour",
            [
                target(
                    "sum by (rule, state) (increase(runwatch_alert_transitions_total[1h]))",
                    "{{rule}} {{state}}",
                ),
            ],
        ),
    ]
    return dashboard(
        "runwatch-alerts",
        "runwatch / Alerts",
        panels,
        desc="Every firing runwatch alert across runs",
    )


DASHBOARDS = {
    "runwatch-overview.json": overview,
    "runwatch-run.json": run_drilldown,
    "runwatch-alerts.json": alerts,
}

PROVISIONING = """\
# Grafana provisioning: copy to /etc/grafana/provisioning/dashboards/ and put the JSON files
# in `path` (or import the JSON through the UI: Dashboards > New > Import). The dashboards
# ask for their Prometheus data source through the `datasource` variable.
apiVersion: 1
providers:
  - name: runwatch
    orgId: 1
    folder: runwatch
    type: file
    disableDeletion: false
    allowUiUpdates: true
    updateIntervalSeconds: 60
    options:
      path: /var/lib/grafana/dashboards/runwatch
      foldersFromFilesStructure: false
"""


def render() -> dict[str, str]:
    """File name -> content, as committed."""
    out = {
        name: json.dumps(build(), indent=2, sort_keys=True) + "\n"
        for name, build in DASHBOARDS.items()
    }
    out["provisioning.yaml"] = PROVISIONING
    return out


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, and the annotations."""
    out = [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]
    out += [
        (f"annotation {a['name']}", a["expr"]) for a in board["annotations"]["list"] if "expr" in a
    ]
    return out


#: The Helm chart ships the dashboards as sidecar ConfigMaps: copies of the JSON here.
CHART = ROOT / "helm" / "runwatch" / "dashboards"


def main(argv: list[str]) -> int:
    stale = []
    for name, content in render().items():
        paths = [HERE / name] + ([CHART / name] if name.endswith(".json") else [])
        for path in paths:
            if "--check" in argv:
                if not path.exists() or path.read_text() != content:
                    stale.append(str(path.relative_to(ROOT)))
            else:
                path.write_text(content)
    if stale:
        print(f"stale: {', '.join(stale)} (run `make docs`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What `runwatch runs` and `runwatch show RUN` print, as data read from the views."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runwatch.emitters.events import FLEET_RUN
from runwatch.store.exceptions import StoreError
from runwatch.store.store import Store, first_row


def _dicts(store: Store, sql: str, args: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = store.con.execute(sql, args or [])
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def list_runs(store: Store) -> list[dict[str, Any]]:
    """One row per run, most recently seen first."""
    return _dicts(
        store,
        "SELECT run, status, last_step, total_steps, open_alerts, open_rules, events, "
        "first_ts, last_ts FROM runs ORDER BY last_ts DESC, run",
    )


def open_step(run_status: str | None) -> str:
    """What a step that never ended is: `running` while its run is; once the run has ended
    (ok, failed, killed) it never will end: `unfinished`, the word trajectories use. Said
    by `runwatch show` and serve's run page alike."""
    return "running" if run_status in (None, "running") else "unfinished"


@dataclass
class Timeline:
    run: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    #: incident id -> its evidence (`process_stacks` details: the stacks, grouped)
    evidence: dict[str, Any] = field(default_factory=dict)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    trajectories: int = 0
    #: the stretches the GPU sat idle while trajectories waited (`idle_spans`), for a picture
    idle: list[dict[str, Any]] = field(default_factory=list)


def fleet_timeline(store: Store) -> Timeline:
    """`runwatch show @fleet`: the fleet incidents (`fleet_incidents`), newest first, and
    their `shared_cause` transitions."""
    tl = Timeline({"run": FLEET_RUN})
    tl.incidents = _dicts(
        store,
        "SELECT id, cause, runs, opened_ts, closed_ts, duration_s, open FROM fleet_incidents "
        "ORDER BY opened_ts DESC, id",
    )
    tl.alerts = _dicts(
        store,
        "SELECT ts, rule, state, severity, subject, summary, open FROM alerts "
        "WHERE run = ? ORDER BY ts, id",
        [FLEET_RUN],
    )
    tl.run["open_incidents"] = sum(1 for i in tl.incidents if i["open"])
    return tl


def run_timeline(store: Store, run: str, *, slowest: int = 5) -> Timeline:
    """`runwatch show RUN`: the run's steps, incidents, alerts, slowest trajectories (of
    `@fleet`: `fleet_timeline`)."""
    if run == FLEET_RUN:
        return fleet_timeline(store)
    rows = _dicts(store, "SELECT * FROM runs WHERE run = ?", [run])
    if not rows:
        near = _dicts(
            store,
            "SELECT run FROM runs ORDER BY jaro_winkler_similarity(run, ?) DESC LIMIT 3",
            [run],
        )
        hint = ", ".join(r["run"] for r in near)
        raise StoreError(f"no run {run!r} in the history" + (f" (closest: {hint})" if hint else ""))
    tl = Timeline(rows[0])
    tl.steps = _dicts(
        store,
        """SELECT s.step, s.start_ts, s.end_ts, s.duration_s, s.timing, s.reward,
                  g.gap_s AS idle_s,
                  s.start_ts - lag(s.end_ts) OVER (ORDER BY s.step) AS between_s
           FROM steps s LEFT JOIN idle_gaps g USING (run, step)
           WHERE s.run = ? ORDER BY s.step""",
        [run],
    )
    tl.alerts = _dicts(
        store,
        "SELECT ts, rule, state, severity, subject, summary, open FROM alerts WHERE run = ? "
        "ORDER BY ts, id",
        [run],
    )
    tl.incidents = _dicts(
        store,
        "SELECT id, opened_ts, duration_s, root_rule, root_subject, symptoms, alerts, open "
        "FROM incidents WHERE run = ? ORDER BY opened_ts, id",
        [run],
    )
    tl.evidence = {
        row["incident"]: row["details"]
        for row in _dicts(
            store,
            "SELECT json_extract_string(raw, '$.incident.id') AS incident, details "
            "FROM alert_log WHERE run = ? AND rule = 'process_stacks' AND state = 'firing' "
            "ORDER BY seq",
            [run],
        )
    }
    tl.idle = _dicts(
        store,
        "SELECT start_ts, end_ts, seconds, ongoing FROM idle_spans WHERE run = ? ORDER BY start_ts",
        [run],
    )
    tl.slowest = _dicts(
        store,
        "SELECT traj, step, start_ts, duration_s, status, phase, time_per_phase "
        "FROM trajectories WHERE run = ? ORDER BY duration_s DESC NULLS LAST, traj LIMIT ?",
        [run, slowest],
    )
    row = first_row(store.con.execute("SELECT count(*) FROM trajectories WHERE run = ?", [run]))
    tl.trajectories = int(row[0]) if row else 0
    return tl

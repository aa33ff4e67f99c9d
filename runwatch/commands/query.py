"""`runwatch sql`, `runwatch runs`, `runwatch show RUN`: reading the history.

All three open the file read-only and only for as long as they run; while the sink is
writing a batch they wait for it (`--wait`), so they work beside a running sink. Or they ask
a running `runwatch serve` for its history (`--url`, else $RUNWATCH_URL when no file is
named: `runwatch.commands.remote`), and print the same.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson

from runwatch.commands.remote import Remote, add_url_args, history_source, run_path
from runwatch.emitters import env
from runwatch.emitters.events import FLEET_RUN
from runwatch.logs import say
from runwatch.store.report import Timeline, list_runs, open_step, run_timeline
from runwatch.store.sql import query
from runwatch.store.store import Store, default_db
from runwatch.stream.rules.base import fmt_duration
from runwatch.timeparse import iso

#: runs named per fleet incident by `runwatch show @fleet` (the view has them all)
MAX_RUNS_SHOWN = 12


def add_db_args(p: argparse.ArgumentParser, *, remote: bool = False) -> None:
    """`--db` and `--wait`; with `remote`, `--url` too (the history of a running serve)."""
    where: Any = p.add_mutually_exclusive_group() if remote else p
    where.add_argument(
        "--db",
        metavar="PATH",
        default=None if remote else default_db(),
        help="the history file (default: $RUNWATCH_DB, else ./runwatch.duckdb)",
    )
    if remote:
        add_url_args(p, "for its history instead (default $RUNWATCH_URL when neither --db "
                     "nor $RUNWATCH_DB names a file)", where)  # fmt: skip
    p.add_argument(
        "--wait",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="how long to wait while a writer (the sink) holds the file (default 30)",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sql",
        help="run a read-only SQL query over the history",
        description="Run SQL over the history (read-only). Tables: events, alert_log, "
        "positions, invalid_events. Views: runs, steps, trajectories, trajectory_phases, "
        "inference, idle_spans, idle_gaps, alerts, incidents, fleet_incidents.",
    )
    p.add_argument("query", metavar="SQL")
    add_db_args(p, remote=True)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--max-width", type=int, default=60, help="table cells are cut at this width")
    p.set_defaults(func=run_sql)

    p = sub.add_parser("runs", help="one line per run: status, step, open alerts")
    add_db_args(p, remote=True)
    p.set_defaults(func=run_runs)

    p = sub.add_parser(
        "show",
        help="a run's timeline: steps, idle gaps, alerts, slowest trajectories "
        "(@fleet: the fleet incidents)",
    )
    p.add_argument("run", metavar="RUN")
    add_db_args(p, remote=True)
    p.add_argument("--slowest", type=int, default=5, help="how many trajectories to list")
    p.set_defaults(func=run_show)


def cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return format(value, ".10g") if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dict | list):
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


def render_table(names: Sequence[str], rows: Sequence[tuple[Any, ...]], width: int) -> str:
    def cut(s: str) -> str:
        s = s.replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    cells = [[cut(cell(v)) for v in row] for row in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    out = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for r in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def remote(args: argparse.Namespace) -> Remote | None:
    """The serve to ask, or None: then `args.db` is the file to read."""
    url = history_source(args.url, args.db, env.DB)
    if url:
        return Remote(url, args.token_file)
    args.db = args.db or default_db()
    return None


def run_sql(args: argparse.Namespace) -> int:
    serve = remote(args)
    if serve is not None:
        answer = serve.post("/v1/sql", {"query": args.query})
        results = [(r["columns"], [tuple(row) for row in r["rows"]]) for r in answer["results"]]
        if any(r.get("truncated") for r in answer["results"]):
            say(f"only the first {len(results[-1][1]):,} rows of a result came back from serve")
    else:
        with Store.reader(args.db, wait=args.wait, external_access=False) as store:
            results = query(store, args.query)
    out = sys.stdout
    for names, rows in results:
        if args.format == "table":
            out.write(render_table(names, rows, args.max_width) + "\n")
        elif args.format == "csv":
            w = csv.writer(out, lineterminator="\n")
            w.writerow(names)
            w.writerows([[cell(v) if v is not None else "" for v in r] for r in rows])
        else:
            for r in rows:
                obj = dict(zip(names, r, strict=True))
                line = orjson.dumps(
                    obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS
                ).decode()
                out.write(line + "\n")
    return 0


# -- runs ------------------------------------------------------------------------------------


def run_runs(args: argparse.Namespace) -> int:
    serve = remote(args)
    if serve is not None:
        runs = serve.get("/v1/history/runs")["runs"]
    else:
        with Store.reader(args.db, wait=args.wait) as store:
            runs = list_runs(store)
    if not runs:
        print("no runs in the history yet")
        return 0
    rows = []
    for r in runs:
        step = "-" if r["last_step"] is None else str(r["last_step"])
        if r["total_steps"]:
            step += f"/{r['total_steps']}"
        alerts = str(r["open_alerts"])
        if r["open_rules"]:
            alerts += " (" + ", ".join(r["open_rules"]) + ")"
        rows.append((r["run"], r["status"], step, r["events"], iso(r["last_ts"]), alerts))
    names = ["RUN", "STATUS", "STEP", "EVENTS", "LAST SEEN", "OPEN ALERTS"]
    table = render_table(names, rows, 200).splitlines()
    print("\n".join(table[:-1]))
    return 0


# -- show ------------------------------------------------------------------------------------


def _dur(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_duration(seconds)


def _stacks(details: Any) -> list[str]:
    """An incident's evidence: where each group of processes was, innermost frame first."""
    if isinstance(details, str):
        details = orjson.loads(details)
    if not isinstance(details, dict):
        return []
    out = []
    for g in details.get("groups") or []:
        who = ", ".join(g.get("processes") or [])
        out.append(f"      {who}: {g.get('where', '')}")
        out += [f"          {f[2]} ({f[0]}:{f[1]})" for f in (g.get("stack") or [])]
    if details.get("not_answering"):
        out.append(f"      not answering: {', '.join(details['not_answering'])}")
    return out


def render_timeline(tl: Timeline) -> str:
    r = tl.run
    out = [f"run {r['run']}  status {r['status']}"]
    if r["labels"]:
        out[0] += "  labels " + " ".join(f"{k}={v}" for k, v in sorted(r["labels"].items()))
    steps = f"last step {r['last_step']}" if r["last_step"] is not None else "no step done"
    if r["total_steps"]:
        steps += f" of {r['total_steps']}"
    out.append(
        f"  {iso(r['first_ts'])} .. {iso(r['last_ts'])} ({_dur(r['last_ts'] - r['first_ts'])}), "
        f"{r['events']} events, {steps}, {r['open_alerts']} open alert(s)"
    )
    out.append("")
    out.append("steps")
    rows = []
    unended = open_step(r["status"])
    for s in tl.steps:
        timing = ", ".join(f"{k} {_dur(v)}" for k, v in (s["timing"] or {}).items())
        rows.append(
            (
                s["step"],
                iso(s["start_ts"]) if s["start_ts"] is not None else "-",
                _dur(s["duration_s"]) if s["end_ts"] is not None else unended,
                _dur(s["between_s"]),
                _dur(s["idle_s"]) if s["idle_s"] else "-",
                "-" if s["reward"] is None else f"{s['reward']:.4g}",
                timing,
            )
        )
    names = ["STEP", "START", "DURATION", "GAP BEFORE", "GPU IDLE", "REWARD", "TIMING"]
    out += ["  " + ln for ln in render_table(names, rows, 80).splitlines()[:-1]]
    out.append("")
    out.append("incidents (root cause <- symptoms)")
    if not tl.incidents:
        out.append("  none")
    for i in tl.incidents:
        number = i["id"].rsplit("|", 1)[-1]
        root = i["root_rule"] + (f" ({i['root_subject']})" if i["root_subject"] else "")
        lasted = "open" if i["open"] else f"lasted {_dur(i['duration_s'])}"
        symptoms = ", ".join(i["symptoms"] or []) or "no other alert"
        out.append(f"  #{number}  {iso(i['opened_ts'])}  {lasted:<14} {root} <- {symptoms}")
        out += _stacks(tl.evidence.get(i["id"]))
    out.append("")
    out.append("alerts")
    if not tl.alerts:
        out.append("  none")
    for a in tl.alerts:
        state = a["state"].upper() + (" (open)" if a["open"] else "")
        out.append(f"  {iso(a['ts'])}  {state:<15} {a['severity']:<8} {a['rule']}")
        out.append(f"      {a['summary']}")
    out.append("")
    out.append(f"slowest trajectories (of {tl.trajectories})")
    if not tl.slowest:
        out.append("  none")
    for t in tl.slowest:
        phases = sorted((t["time_per_phase"] or {}).items(), key=lambda kv: -kv[1])
        where = ", ".join(f"{p} {_dur(v)}" for p, v in phases if v >= 0.5) or "-"
        step = f" step {t['step']}" if t["step"] is not None else ""
        status = t["status"]
        if status in ("pending", "unfinished"):
            status += f", last in {t['phase']}"
        out.append(f"  {t['traj']}{step}: {_dur(t['duration_s'])} ({status}); time in {where}")
    return "\n".join(out)


def run_show(args: argparse.Namespace) -> int:
    serve = remote(args)
    if serve is not None:
        found = serve.get(run_path("/v1/history/runs/", args.run), slowest=args.slowest)
        tl = Timeline(**found)
    else:
        with Store.reader(args.db, wait=args.wait) as store:
            tl = run_timeline(store, args.run, slowest=args.slowest)
    print(render_fleet(tl) if tl.run["run"] == FLEET_RUN else render_timeline(tl))
    return 0


def render_fleet(tl: Timeline) -> str:
    """`runwatch show @fleet`: each fleet incident, its cause and its runs; then the
    `shared_cause` transitions."""
    out = [f"{FLEET_RUN}  {len(tl.incidents)} fleet incident(s), "
           f"{tl.run['open_incidents']} open", "", "fleet incidents (cause: runs)"]  # fmt: skip
    if not tl.incidents:
        out.append("  none")
    for i in tl.incidents:
        number = i["id"].rsplit("|", 1)[-1]
        lasted = "open" if i["open"] else f"lasted {_dur(i['duration_s'])}"
        runs = i["runs"] or []
        shown = ", ".join(runs[:MAX_RUNS_SHOWN]) + (
            f", ... {len(runs) - MAX_RUNS_SHOWN} more" if len(runs) > MAX_RUNS_SHOWN else ""
        )
        out.append(f"  {i['cause']} #{number}  {iso(i['opened_ts'])}  {lasted:<14} "
                   f"{len(runs)} runs: {shown}")  # fmt: skip
    out += ["", "alerts"]
    if not tl.alerts:
        out.append("  none")
    for a in tl.alerts:
        state = a["state"].upper() + (" (open)" if a["open"] else "")
        out.append(f"  {iso(a['ts'])}  {state:<15} {a['severity']:<8} {a['subject']}")
        out.append(f"      {a['summary']}")
    return "\n".join(out)

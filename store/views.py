"""Views that answer the common questions about past runs without writing joins.

Times come twice: `*_ts` columns are epoch seconds (event time, as in the events), and the
matching TIMESTAMP columns (UTC) are for people and for date arithmetic.

`idle_spans` / `idle_gaps` compute the GPU-idle-with-pending time in SQL over stored events,
with the engine's definition (contract §4, `inference_idle_with_pending` without `idle_for`,
as `idle_gap_growing` counts it): at every moment, the condition holds when at least one
trajectory of the run is pending (started, not done, run not finished), the run has shown an
inference server that has not exited cleanly (`heartbeat final`), and every such server is
idle (its latest `inference.stats` says 0 running and 0 waiting; a server without stats: no
request in flight). Each step's gap is how much of [step.started, step.done] that held.
Events are taken in event-time order, ties in arrival order; tests/unit/store/test_views.py
holds the SQL to the engine's per-step gaps on the scenarios and on random histories. A step
with no `step.started` gets, as in the engine, the idle time running at its `step.done`; where
the condition breaks and resumes at one same ts, the view sees one span (the engine two), and
where it changes at exactly the ts of that `step.done`, the view takes the change as first.
"""

from __future__ import annotations

from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS


def ts(expr: str) -> str:
    """Epoch seconds -> UTC TIMESTAMP."""
    return f"make_timestamp(CAST(({expr}) * 1e6 AS BIGINT))"


_metric_reward = "coalesce(" + ", ".join(f"metrics['{k}']" for k in DEFAULT_REWARD_KEYS) + ")"

VIEWS: dict[str, str] = {}

VIEWS["_run_bounds"] = """
    SELECT run, min(ts) AS first_ts, max(ts) AS last_ts, count(*) AS events,
           min(ts) FILTER (WHERE kind = 'run.finished') AS finished_ts
    FROM events GROUP BY run
"""

VIEWS["runs"] = f"""
    WITH ev AS (
        SELECT run, min(ts) AS first_ts, max(ts) AS last_ts, count(*) AS events,
               arg_min(status, ts) FILTER (WHERE kind = 'run.finished') AS finished_status,
               min(ts) FILTER (WHERE kind = 'run.finished') AS finished_ts,
               max(step) FILTER (WHERE kind = 'step.done') AS last_step,
               arg_max(total_steps, ts) FILTER (WHERE kind = 'run.started') AS total_steps,
               arg_max(labels, ts) FILTER (WHERE kind = 'run.started' AND labels IS NOT NULL)
                 AS labels
        FROM events GROUP BY run
    ), latest AS (
        SELECT run, rule, key, arg_max(state, seq) AS state FROM alert_log GROUP BY run, rule, key
    ), open AS (
        SELECT run, count(*) AS open_alerts, list(DISTINCT rule ORDER BY rule) AS open_rules
        FROM latest WHERE state = 'firing' GROUP BY run
    )
    SELECT ev.run,
           coalesce(ev.finished_status, 'running') AS status,
           {ts("ev.first_ts")} AS first_seen,
           {ts("ev.last_ts")} AS last_seen,
           ev.last_step, ev.total_steps, ev.labels, ev.events,
           coalesce(open.open_alerts, 0) AS open_alerts,
           coalesce(open.open_rules, []) AS open_rules,
           ev.first_ts, ev.last_ts, ev.finished_ts
    FROM ev LEFT JOIN open USING (run)
"""

VIEWS["steps"] = f"""
    WITH s AS (
        SELECT run, step,
               min(ts) FILTER (WHERE kind = 'step.started') AS start_ts,
               min(ts) FILTER (WHERE kind = 'step.done') AS end_ts,
               arg_min(duration_s, ts) FILTER (WHERE kind = 'step.done') AS reported_s,
               arg_min(timing, ts) FILTER (WHERE kind = 'step.done') AS timing,
               arg_max(mean, ts) FILTER (WHERE kind = 'reward') AS reward_mean,
               arg_max({_metric_reward}, ts)
                 FILTER (WHERE kind = 'step.metrics' AND {_metric_reward} IS NOT NULL)
                 AS metric_reward,
               arg_max(metrics, ts) FILTER (WHERE kind = 'step.metrics') AS metrics
        FROM events
        WHERE kind IN ('step.started', 'step.done', 'reward', 'step.metrics')
          AND step IS NOT NULL
        GROUP BY run, step
    )
    SELECT run, step, {ts("start_ts")} AS start, {ts("end_ts")} AS "end",
           coalesce(reported_s, end_ts - start_ts) AS duration_s,
           timing, coalesce(reward_mean, metric_reward) AS reward, metrics,
           start_ts, end_ts
    FROM s
"""

VIEWS["trajectory_phases"] = f"""
    WITH t AS (
        SELECT run, traj, ts, seq, kind,
               CASE WHEN kind = 'trajectory.started' THEN 'generate' ELSE phase END AS phase
        FROM events
        WHERE kind IN ('trajectory.started', 'trajectory.phase', 'trajectory.done')
          AND traj IS NOT NULL
    ), seg AS (
        SELECT *, lead(ts) OVER (PARTITION BY run, traj ORDER BY ts, seq) AS next_ts
        FROM t
    )
    SELECT seg.run, traj, phase, seg.ts AS start_ts,
           coalesce(next_ts, greatest(b.last_ts, seg.ts)) AS end_ts,
           {ts("seg.ts")} AS start,
           coalesce(next_ts, greatest(b.last_ts, seg.ts)) - seg.ts AS seconds,
           next_ts IS NULL AS ongoing
    FROM seg JOIN _run_bounds b USING (run)
    WHERE kind <> 'trajectory.done'
"""

VIEWS["trajectories"] = f"""
    WITH b AS (
        SELECT run, traj,
               min(ts) FILTER (WHERE kind = 'trajectory.started') AS start_ts,
               min(ts) FILTER (WHERE kind = 'trajectory.done') AS end_ts,
               arg_min(step, ts) FILTER (WHERE kind = 'trajectory.started') AS step,
               arg_min(status, ts) FILTER (WHERE kind = 'trajectory.done') AS status,
               arg_min(reward, ts) FILTER (WHERE kind = 'trajectory.done') AS reward,
               arg_min(duration_s, ts) FILTER (WHERE kind = 'trajectory.done') AS reported_s,
               arg_max(phase, ts) FILTER (WHERE kind = 'trajectory.phase') AS last_phase
        FROM events
        WHERE kind IN ('trajectory.started', 'trajectory.phase', 'trajectory.done')
          AND traj IS NOT NULL
        GROUP BY run, traj
    ), p AS (
        SELECT run, traj, map_from_entries(list({{'k': phase, 'v': s}} ORDER BY phase))
                 AS time_per_phase
        FROM (SELECT run, traj, phase, sum(seconds) AS s FROM trajectory_phases
              GROUP BY run, traj, phase)
        GROUP BY run, traj
    )
    SELECT b.run, b.traj, b.step, {ts("b.start_ts")} AS start, {ts("b.end_ts")} AS "end",
           coalesce(b.reported_s,
                    coalesce(b.end_ts, greatest(r.finished_ts, r.last_ts)) - b.start_ts)
             AS duration_s,
           coalesce(b.status, CASE WHEN r.finished_ts IS NULL THEN 'pending'
                                   ELSE 'unfinished' END) AS status,
           b.reward, coalesce(b.last_phase, 'generate') AS phase, p.time_per_phase,
           b.start_ts, b.end_ts
    FROM b JOIN _run_bounds r USING (run) LEFT JOIN p USING (run, traj)
"""

VIEWS["inference"] = f"""
    SELECT run, server, ts, {ts("ts")} AS time, running, waiting, kv_cache_usage,
           gen_tokens_per_s, process
    FROM events WHERE kind = 'inference.stats'
"""

VIEWS["alerts"] = f"""
    WITH latest AS (SELECT key, max(seq) AS seq FROM alert_log GROUP BY key)
    SELECT a.run, a.time, a.rule, a.state, a.severity, a.subject, a.summary,
           {ts("a.since")} AS since, a.details, a.key, a.id, a.ts, a.since AS since_ts,
           (a.state = 'firing' AND a.seq = latest.seq) AS open
    FROM alert_log a JOIN latest USING (key)
"""

VIEWS["incidents"] = f"""
    -- one row per incident (contract section 7, "Incidents"): its root as its latest
    -- transition names it, the other alerts as symptoms, closed once its last alert resolved
    WITH t AS (
        SELECT seq, run, ts, rule, key, subject, state,
               json_extract_string(raw, '$.incident.id') AS incident,
               json_extract_string(raw, '$.incident.role') AS role,
               json_extract_string(raw, '$.incident.root') AS root_key,
               json_extract_string(raw, '$.incident.root_rule') AS root_rule,
               CAST(json_extract(raw, '$.incident.opened') AS DOUBLE) AS opened,
               CAST(json_extract(raw, '$.incident.open') AS BOOLEAN) AS still_open
        FROM alert_log WHERE json_extract(raw, '$.incident') IS NOT NULL
    ), latest AS (
        SELECT incident, any_value(run) AS run, min(opened) AS opened_ts,
               arg_max(root_key, seq) AS root_key, arg_max(root_rule, seq) AS root_rule,
               arg_max(still_open, seq) AS still_open, max(ts) AS last_ts,
               count(DISTINCT key) FILTER (WHERE role <> 'evidence') AS alerts
        FROM t GROUP BY incident
    )
    SELECT l.run, l.incident AS id, {ts("l.opened_ts")} AS opened,
           CASE WHEN NOT l.still_open THEN {ts("l.last_ts")} END AS closed,
           l.root_rule,
           (SELECT any_value(subject) FROM t WHERE t.key = l.root_key) AS root_subject,
           (SELECT list(DISTINCT rule ORDER BY rule) FROM t
             WHERE t.incident = l.incident AND t.key <> l.root_key
               AND t.role <> 'evidence') AS symptoms,
           CASE WHEN NOT l.still_open THEN l.last_ts - l.opened_ts END AS duration_s,
           l.alerts, l.still_open AS open, l.opened_ts, l.root_key
    FROM latest l
"""

VIEWS["fleet_incidents"] = f"""
    -- one row per fleet incident (contract section 8): its cause (the `shared_cause`
    -- subject, `dep:` / `host:` / `server:`), the runs it held (every member: those named
    -- when it opened or resolved, and those whose transitions carry its id), opened, and
    -- closed once it resolved
    WITH t AS (
        SELECT seq, ts, state, subject, since,
               json_extract_string(raw, '$.incident.id') AS id,
               json_extract_string(details, '$.kind') AS kind,
               json_extract_string(details, '$.name') AS name,
               CAST(json_extract(details, '$.runs') AS VARCHAR[]) AS runs
        FROM alert_log WHERE run = '@fleet' AND rule = 'shared_cause'
    ), members AS (
        SELECT json_extract_string(raw, '$.incident.fleet') AS id, list(DISTINCT run) AS runs
        FROM alert_log
        WHERE run <> '@fleet' AND json_extract_string(raw, '$.incident.fleet') IS NOT NULL
        GROUP BY 1
    ), f AS (
        SELECT id, any_value(subject) AS cause, any_value(kind) AS kind,
               any_value(name) AS name, min(since) AS since_ts,
               min(ts) FILTER (WHERE state = 'firing') AS opened_ts,
               max(ts) FILTER (WHERE state = 'resolved') AS closed_ts,
               arg_max(state, seq) AS state, flatten(list(runs)) AS named
        FROM t GROUP BY id
    )
    SELECT f.id, f.cause, f.kind, f.name,
           list_sort(list_distinct(list_concat(f.named, coalesce(m.runs, [])))) AS runs,
           {ts("f.opened_ts")} AS opened,
           CASE WHEN f.state = 'resolved' THEN {ts("f.closed_ts")} END AS closed,
           CASE WHEN f.state = 'resolved' THEN f.closed_ts - f.opened_ts END AS duration_s,
           f.state = 'firing' AS open, f.opened_ts, f.closed_ts, f.since_ts
    FROM f LEFT JOIN members m USING (id)
"""

# -- GPU idle while trajectories wait ----------------------------------------------------------

VIEWS["_servers"] = """
    -- every inference server a run showed, and the process whose heartbeats vouch for it
    SELECT run, srv,
           coalesce(arg_max(process, ts) FILTER (WHERE kind = 'inference.stats'),
                    arg_min(process, ts) FILTER (WHERE component = 'inference')) AS process,
           min(ts) AS first_ts, arg_min(seq, (ts, seq)) AS first_seq
    FROM (SELECT run, ts, seq, kind, component, process,
                 CASE WHEN kind = 'inference.stats' THEN server
                      ELSE coalesce(nullif(server, ''), instance, host, 'inference') END AS srv
          FROM events
          WHERE kind IN ('inference.stats', 'request.queued', 'request.done'))
    GROUP BY run, srv
"""

VIEWS["_server_changes"] = """
    -- per server and moment: +/-1 changes of "live" and of "live and busy"
    WITH ev AS (
        SELECT run, ts, seq, kind, running, waiting, req,
               CASE WHEN kind = 'inference.stats' THEN server
                    ELSE coalesce(nullif(server, ''), instance, host, 'inference') END AS srv
        FROM events WHERE kind IN ('inference.stats', 'request.queued', 'request.done')
    ), reqs AS (
        SELECT run, srv, req,
               min(ts) FILTER (WHERE kind = 'request.queued') AS q,
               arg_min(seq, ts) FILTER (WHERE kind = 'request.queued') AS q_seq,
               min(ts) FILTER (WHERE kind = 'request.done') AS d,
               arg_min(seq, ts) FILTER (WHERE kind = 'request.done') AS d_seq
        FROM ev WHERE kind <> 'inference.stats' GROUP BY run, srv, req
    ), final_procs AS (
        SELECT DISTINCT run, process FROM events WHERE kind = 'heartbeat' AND final
    ), sig AS (
        -- only the snapshots that change the server's busy/idle (one lag over the snapshots
        -- saves the windows below most of their rows)
        SELECT run, srv, ts, seq, busy AS stats_busy,
               CAST(NULL AS INTEGER) AS dflight, CAST(NULL AS BOOLEAN) AS fin
        FROM (SELECT run, srv, ts, seq, (running > 0 OR waiting > 0) AS busy,
                     lag(running > 0 OR waiting > 0)
                       OVER (PARTITION BY run, srv ORDER BY ts, seq) AS prev
              FROM ev WHERE kind = 'inference.stats')
        WHERE busy IS NOT NULL AND prev IS DISTINCT FROM busy
        UNION ALL
        SELECT run, srv, q, q_seq, NULL, 1, NULL FROM reqs
        WHERE q IS NOT NULL AND (d IS NULL OR d >= q)
        UNION ALL
        SELECT run, srv, d, d_seq, NULL, -1, NULL FROM reqs WHERE q IS NOT NULL AND d >= q
        UNION ALL
        SELECT run, srv, first_ts, -1, NULL, 0, NULL FROM _servers
        UNION ALL
        SELECT h.run, s.srv, h.ts, h.seq, NULL, NULL, coalesce(h.final, false)
        FROM events h
        JOIN final_procs f ON h.run = f.run AND h.process = f.process
        JOIN _servers s ON h.run = s.run AND h.process = s.process
        WHERE h.kind = 'heartbeat' AND (h.ts, h.seq) > (s.first_ts, s.first_seq)
    ), running_state AS (
        -- in arrival order, like the engine: of two snapshots with one ts, the later counts
        SELECT run, srv, ts, seq,
               last_value(stats_busy IGNORE NULLS) OVER w AS sb,
               sum(dflight) OVER w AS flight,
               last_value(fin IGNORE NULLS) OVER w AS fin
        FROM sig
        WINDOW w AS (PARTITION BY run, srv ORDER BY ts, seq ROWS UNBOUNDED PRECEDING)
    ), st AS (
        -- the state after the last change at each moment
        SELECT * FROM running_state
        QUALIFY row_number() OVER (PARTITION BY run, srv, ts ORDER BY seq DESC) = 1
    ), ind AS (
        SELECT run, srv, ts,
               CAST(NOT coalesce(fin, false) AS INTEGER) AS live,
               CAST(NOT coalesce(fin, false)
                    AND (CASE WHEN sb IS NOT NULL THEN sb ELSE flight > 0 END) AS INTEGER) AS busy
        FROM st
    )
    SELECT run, ts,
           live - coalesce(lag(live) OVER w, 0) AS d_live,
           busy - coalesce(lag(busy) OVER w, 0) AS d_busy
    FROM ind
    WINDOW w AS (PARTITION BY run, srv ORDER BY ts)
"""

VIEWS["idle_spans"] = f"""
    -- the stretches of event time during which every live server was idle while work waited:
    -- first when the servers alone were idle (few rows), then, inside those stretches, the
    -- union of the pending trajectories (one range join instead of a window over them all)
    WITH changes AS (
        SELECT run, ts, d_live AS dl, d_busy AS db, 0 AS fin FROM _server_changes
        WHERE d_live <> 0 OR d_busy <> 0
        UNION ALL
        SELECT run, finished_ts, 0, 0, 1 FROM _run_bounds WHERE finished_ts IS NOT NULL
    ), per_ts AS (
        SELECT run, ts, sum(dl) AS dl, sum(db) AS db, max(fin) AS fin
        FROM changes GROUP BY run, ts
    ), state AS (
        SELECT run, ts,
               sum(dl) OVER w > 0 AND sum(db) OVER w = 0 AND max(fin) OVER w = 0 AS idle
        FROM per_ts
        WINDOW w AS (PARTITION BY run ORDER BY ts ROWS UNBOUNDED PRECEDING)
    ), edges AS (
        SELECT run, ts, idle FROM (
            SELECT run, ts, idle, lag(idle, 1, false) OVER (PARTITION BY run ORDER BY ts) AS prev
            FROM state)
        WHERE idle <> prev
    ), servers_idle AS (
        SELECT run, start_ts, coalesce(end_ts, 'infinity'::DOUBLE) AS end_ts FROM (
            SELECT run, ts AS start_ts, idle,
                   lead(ts) OVER (PARTITION BY run ORDER BY ts) AS end_ts
            FROM edges)
        WHERE idle
    ), stretch_minutes AS (
        -- the minutes (epoch seconds // 60) each stretch touches
        SELECT i.run, i.start_ts, i.end_ts,
               unnest(range(CAST(floor(i.start_ts / 60) AS BIGINT),
                            CAST(floor(least(i.end_ts, b.last_ts) / 60) AS BIGINT) + 1)) AS minute
        FROM servers_idle i JOIN _run_bounds b USING (run)
    ), minutes AS (
        -- every minute of the runs with stretches, and the first stretch start after it
        SELECT g.run, g.minute,
               min(f.a) OVER (PARTITION BY g.run ORDER BY g.minute
                              ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_start
        FROM (SELECT run, unnest(range(CAST(floor(first_ts / 60) AS BIGINT),
                                       CAST(floor(last_ts / 60) AS BIGINT) + 1)) AS minute
              FROM _run_bounds WHERE run IN (SELECT run FROM servers_idle)) g
        LEFT JOIN (SELECT run, CAST(floor(start_ts / 60) AS BIGINT) AS minute, min(start_ts) AS a
                   FROM servers_idle GROUP BY ALL) f USING (run, minute)
    ), candidates AS (
        -- a trajectory pending during a stretch has a mark (the one holding its first start)
        -- that overlaps the stretch: only those trajectories are grouped. A mark overlaps a
        -- stretch that touches the minute of its start, or the first one starting after that
        -- minute: two equality joins on (run, minute) instead of every mark against every
        -- stretch of its run
        SELECT m.run, m.traj
        FROM trajectory_marks m JOIN minutes g
          ON g.run = m.run AND g.minute = CAST(floor(m.start_ts / 60) AS BIGINT)
        WHERE coalesce(m.done_ts, 'infinity'::DOUBLE) > g.next_start
        UNION
        SELECT m.run, m.traj
        FROM trajectory_marks m JOIN stretch_minutes sm
          ON sm.run = m.run AND sm.minute = CAST(floor(m.start_ts / 60) AS BIGINT)
        WHERE m.start_ts < sm.end_ts AND coalesce(m.done_ts, 'infinity'::DOUBLE) > sm.start_ts
    ), tb AS (
        SELECT m.run, m.traj, min(m.start_ts) AS s, min(m.done_ts) AS d
        FROM trajectory_marks m SEMI JOIN candidates c ON c.run = m.run AND c.traj = m.traj
        GROUP BY m.run, m.traj
    ), clipped AS (
        -- DISTINCT: the windows below order by (s, e), which must be a total order, or two
        -- identical intervals can be numbered in one order and summed in another
        SELECT DISTINCT i.run, greatest(t.s, i.start_ts) AS s,
               least(coalesce(t.d, 'infinity'::DOUBLE), i.end_ts) AS e
        FROM servers_idle i JOIN tb t
          ON t.run = i.run AND t.s < i.end_ts AND coalesce(t.d, 'infinity'::DOUBLE) > i.start_ts
        WHERE t.s IS NOT NULL AND (t.d IS NULL OR t.d >= t.s)
    ), flagged AS (
        SELECT run, s, e,
               CASE WHEN s <= max(e) OVER (PARTITION BY run ORDER BY s, e
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                    THEN 0 ELSE 1 END AS new_span
        FROM clipped
    ), spans AS (
        SELECT run, min(s) AS start_ts, max(e) AS end_ts
        FROM (SELECT run, s, e,
                     sum(new_span) OVER (PARTITION BY run ORDER BY s, e
                                         ROWS UNBOUNDED PRECEDING) AS span
              FROM flagged)
        GROUP BY run, span
    )
    SELECT spans.run, {ts("start_ts")} AS start,
           {ts("least(end_ts, b.last_ts)")} AS "end",
           least(end_ts, b.last_ts) - start_ts AS seconds,
           end_ts = 'infinity'::DOUBLE AS ongoing, start_ts,
           least(end_ts, b.last_ts) AS end_ts
    FROM spans JOIN _run_bounds b USING (run)
    WHERE end_ts > start_ts
"""

VIEWS["idle_gaps"] = f"""
    -- per step: seconds of [step.started, step.done] during which the GPU sat idle while
    -- trajectories waited (contract §4, idle_gap_growing)
    WITH s AS (
        SELECT run, step,
               min(ts) FILTER (WHERE kind = 'step.started') AS start_ts,
               min(ts) FILTER (WHERE kind = 'step.done') AS end_ts
        FROM events WHERE kind IN ('step.started', 'step.done') AND step IS NOT NULL
        GROUP BY run, step
    ), g AS (
        SELECT s.run, s.step,
               sum(CASE
                   WHEN sp.start_ts IS NULL THEN 0
                   WHEN s.start_ts IS NULL
                       THEN CASE WHEN sp.start_ts < s.end_ts
                                      AND (sp.ongoing OR sp.end_ts > s.end_ts)
                                 THEN s.end_ts - sp.start_ts ELSE 0 END
                   ELSE greatest(0, least(sp.end_ts, coalesce(s.end_ts, sp.end_ts))
                                    - greatest(sp.start_ts, s.start_ts))
               END) AS gap_s,
               count(sp.start_ts) AS spans
        FROM s LEFT JOIN idle_spans sp
          ON sp.run = s.run
         AND sp.start_ts < coalesce(s.end_ts, 'infinity'::DOUBLE)
         AND sp.end_ts > coalesce(s.start_ts, '-infinity'::DOUBLE)
        GROUP BY s.run, s.step
    )
    SELECT s.run, s.step, {ts("s.start_ts")} AS start, {ts("s.end_ts")} AS "end",
           g.gap_s, round(g.gap_s / 60, 1) AS gap_min,
           g.gap_s / nullif(coalesce(s.end_ts, b.last_ts) - s.start_ts, 0) AS gap_share,
           s.start_ts, s.end_ts
    FROM s JOIN g USING (run, step) JOIN _run_bounds b USING (run)
"""

#: In dependency order: a view only uses views listed before it.
ORDER = [
    "_run_bounds",
    "runs",
    "steps",
    "trajectory_phases",
    "trajectories",
    "inference",
    "alerts",
    "incidents",
    "fleet_incidents",
    "_servers",
    "_server_changes",
    "idle_spans",
    "idle_gaps",
]


def create_views_sql() -> list[str]:
    assert sorted(ORDER) == sorted(VIEWS)
    return [f"CREATE OR REPLACE VIEW {name} AS {VIEWS[name]}" for name in ORDER]

"""The history commands as a new user runs them: ingest an incident, then `runs`, `show`,
SQL questions, a backtest and an export; and bad input answered with one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from runwatch.dev import scenarios

RUNWATCH = str(Path(sys.executable).parent / "runwatch")
SANDBOX = "grpo-qwen2.5-7b-sandbox"
ZERO = "ppo-llama3-8b-math"


def runwatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RUNWATCH, *args], capture_output=True, text=True, timeout=180, check=False, cwd=cwd
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    for name in ("sandbox_hang", "zero_reward"):
        (root / f"{name}.jsonl").write_bytes(
            b"".join(orjson.dumps(e) + b"\n" for e in scenarios.SCENARIOS[name]())
        )
    db = root / "h.duckdb"
    proc = runwatch("ingest", str(root / "sandbox_hang.jsonl"), str(root / "zero_reward.jsonl"),
                    "--db", str(db))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "24100 events (24100 new)" in proc.stderr
    return db


def test_ingest_twice_adds_nothing(history: Path, tmp_path: Path) -> None:
    again = runwatch("ingest", str(history.parent / "sandbox_hang.jsonl"), "--db", str(history))
    assert again.returncode == 0, again.stderr
    assert "(0 new)" in again.stderr
    assert "alert transitions (0 new)" in again.stderr


def test_ingest_reports_invalid_lines_and_keeps_going(tmp_path: Path) -> None:
    src = tmp_path / "mixed.jsonl"
    good = scenarios.orchestrator_dies()[:50]
    src.write_text("\n".join([json.dumps(good[0]), "{not json", *map(json.dumps, good[1:])]))
    proc = runwatch("ingest", str(src), "--db", str(tmp_path / "m.duckdb"))
    assert proc.returncode == 0
    assert f"{src}:2: invalid event: not JSON" in proc.stderr
    assert "50 events (50 new)" in proc.stderr
    rows = runwatch("sql", "SELECT count(*) AS n FROM invalid_events", "--db",
                    str(tmp_path / "m.duckdb"), "--format", "csv")  # fmt: skip
    assert rows.stdout.splitlines() == ["n", "1"]


def test_runs_one_line_per_run(history: Path) -> None:
    proc = runwatch("runs", "--db", str(history))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATUS", "STEP"]
    body = {ln.split()[0]: ln for ln in lines[2:]}
    assert set(body) == {SANDBOX, ZERO}
    assert "killed" in body[ZERO]
    assert "680/1000" in body[ZERO]
    # both were killed: a run's end closes its alerts (contract section 8)
    assert body[ZERO].split()[-1] == body[SANDBOX].split()[-1] == "0"


def test_show_tells_the_story(history: Path) -> None:
    proc = runwatch("show", SANDBOX, "--db", str(history))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"run {SANDBOX}  status killed  labels team=reasoning")
    steps = [ln.split() for ln in out.split("\nsteps\n")[1].split("\n\n")[0].splitlines()[2:]]
    assert [s[0] for s in steps] == ["1", "2", "3", "4"]
    assert [s[5] for s in steps[:3]] == ["20m", "21m", "26m"]  # GPU IDLE
    assert "GPU-idle gap per step is growing: 20m -> 21m -> 26m" in out
    incidents = out.split("incidents (root cause <- symptoms)\n")[1].split("\n\n")[0]
    lines = incidents.splitlines()
    assert [ln.split()[0] for ln in lines] == ["#1", "#2", "#3", "#4", "#5"]
    # the idle gap grew while nothing that explains it fired: an incident of its own
    assert lines[-2].endswith("lasted 116m    idle_gap_growing <- no other alert"), lines
    assert lines[-1].endswith("inference_idle_with_pending <- stuck_progress"), lines
    slowest = out.split("slowest trajectories (of 2048)\n")[1].splitlines()
    assert slowest[0].startswith("  s4-t511 step 4:")
    assert "last in sandbox" in slowest[0]
    assert "sandbox 99m" in slowest[0]


def test_show_unknown_run(history: Path) -> None:
    proc = runwatch("show", "grpo-qwen2.5-7b", "--db", str(history))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"runwatch show: no run 'grpo-qwen2.5-7b' in the history (closest: {SANDBOX}, {ZERO})"
    ]


def test_three_sql_questions(history: Path) -> None:
    # 1. which runs had a GPU-idle gap over 10 minutes, and in which phase were the
    #    trajectories pending when the GPU went idle?
    q1 = runwatch(
        "sql",
        "SELECT g.run, g.step, g.gap_min, p.phase, count(*) AS pending "
        "FROM idle_gaps g "
        "JOIN idle_spans s ON s.run = g.run AND s.start_ts >= g.start_ts "
        "  AND s.start_ts < coalesce(g.end_ts, s.end_ts) "
        "JOIN trajectory_phases p ON p.run = g.run AND p.start_ts <= s.start_ts "
        "  AND p.end_ts > s.start_ts "
        "WHERE g.gap_s > 600 GROUP BY ALL ORDER BY g.run, g.step",
        "--db", str(history), "--format", "json",
    )  # fmt: skip
    assert q1.returncode == 0, q1.stderr
    rows = [json.loads(ln) for ln in q1.stdout.splitlines()]
    assert [(r["run"], r["step"], r["gap_min"], r["phase"]) for r in rows] == [
        (SANDBOX, 1, 20.0, "sandbox"),
        (SANDBOX, 2, 21.0, "sandbox"),
        (SANDBOX, 3, 26.0, "sandbox"),
        (SANDBOX, 4, 99.0, "sandbox"),
    ]
    # 2. when did the reward go to zero, per run?
    q2 = runwatch("sql", "SELECT run, min(step) AS first_zero FROM steps WHERE reward = 0 "
                  "GROUP BY run", "--db", str(history), "--format", "csv")  # fmt: skip
    assert q2.stdout.splitlines() == ["run,first_zero", f"{ZERO},188"]
    # 3. which alerts were still firing when each run ended (and so closed with it)?
    q3 = runwatch("sql", "SELECT run, rule, severity FROM alerts WHERE state = 'resolved' "
                  "AND json_extract_string(details, '$.reason') = 'run_finished' "
                  "ORDER BY run, rule", "--db", str(history))  # fmt: skip
    assert q3.returncode == 0, q3.stderr
    lines = q3.stdout.splitlines()
    assert lines[0].split() == ["run", "rule", "severity"]
    assert [ln.split() for ln in lines[2:-1]] == [
        [SANDBOX, "idle_gap_growing", "warning"],
        [SANDBOX, "inference_idle_with_pending", "critical"],
        [SANDBOX, "stuck_progress", "warning"],
        [ZERO, "heartbeat_lost", "critical"],
        [ZERO, "zero_reward", "critical"],
    ]
    assert lines[-1] == "(5 rows)"


def test_backtest_zero_reward_steps_10_moves_the_firing_five_steps(
    history: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[rules.zero_reward]\nsteps = 10\n")
    proc = runwatch("backtest", "--db", str(history), "--config", str(rules), "--run", ZERO)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    moved = [ln for ln in lines if ln.strip().startswith("moved")]
    assert len(moved) == 1
    assert "zero_reward firing" in moved[0]
    assert "(step 192) -> " in moved[0]
    assert "(step 197)" in moved[0]
    assert "+5 steps" in moved[0]
    assert lines[-1].startswith("1 moved, 0 added, 0 removed,")
    same = runwatch("backtest", "--db", str(history), "--format", "json")
    assert same.returncode == 0
    assert same.stdout == ""  # the rules that recorded the history change nothing


def test_export_partitions_by_day_and_run(history: Path, tmp_path: Path) -> None:
    out = tmp_path / "pq"
    proc = runwatch("export", "--db", str(history), "--parquet", str(out))
    assert proc.returncode == 0, proc.stderr
    parts = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert parts == [
        f"day=2026-03-14/run={SANDBOX}",
        f"day=2026-03-14/run={ZERO}",
        f"day=2026-03-15/run={ZERO}",
    ]
    again = runwatch("export", "--db", str(history), "--parquet", str(out))
    assert again.returncode == 2
    assert "not empty" in again.stderr


# -- bad input: one clear line, exit non-zero, nothing written -------------------------------


def _snapshot(path: Path) -> tuple[int, float]:
    st = path.stat()
    return st.st_size, st.st_mtime


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sql", "SELEC * FROM runs"], "runwatch sql: Parser Error: syntax error at or near"),
        (["sql", "DELETE FROM events"], "runwatch sql: refused: DELETE statements"),
        (["sql", "DROP TABLE events"], "runwatch sql: refused: DROP statements"),
        (["sql", "SELECT 1; DELETE FROM events"], "runwatch sql: refused: DELETE"),
        (["sql", "COPY events TO 'out.csv'"], "runwatch sql: refused: COPY"),
        (["sql", "SELECT nope FROM runs"], "runwatch sql: Binder Error: Referenced column"),
        (["backtest", "--since", "tuesday"], "runwatch backtest: 'tuesday' is not a time"),
        (["export", "--parquet", "x", "--since", "soon"], "runwatch export: 'soon' is not a time"),
    ],
)  # fmt: skip
def test_bad_input_one_line(history: Path, tmp_path: Path, args: list[str], message: str) -> None:
    before = _snapshot(history)
    proc = runwatch(*args, "--db", str(history), cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(message)
    assert "Traceback" not in proc.stderr
    assert _snapshot(history) == before
    assert list(tmp_path.iterdir()) == []  # nothing written beside it either


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["runs"], ["show", "x"], ["backtest"]])
def test_a_path_that_is_not_a_duckdb_file(tmp_path: Path, command: list[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    proc = runwatch(*command, "--db", str(notes))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"runwatch {command[0]}: {notes}: not a DuckDB database file"
    ]
    assert notes.read_text() == "not a database\n"
    missing = runwatch(*command, "--db", str(tmp_path / "none.duckdb"))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("none.duckdb: no such file")
    assert not (tmp_path / "none.duckdb").exists()

"""`runwatch replay` as a user runs it: the console script, files, stdin, bad lines, flags."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from runwatch.dev import scenarios
from runwatch.stream.replay import DEFAULT_WINDOW

RUNWATCH = str(Path(sys.executable).parent / "runwatch")


def runwatch(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [RUNWATCH, *args], input=stdin, capture_output=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def orchestrator_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "orchestrator.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in scenarios.orchestrator_dies()))
    return path


def alerts_of(proc: subprocess.CompletedProcess[bytes]) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_replay_file_writes_contract_alerts(orchestrator_file):
    proc = runwatch("replay", str(orchestrator_file))
    assert proc.returncode == 0, proc.stderr
    alerts = alerts_of(proc)
    assert [a["rule"] for a in alerts] == ["heartbeat_lost", "stuck_progress"]
    first = alerts[0]
    for field in ("v", "id", "ts", "rule", "run", "state", "severity", "key", "since", "summary"):
        assert field in first
    assert first["v"] == 1
    assert first["state"] == "firing"
    assert isinstance(first["details"], dict)
    assert [a["ts"] for a in alerts] == sorted(a["ts"] for a in alerts)


def test_replay_stdin_matches_file(orchestrator_file):
    from_file = runwatch("replay", str(orchestrator_file))
    from_stdin = runwatch("replay", "-", stdin=orchestrator_file.read_bytes())
    assert from_stdin.returncode == 0
    assert from_stdin.stdout == from_file.stdout


def test_a_live_pipe_gets_its_transition_while_it_stays_open():
    """`runwatch replay -` fed by a pipe that stays open writes a transition as soon as its
    event is out of the reorder window: it waits for no full batch of lines, and nothing it
    writes waits in a buffer."""
    t0 = 1_800_000_000.0
    src = {"component": "trainer", "host": "n0", "pid": 7}
    beat = {"v": 1, "run": "live", "kind": "heartbeat", "src": src}
    nan = {"v": 1, "id": "m1", "ts": t0 + 1, "run": "live", "kind": "step.metrics", "src": src,
           "step": 1, "metrics": {"actor/loss": float("nan")}}  # fmt: skip
    later = DEFAULT_WINDOW + 5  # past the reorder window: the NaN step is applied
    lines = [{**beat, "id": "b1", "ts": t0}, nan, {**beat, "id": "b2", "ts": t0 + later}]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it
    proc = subprocess.Popen([RUNWATCH, "replay", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    out: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: out.put(proc.stdout.readline()), daemon=True)
    reader.start()
    try:
        proc.stdin.write(b"".join(json.dumps(e).encode() + b"\n" for e in lines))
        proc.stdin.flush()  # and the pipe stays open
        line = out.get(timeout=60)  # a generous deadline: it comes in well under a second
        alert = json.loads(line)
        assert (alert["rule"], alert["state"], alert["run"]) == ("non_finite_metric",
                                                                 "firing", "live")  # fmt: skip
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        reader.join(timeout=60)
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def test_until_fires_conditions_still_holding(tmp_path):
    t0 = 1_800_000_000.0  # a plausible ts (contract §1: seconds since 1970, >= 1e9)
    ev = {"v": 1, "ts": t0, "run": "r1", "kind": "heartbeat", "src": {"component": "trainer"}}
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({**ev, "id": "a"}) + "\n")
    assert alerts_of(runwatch("replay", str(path))) == []
    alerts = alerts_of(runwatch("replay", str(path), "--until", str(t0 + 1000)))
    assert [(a["rule"], a["ts"], a["state"]) for a in alerts] == [
        ("heartbeat_lost", t0 + 60, "firing")
    ]
    iso = alerts_of(runwatch("replay", str(path), "--until", "2027-01-15T08:16:40Z"))
    assert iso == alerts


def test_broken_lines_are_reported_with_line_numbers_and_skipped(orchestrator_file, tmp_path):
    lines = orchestrator_file.read_bytes().splitlines(keepends=True)
    broken = list(lines)
    broken.insert(3, b'{"v": 1, "id": "x", "ts": 5\n')  # truncated
    broken.insert(10, b"not json at all\n")
    broken.insert(
        20,
        json.dumps(
            {
                "v": 1,
                "id": "y",
                "ts": 1.0,
                "run": "bad run id",
                "kind": "heartbeat",
                "src": {"component": "trainer"},
            }
        ).encode()
        + b"\n",
    )
    broken.insert(
        30,
        b'{"v": 1, "id": "z", "ts": NaN, "run": "r", "kind": "heartbeat", '
        b'"src": {"component": "trainer"}}\n',
    )
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"".join(broken))
    proc = runwatch("replay", str(path))
    assert proc.returncode == 0
    assert proc.stdout == runwatch("replay", str(orchestrator_file)).stdout
    err = proc.stderr.decode()
    assert f"{path}:4: invalid event: not JSON" in err
    assert f"{path}:11: invalid event: not JSON" in err
    assert f"{path}:21: invalid event: run: String should match pattern" in err
    assert f"{path}:31: invalid event: ts: Input should be a finite number" in err
    assert "4 invalid lines skipped" in err


def test_config_changes_thresholds_and_bad_config_is_a_clear_error(tmp_path, orchestrator_file):
    cfg = tmp_path / "rules.toml"
    cfg.write_text("[rules.heartbeat_lost]\ntimeout = 600\n")
    alerts = alerts_of(runwatch("replay", str(orchestrator_file), "--config", str(cfg)))
    (lost,) = [a for a in alerts if a["rule"] == "heartbeat_lost"]
    assert lost["ts"] - lost["since"] == 600
    cfg.write_text("[rules.heartbeat_lost]\ntimeout = 'soon'\n")
    proc = runwatch("replay", str(orchestrator_file), "--config", str(cfg))
    assert proc.returncode == 2
    assert b"rules.heartbeat_lost.timeout" in proc.stderr
    assert b"Traceback" not in proc.stderr
    assert proc.stdout == b""


def test_missing_file_and_bad_until_are_clear_errors(tmp_path):
    proc = runwatch("replay", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2
    assert b"no such file" in proc.stderr
    proc = runwatch("replay", "-", "--until", "tomorrow", stdin=b"")
    assert proc.returncode == 2
    assert b"is not a time" in proc.stderr


def test_help_explains_the_command():
    proc = runwatch("replay", "--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    for flag in ("--until", "--config", "--reorder-window", "standard input"):
        assert flag in text


def test_demo_shows_alerts_firing(tmp_path):
    proc = runwatch("demo", "--replay", "--dir", str(tmp_path / "demo"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "FIRING" in out
    assert "511 of 512 trajectories done" in out
    assert "(no alerts)" in out  # the healthy run stays quiet
    assert (tmp_path / "demo" / "sandbox_hang.jsonl").exists()


def test_an_emitter_that_had_to_drop_events_is_said_by_the_rules(tmp_path: Path) -> None:
    """An emitter over its disk limit drops events and says how many in its heartbeats; the
    rules turn that into `emitter_dropping`: the monitor is losing the run's data."""
    from runwatch.emitters import Emitter

    em = Emitter(run="lossy", component="trainer", path=tmp_path, heartbeat_interval=3600,
                 max_spool_bytes=20_000)  # fmt: skip
    for i in range(1000):
        em.emit("step.done", step=i, duration_s=1.0)
    em.flush(5)
    dropped = em.dropped
    assert dropped > 0
    em.close()
    proc = runwatch("replay", *map(str, sorted(tmp_path.glob("*.jsonl"))))
    assert proc.returncode == 0, proc.stderr
    (alert,) = [a for a in alerts_of(proc) if a["rule"] == "emitter_dropping"]
    assert alert["state"] == "firing"
    assert alert["details"]["dropped"] == dropped
    assert f"dropped {dropped} events" in alert["summary"]

"""`runwatch diagnose` on the sandbox-hang incident's logs -- the driver's stderr (tqdm bars,
a few logging lines) and vLLM's stdout (V1 stats lines) -- prints the per-step table a person
built by hand (GPU idle 20, 21, 26 minutes, then 511/512 for 99 minutes) and the alerts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.consoles import driver_err, ray_driver, vllm_out
from runwatch.dev.scenarios import sandbox_hang
from runwatch.diagnose import elapsed, stamp, time_of_day

HANG = Path(__file__).resolve().parents[1] / "fixtures" / "consoles" / "sandbox_hang"


def test_the_fixtures_are_what_the_renderer_writes() -> None:
    events = sandbox_hang()
    renders = (("driver.err", driver_err), ("vllm.out", vllm_out), ("ray_driver.log", ray_driver))
    for name, render in renders:
        text = (HANG / name).read_bytes().decode()
        body = "".join(text.splitlines(keepends=True)[2:])  # after the two header lines
        assert body == render(events), name


@pytest.mark.parametrize(
    ("files", "server"),
    [(("driver.err", "vllm.out"), "vllm"), (("ray_driver.log",), "vllm@10.0.0.2/3262000")],
    ids=["driver-and-vllm-files", "ray-driver-console"],
)
def test_diagnose_prints_the_idle_gap_table_and_the_alerts(
    files: tuple[str, ...], server: str
) -> None:
    """The same table and alerts from the two files the incident left, and from the one
    console of the same run under Ray (TaskRunner and vLLMHttpServer lines interleaved, the
    bar's refreshes forwarded as `\\r`-joined lines); there the server is the Ray worker."""
    proc = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "diagnose", *(str(HANG / f) for f in files),
         "--run", "grpo-sandbox"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    plural = "s" if len(files) > 1 else ""
    assert lines[0] == f"2,426 events from {len(files)} file{plural}, 14:00:00 to 18:20:00 UTC"
    rows = [line.split() for line in lines if line.strip()[:1].isdigit() and "  " in line]
    by_step = {r[0]: r for r in rows if len(r) == 7}
    assert by_step["1"] == ["1", "14:00:00", "14:36:00", "20m", "20m", "14:46:00", "46m"]
    assert by_step["2"][3:5] == ["21m", "21m"]
    assert by_step["3"][3:5] == ["26m", "26m"]
    assert by_step["4"] == ["4", "16:24:00", "511/512", "99m+", "99m", "running", "116m"]
    out = proc.stdout
    assert "FIRING   warning  idle_gap_growing  run=grpo-sandbox: GPU-idle gap per step is " \
        "growing: 20m -> 21m -> 26m over steps 1-3" in out  # fmt: skip
    stall = (
        "2026-03-14 16:43:00Z  FIRING   critical inference_idle_with_pending  "
        "run=grpo-sandbox: 511 of 512 trajectories done (Generating trajectories)"
    )
    assert stall in out
    assert f"while inference is idle ({server}) for 2m" in out


def test_times_from_the_lines() -> None:
    assert stamp("2026-03-14 14:01:00,250 INFO x", 2000, 0.0) == 1773496860.25
    assert stamp("INFO 03-14 14:01:00 [loggers.py:123] Engine 000", 2026, 0.0) == 1773496860.0
    assert stamp("INFO 03-14 14:01:00 [x]", 2026, 3600.0) == 1773496860.0 - 3600
    assert stamp("(AReaL) 20260314-14:01:00.250 StatsLogger INFO: x", 2000, 0.0) == 1773496860.25
    assert stamp("step:3 - reward:0.5", 2026, 0.0) is None
    assert stamp("09:03:01 SUCCESS Step 1 | ...", 2026, 0.0) is None  # no date: see below
    assert time_of_day("09:03:01 SUCCESS Step 1 | ...") == 9 * 3600 + 181
    assert time_of_day("[trainer0]:09:03:01 SUCCESS Step 1 | ...") == 9 * 3600 + 181
    assert time_of_day("99:03:01 x") is None
    assert time_of_day("step 09:03:01 x") is None
    assert stamp("INFO 13-40 99:99:99 broken", 2026, 0.0) is None
    assert elapsed("Gen:  50%|##   | 256/512 [1:02:10<02:10,  1.97it/s]") == 3730
    assert elapsed("Gen: 3it [00:07, 2.5it/s]") == 7
    assert elapsed("no bar here") is None


def test_a_file_with_nothing_readable_says_what_runwatch_reads(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("hello\nworld\n")
    proc = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", str(empty)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1
    first, *formats = proc.stderr.strip().splitlines()
    assert first == "runwatch diagnose: nothing runwatch reads in these files."
    said = " ".join(formats)
    for looked_for in ("tqdm", "verl", "vLLM", "NCCL watchdog", "tracebacks", "[rankN]:"):
        assert looked_for in said
    assert "Traceback" not in proc.stderr


def test_a_console_it_cannot_place_says_which_lines_looked_like_failures_or_metrics(
    tmp_path: Path,
) -> None:
    """Issue 41 item 7: what a user can report -- the lines that looked like a failure or a
    metric, where, and why they gave no event."""
    log = tmp_path / "pasted.log"
    log.write_text(
        "ERROR 04-11 08:34:27 [api_server.py:855] RuntimeError: {'error': 'thread crashed'}\n"
        'INFO:     172.30.9.20:37916 - "POST /v1/chat/completions HTTP/1.1" 500\n'
        "loss nan grad_norm 0.5\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/mnt/train.py", line 999, in <module>\n'
        "[rank0]:     main()\n"
        "[rank0]: retrying the step\n"  # its process went on: a cut traceback, no failure
    )
    proc = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", str(log)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1
    said = proc.stderr
    assert "lines that looked like metrics, failures or waits, and why they gave no event:" in said
    assert "pasted.log:1: `RuntimeError: {'error': 'thread crashed'}` names an exception" in said
    assert "pasted.log:3: `loss` is nan but the line names no step" in said
    assert "a traceback ends before its exception line" in said
    assert "    loss nan grad_norm 0.5" in said  # the line itself, to report


def test_a_reader_that_stops_reading_ends_it_quietly(tmp_path: Path) -> None:
    """`runwatch diagnose ... | head`: a closed pipe is not a traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runwatch.cli", "diagnose", str(HANG / "ray_driver.log")],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr


def test_prime_rl_json_logs_are_placed_by_their_own_timestamps() -> None:
    """PRIME-RL's JSON log (`[log] json_logging = true`) carries an ISO timestamp per line:
    its step rewards, zero from step 3, raise zero_reward at step 7's line."""
    log = HANG.parent / "prime_rl" / "orchestrator.json.log"
    proc = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", str(log)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2026-11-24 09:07:14Z  FIRING   critical zero_reward" in proc.stdout
    assert "reward has been 0 for 5 consecutive steps (3–7)" in proc.stdout


def test_an_areal_console_is_placed_by_its_own_date_format() -> None:
    """AReaL logs `(AReaL) 20261124-10:00:00.000 StatsLogger INFO: ...`: its stats tables'
    steps are placed at those times."""
    log = HANG.parent / "areal_trainer.log"
    proc = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", str(log)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "9 events from 1 file, 10:00:00 to 10:02:00 UTC"


def test_prime_rl_consoles_that_carry_only_the_time_of_day(tmp_path: Path) -> None:
    """PRIME-RL's coloured consoles say `09:03:01` and no date: `--date` gives the day, and
    a clock that goes back by more than 12 hours is the next day. Its trainer's and its
    orchestrator's consoles together: the steps the trainer ended (step 4 took an hour) and
    zero_reward from the orchestrator's rewards, at the times the JSON log gives them."""
    logs = [str(HANG.parent / "prime_rl" / f) for f in ("orchestrator.log", "trainer.log")]
    proc = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "diagnose", *logs, "--date", "2026-11-24"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2026-11-24 09:07:14Z  FIRING   critical zero_reward" in proc.stdout
    rows = {r.split()[0]: r.split() for r in proc.stdout.splitlines() if r[:5].strip().isdigit()}
    assert rows["4"] == ["4", "09:03:31", "-", "-", "-", "10:05:36", "62m"]
    midnight = tmp_path / "trainer.log"
    midnight.write_text(
        "23:59:50 SUCCESS Step 1 |   10.0s | Loss 0.1 | Entropy 0.5\n"
        "00:00:20 SUCCESS Step 2 |   30.0s | Loss 0.1 | Entropy 0.5\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "diagnose", str(midnight), "--date", "2026-11-24"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "6 events from 1 file, 23:59:50 to 00:00:20 UTC"
    rows = {r.split()[0]: r.split() for r in proc.stdout.splitlines() if r[:5].strip().isdigit()}
    assert rows["2"][1] == "23:59:50"
    assert rows["2"][-2:] == ["00:00:20", "30s"]

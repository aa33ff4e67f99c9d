"""The consoles users posted (tests/fixtures/consoles/field/, and a representative part of
the corpus' development part, corpus/dev/: tests/played.py), the way a user without any code
change meets runwatch: `runwatch watch -- cat FILE` into `runwatch serve`, every console its
own run, all started at once into one serve -- a user with many jobs. Each raises the alerts
its text supports (tests/unit/test_field_consoles.py and test_corpus_reading.py read the same
files with `runwatch diagnose`), every control none: a run is judged as it would be alone.

A console whose alerts need time to pass with the output still open is played by a command
that prints it and then hangs, as the job did; the others by a command that prints it and
exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from played import CONFIG, FIELD, MANIFEST, PLAYED, hangs, raised

from runwatch.dev.launch import ServeProcess
from scripts.corpus_report import run_one
from scripts.corpus_watch import THRESHOLD_S, fired, status, watch_command, watch_env

pytestmark = pytest.mark.slow

#: how long a hung control is watched after its first event for an alert that must not come
QUIET_S = THRESHOLD_S + 4.0
#: how long the watches are given to exit after their SIGTERM, all of them together: each
#: drains its command's output, tells serve its run finished and may be taking the command's
#: stacks (py-spy's own limit, 20 s), two dozen at once on a loaded 2-core machine
STOP_S = 180.0
#: consoles on which watch and diagnose still differ: (diagnose's rules, watch's), and why
DIFFER: dict[str, tuple[list[str], list[str], str]] = {}


def test_every_console_watched_into_one_serve_raises_what_its_text_supports(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rules.toml"
    config.write_text(CONFIG)
    env = watch_env()  # none of ours; a hung command's last word read in seconds
    watches: dict[str, subprocess.Popen[bytes]] = {}
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        try:
            for name in sorted(MANIFEST):
                path, entry, header = PLAYED[name]
                play = watch_command(serve.url, name, path, header, hangs(name), status(entry))
                watches[name] = subprocess.Popen(  # (its own group: `_stop` ends it whole)
                    play,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            for name, watch in watches.items():
                if not hangs(name):
                    assert watch.wait(120) == status(MANIFEST[name]), name

            def transitions() -> dict[str, list[dict[str, Any]]]:
                out: dict[str, list[dict[str, Any]]] = {name: [] for name in MANIFEST}
                for alert in serve.get("/v1/alerts?limit=2000")["alerts"]:  # all of them
                    out.setdefault(alert["run"], []).append(alert)
                return out

            waiting: dict[str, str] = {}
            first_seen: dict[str, float] = {}  # when the run's events began to arrive

            def settled() -> dict[str, list[dict[str, Any]]] | None:
                runs = {r["run"]: r for r in serve.get("/v1/runs")["runs"]}
                seen = transitions()
                waiting.clear()
                for name, entry in MANIFEST.items():
                    run = runs.get(name)
                    fired = {a["rule"] for a in seen[name] if a["state"] == "firing"}
                    if run is not None:
                        first_seen.setdefault(name, time.monotonic())
                    if run is None:
                        waiting[name] = "no events yet"
                    elif not set(entry["rules"]) <= fired:
                        waiting[name] = f"fired {sorted(fired)}"
                    elif hangs(name) and time.monotonic() - first_seen[name] < QUIET_S:
                        waiting[name] = "quiet for a while yet"
                    elif not hangs(name) and run["status"] == "running":
                        waiting[name] = "not finished"
                return None if waiting else seen

            try:
                seen = wait_for(settled, "every console's alerts", timeout=180, every=0.25)
            except AssertionError as err:
                raise AssertionError(f"{err}: {waiting}") from None
        finally:
            late = _stop(watches)
    assert not late, f"watches that did not exit within {STOP_S:g} s of SIGTERM: {late}"
    # a hung job stopped: watch exits as the command did, killed by SIGTERM (no crash of its
    # own on any of these consoles)
    stopped = {name: w.returncode for name, w in watches.items() if hangs(name)}
    assert set(stopped.values()) == {128 + signal.SIGTERM}, stopped
    for name in MANIFEST:
        raised(name, [a for a in seen[name] if a["state"] == "firing"])
    differ = {}
    for name in MANIFEST:
        path, entry, _ = PLAYED[name]
        pair = (run_one(path, entry["rules"]).fired, fired(seen[name]))
        if pair != DIFFER.get(name, (pair[0], pair[0]))[:2]:
            differ[name] = pair
    assert not differ, f"diagnose and watch differ (diagnose's rules, watch's): {differ}"


def test_diagnose_reads_every_console_without_a_traceback() -> None:
    files = sorted(str(p) for p in FIELD.glob("*.log"))
    done = subprocess.run([sys.executable, "-m", "runwatch.cli", "diagnose", *files],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "collective_timeout" in done.stdout


def _stop(watches: dict[str, subprocess.Popen[bytes]], within: float = STOP_S) -> list[str]:
    """SIGTERM to each watch still running (passed on to its hung command), then wait for all
    `within` seconds; a watch still running then is killed with its command, by its process
    group's id. Returns the names of those that had to be killed."""
    for watch in watches.values():
        if watch.poll() is None:
            watch.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + within
    late = []
    for name, watch in watches.items():
        try:
            watch.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append(name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
    return late


def test_a_watch_that_outlives_its_sigterm_is_killed_with_its_command(tmp_path: Path) -> None:
    """The teardown's own guard: a process that ignores SIGTERM, and the child it started,
    are both gone after `_stop`, which names it."""
    pid_file = tmp_path / "child.pid"
    stubborn = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen(['sleep', '600']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(600)"
    )
    quick = [sys.executable, "-c", "import time; time.sleep(600)"]
    watches = {
        "stubborn": subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True),
        "quick": subprocess.Popen(quick, start_new_session=True),
    }
    wait_for(lambda: (pid_file.exists() and pid_file.read_text()) or None, "the child's pid")
    child = int(pid_file.read_text())
    assert _stop(watches, within=2.0) == ["stubborn"]
    assert watches["quick"].returncode == -signal.SIGTERM

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # (reaped by init)

    wait_for(gone, "the stubborn process's child to end")

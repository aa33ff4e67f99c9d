"""Issue 41's check of a saved console, end to end: `runwatch watch -- cat FILE` into a real
`runwatch serve` raises what `runwatch diagnose FILE` raises on a console that ends in its
hang -- a rank left waiting in torch's store-based barrier: `cat` exits 0, the run is left
open and the service's ranks_stalled decides it on its clock -- while a console whose
barrier filled, and one whose barrier timed out, finish their runs as `cat` ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from hung_consoles import BARRIER_FILLS, BARRIER_TIMEOUT, BARRIER_WAIT

from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

#: ranks_stalled's limit in the played service: the console's one barrier line says its rank
#: waited 10 s, so the rule decides 10 s after `cat` read it -- long after `cat` has exited
#: and watch has decided what to send (a run finished then would never fire)
TIMEOUT_S = 20
#: heartbeat_lost's: shorter, so a watcher that left without its final heartbeat would be
#: lost before ranks_stalled decides
HEARTBEAT_S = 5
CONSOLES = {
    "hung": BARRIER_WAIT,
    "filled": BARRIER_FILLS,
    "timed-out": BARRIER_WAIT + BARRIER_TIMEOUT,
}


def _watch_cat(url: str, run: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    return subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "watch", "--run", run, "--url", url, "--",
         "cat", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=120,
    )  # fmt: skip


def _firing(serve: ServeProcess, run: str) -> set[str]:
    return {a["rule"] for a in serve.get(f"/v1/runs/{run}")["firing"]}


def _fired(serve: ServeProcess, run: str) -> set[str]:
    """The rules that fired on the run, whether or not they have resolved since."""
    transitions = serve.get(f"/v1/runs/{run}")["transitions"]
    return {a["rule"] for a in transitions if a["state"] == "firing"}


def test_a_saved_console_that_ends_in_its_hang_fires_in_serve_as_diagnose_says(
    tmp_path: Path,
) -> None:
    config = tmp_path / "rules.toml"
    config.write_text(f"[rules.ranks_stalled]\ntimeout = {TIMEOUT_S}\n\n"
                      f"[rules.heartbeat_lost]\ntimeout = {HEARTBEAT_S}\n")  # fmt: skip
    files = {}
    for run, text in CONSOLES.items():
        files[run] = tmp_path / f"{run}.log"
        files[run].write_text(text)
    diagnosed = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "diagnose", "--config", str(config),
         str(files["hung"])],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "FIRING   critical ranks_stalled" in diagnosed.stdout, diagnosed.stdout
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        watched = {run: _watch_cat(serve.url, run, path) for run, path in files.items()}
        assert {run: w.returncode for run, w in watched.items()} == dict.fromkeys(CONSOLES, 0)
        said = watched["hung"].stderr
        assert "run hung left open, not finished" in said, said
        assert "rank 0 waits in store_based_barrier since" in said, said
        assert "ranks_stalled fires at" in said, said

        def status(run: str) -> str:
            return str(serve.get(f"/v1/runs/{run}")["status"])

        for run in ("filled", "timed-out"):  # finished as cat ended
            wait_for(lambda run=run: status(run) == "ok", f"run {run} finished", timeout=120)
        assert "component_failed" in _fired(serve, "timed-out")
        wait_for(lambda: "ranks_stalled" in _firing(serve, "hung"),
                 "ranks_stalled decided on the service's clock", timeout=120)  # fmt: skip
        hung: dict[str, Any] = serve.get("/v1/runs/hung")
        assert hung["status"] == "running"  # left open: nothing said it finished
        (alert,) = [a for a in hung["firing"] if a["rule"] == "ranks_stalled"]
        assert alert["details"]["phases"] == {"store_based_barrier": [0]}
        assert alert["details"]["missing"] == [1]
        # the watcher's clean exit (its final heartbeat) is no lost process
        assert "heartbeat_lost" not in _fired(serve, "hung")

"""Stacks at detection, through a real `runwatch serve`.

A real 4-process torch.distributed (gloo, CPU) job: ranks 0, 1 and 3 wait in `recv` for
rank 2, which waits in a `barrier` of a subgroup its peer never joins -- the rank
divergence of docs/architecture.md. (gloo's
`destroy_process_group` returns at once and breaks its peers' `recv`, measured with torch
2.x here, so the rank that went elsewhere waits in another collective instead.) Each rank
runs an `Emitter` to serve with `RankStatus`; `ranks_stalled` opens an incident, the
service asks for stacks, the ranks' responder threads answer, and `process_stacks` names
the divergence -- within seconds, with no py-spy and nothing attached to the ranks.

A Python command under `runwatch watch` whose tqdm bar stops: `stuck_progress` opens the
incident and `watch` answers with the command's stacks through py-spy (a dev dependency);
with py-spy missing, one line says so and the evidence says why there are no stacks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from runwatch.dev.broker import free_port
from runwatch.dev.launch import ServeProcess

if os.environ.get("CI"):
    import torch  # noqa: F401  (in CI a missing torch is a failure, never a skip)
else:
    pytest.importorskip("torch")

pytestmark = pytest.mark.integration

RANK = textwrap.dedent(
    """
    import datetime, sys, time
    import torch
    import torch.distributed as dist
    from runwatch.emitters import Emitter
    from runwatch.emitters.torch import RankStatus

    rank, port, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=4, timeout=datetime.timedelta(seconds=300))
    em = Emitter(run="r-stacks", component="trainer", url=url, rank=rank,
                 heartbeat_interval=0.5, stacks_interval=0.5)
    status = RankStatus(em, interval=0.2)
    status.watch_collectives()
    pair = dist.new_group([2, 3])
    t = torch.ones(4)
    dist.all_reduce(t)
    print("ready", flush=True)

    def train_step():
        if rank == 2:
            dist.barrier(group=pair)  # rank 3 never comes: it waits for rank 2 in recv
        else:
            dist.recv(t, src=2)

    train_step()
    time.sleep(600)
    """
)

CONFIG = """\
[rules.ranks_stalled]
timeout = 3
[rules.process_stacks]
settle = 3
"""


def test_a_hung_gloo_job_s_incident_names_where_each_rank_waits(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    config = tmp_path / "rules.toml"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    procs: list[subprocess.Popen[bytes]] = []
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        port = free_port()
        try:
            procs = [
                subprocess.Popen([sys.executable, str(script), str(r), str(port), serve.url],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                for r in range(4)
            ]  # fmt: skip
            for proc in procs:
                assert proc.stdout is not None
                said = proc.stdout.readline()
                assert said == b"ready\n", proc.stderr.read() if proc.stderr else b""

            def evidence() -> dict[str, Any] | None:
                alerts = serve.get("/v1/alerts")["alerts"]
                return next((a for a in alerts if a["rule"] == "process_stacks"), None)

            found = wait_for(evidence, "the stacks reached the incident", timeout=120)
            alerts = serve.get("/v1/alerts")["alerts"]
            assert [p.poll() for p in procs] == [None] * 4  # every rank still there, hung
        finally:
            for proc in procs:
                proc.kill()
            for proc in procs:
                proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
    stalled = next(a for a in alerts if a["rule"] == "ranks_stalled" and a["state"] == "firing")
    assert found["incident"]["id"] == stalled["incident"]["id"]
    assert found["incident"]["role"] == "evidence"
    assert found["incident"]["root_rule"] == "ranks_stalled"
    summary = found["summary"]
    assert "ranks 0,1,3: `recv` (distributed_c10d.py:" in summary, summary
    assert "rank 2: `barrier` (distributed_c10d.py:" in summary, summary
    assert "in `train_step` (rank.py:" in summary, summary  # the ranks' own code, named
    assert "not answering" not in summary
    assert found["ts"] - stalled["ts"] < 30  # seconds after the hang was seen, not minutes
    # the history keeps them: `runwatch show` prints the incident with its stacks
    show = [sys.executable, "-m", "runwatch.cli", "show", "r-stacks", "--db",
            str(tmp_path / "h.duckdb")]  # fmt: skip
    shown = subprocess.run(show, capture_output=True, text=True, timeout=120, check=True).stdout
    incidents = shown.split("incidents (root cause <- symptoms)\n")[1].split("\n\n")[0]
    lines = incidents.splitlines()
    assert lines[0].endswith("ranks_stalled <- no other alert"), incidents  # evidence apart
    assert any(": `barrier` (distributed_c10d.py:" in x for x in lines), incidents
    assert any(x.strip().startswith("train_step (") and "rank.py:" in x for x in lines), incidents


STUCK = textwrap.dedent(
    """
    import time
    from tqdm import tqdm

    def wait_for_the_sandbox():
        while True:
            time.sleep(0.05)

    for i in tqdm(range(40), mininterval=0):
        if i == 12:
            wait_for_the_sandbox()
        time.sleep(0.1)
    """
)

WATCH_CONFIG = """\
[rules.stuck_progress]
min_stall = 2
factor = 2
[rules.process_stacks]
settle = 12
"""


@pytest.mark.parametrize("py_spy", ["installed", "missing"])
def test_a_watched_command_that_hangs_gets_its_stacks_through_py_spy(
    tmp_path: Path, py_spy: str
) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    config = tmp_path / "rules.toml"
    config.write_text(WATCH_CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    if py_spy == "missing":
        env["RUNWATCH_PY_SPY"] = str(tmp_path / "no-py-spy-here")
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        watch = subprocess.Popen(
            [sys.executable, "-m", "runwatch.cli", "watch", "--url", serve.url, "--run",
             "r-watch", "--", sys.executable, str(script)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        try:

            def evidence() -> dict[str, Any] | None:
                alerts = serve.get("/v1/alerts")["alerts"]
                return next((a for a in alerts if a["rule"] == "process_stacks"), None)

            found = wait_for(evidence, "the stacks reached the incident", timeout=120)
        finally:
            watch.terminate()
            _, err = watch.communicate(timeout=60)
    assert found["incident"]["root_rule"] == "stuck_progress"
    said = err.decode()
    if py_spy == "installed":
        assert "`wait_for_the_sandbox` (stuck.py:" in found["summary"], found["summary"]
        assert "no stacks" not in said
    else:
        assert "no stacks: py-spy is not installed (pip install py-spy)" in found["summary"]
        assert said.count("runwatch watch: no stacks of the command: py-spy is not") == 1

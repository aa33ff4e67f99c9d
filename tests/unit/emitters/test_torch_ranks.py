"""`runwatch.emitters.torch` on a real 3-process torch.distributed (gloo, CPU) job.

Divergent: rank 0 raises, calls destroy_process_group and exits while ranks 1 and 2 block
in `recv` (gloo breaks a collective whose peer shut down, where NCCL would hang, so the two
wait on each other). Uniform: every rank blocks in all_reduce (rank 0's on a subgroup rank 1 never
joins). The emitted `rank.status` events, replayed, fire `ranks_stalled` with that pattern.
The test kills the job; nothing is left running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from runwatch.dev.broker import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _torch() -> None:
    """torch, or outside CI a skip; asked for as a test runs, not as the module is collected,
    where importing it cost each `make unit` worker seconds for tests it leaves out."""
    if os.environ.get("CI"):
        import torch  # noqa: F401  (in CI a missing torch is a failure, never a skip)
    else:
        pytest.importorskip("torch")


RANK = textwrap.dedent(
    """
    import datetime, sys, time
    import torch
    import torch.distributed as dist
    from runwatch.emitters import Emitter
    from runwatch.emitters.torch import RankStatus

    rank, port, spool, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=3, timeout=datetime.timedelta(seconds=120))
    em = Emitter(run="r-ranks", component="trainer", path=spool, rank=rank,
                 heartbeat_interval=0.2)
    status = RankStatus(em, interval=0.2)
    status.watch_collectives()
    status.step = 7
    pair = dist.new_group([0, 1])
    t = torch.ones(4)
    with status.phase("forward"):
        dist.all_reduce(t)  # a collective that completes: phases come and go
    print("ready", flush=True)
    if scenario == "divergent":
        if rank == 0:
            try:
                with status.phase("backward"):
                    raise RuntimeError("CUDA error: an illegal memory access was encountered")
            except RuntimeError:
                dist.destroy_process_group()
                raise  # rank 0 is gone (its status says exited) ...
        else:
            dist.recv(t, src=3 - rank)  # ... while 1 and 2 wait on each other forever
    else:
        dist.all_reduce(t, group=pair if rank == 0 else None)
    time.sleep(600)
    """
)


def run_job(tmp_path: Path, scenario: str) -> list[dict[str, Any]]:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    spool = tmp_path / scenario
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), str(port), str(spool), scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for rank in range(3)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == b"ready\n", proc.stderr.read() if proc.stderr else b""
        if scenario == "divergent":
            assert procs[0].wait(120) != 0  # rank 0 raised and is gone
        # every rank still in the job reports the phase it is stuck in a few times
        stuck = {
            "divergent": {1: "recv", 2: "recv"},
            "uniform": dict.fromkeys(range(3), "all_reduce"),
        }
        deadline = time.monotonic() + 120
        while not _reported(read_spool(spool), stuck[scenario], times=2):
            assert time.monotonic() < deadline, "the ranks never reported where they wait"
            time.sleep(0.1)
        alive = [proc.poll() is None for proc in procs]
        assert alive == ([False, True, True] if scenario == "divergent" else [True] * 3)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    return read_spool(spool)


def read_spool(spool: Path) -> list[dict[str, Any]]:
    """The events the ranks wrote so far (whole lines only: they may be writing)."""
    events = []
    for path in sorted(spool.glob("*.jsonl")):
        text = path.read_text()
        events += [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]
    return sorted(events, key=lambda e: e["ts"])


def _reported(events: list[dict[str, Any]], phases: dict[int, str], times: int) -> bool:
    """Each rank has reported its phase at least `times` times."""
    for rank, phase in phases.items():
        seen = [e for e in events if e["kind"] == "rank.status" and e["rank"] == rank
                and e["phase"] == phase]  # fmt: skip
        if len(seen) < times:
            return False
    return True


def stalled(events: list[dict[str, Any]]) -> Any:
    from helpers import make_engine

    from runwatch.stream.decode import decode

    engine = make_engine({"ranks_stalled": {"timeout": 1.0}})
    alerts = [a for e in events for a in engine.apply(decode(json.dumps(e).encode()))]
    alerts += engine.advance(events[-1]["ts"] + 5.0)
    firing = [a for a in alerts if a.rule == "ranks_stalled" and a.state == "firing"]
    assert firing, [a.rule for a in alerts]
    return firing[-1]


def test_divergent_rank_0_exited_after_destroy_process_group_others_in_recv(tmp_path: Path) -> None:
    events = run_job(tmp_path, "divergent")
    status = [e for e in events if e["kind"] == "rank.status"]
    assert {e["rank"] for e in status} == {0, 1, 2}
    # a few reports per rank, not one per collective call
    assert max(sum(1 for e in status if e["rank"] == r) for r in range(3)) < 40
    alert = stalled(events)
    assert alert.details["pattern"] == "divergent"
    assert alert.details["phases"] == {"exited": [0], "recv": [1, 2]}
    seen = {e["phase"] for e in status if e["rank"] == 0}
    assert "exited" in seen


def test_uniform_all_ranks_in_one_all_reduce(tmp_path: Path) -> None:
    alert = stalled(run_job(tmp_path, "uniform"))
    assert alert.details["pattern"] == "uniform"
    assert alert.details["phases"] == {"all_reduce": [0, 1, 2]}


def test_phases_nest_and_report_on_their_own_clock(tmp_path: Path) -> None:
    from runwatch.emitters import Emitter
    from runwatch.emitters.torch import RankStatus, cuda_memory, trainer_logger

    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False)
    status = RankStatus(em, rank=2, world_size=4, interval=3600)

    @status.phase("backward")
    def backward() -> str:
        return status.current[0]

    with status.phase("forward"):
        assert status.current[0] == "forward"
        for _ in range(1000):
            assert backward() == "backward"
        assert status.current[0] == "forward"
    assert status.current[0] == "running"
    trainer_logger(em).log({"timing_s/step": 1.0}, step=1)
    status.close()
    em.close()
    events = [json.loads(line) for p in tmp_path.glob("*.jsonl") for line in p.read_text().split()]
    reports = [
        (e["rank"], e["world_size"], e["phase"]) for e in events if e["kind"] == "rank.status"
    ]
    assert reports == [(2, 4, "running"), (2, 4, "exited")]  # not one per phase change
    done = next(e for e in events if e["kind"] == "step.done")
    assert ("cuda_memory" in done) == bool(cuda_memory())


def test_exited_goes_out_before_the_emitters_last_words(tmp_path: Path) -> None:
    """The emitter closes first (its atexit ran first, or the caller closed it): the rank's
    `exited` still goes out with its events, before the final heartbeat -- not after it."""
    from runwatch.emitters import Emitter
    from runwatch.emitters.torch import RankStatus

    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat_interval=3600)
    status = RankStatus(em, rank=0, world_size=1, interval=3600)
    em.close()
    assert status._stop.is_set()  # closed with the emitter
    events = read_spool(tmp_path)
    order = [(e["kind"], e.get("phase"), e.get("final")) for e in events]
    assert ("rank.status", "exited", None) in order
    assert order.index(("rank.status", "exited", None)) < order.index(("heartbeat", None, True))

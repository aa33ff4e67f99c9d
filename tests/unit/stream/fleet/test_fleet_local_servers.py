"""A reward server per node, reached over loopback, through `runwatch replay`'s decision.

Two nodes, gpu-a and gpu-b, each run the rollout workers of four jobs and a reward server
of their own that those workers reach at `http://localhost:8000/score` -- a common set-up.
gpu-a's server hangs; gpu-b's keeps answering. The jobs' `dep` is what a real emitter on
each node names that endpoint (`runwatch.emitters.deps`: a loopback host is the node's).
So one fleet incident names gpu-a's server with gpu-a's jobs only, and no run of gpu-b is
in it: named `reward@localhost:8000` on both nodes, the two servers would be one, and the
stalls on one would be counted against (or merged with) the runs of the other.
"""

from __future__ import annotations

import io
from pathlib import Path

from helpers import read_events

from runwatch.dev.deliver import write_file
from runwatch.dev.simulate import Cluster, JobSpec, Shared
from runwatch.emitters import Emitter
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

T0 = 1_773_496_800.0
ENDPOINT = "http://localhost:8000/score"
NODES = ("gpu-a", "gpu-b")
PER_NODE = 4


def named_on(node: str, spool: Path) -> str:
    """The `dep` an emitter on `node` (RUNWATCH_NODE, or `host=` as here) gives a reward
    phase that waits on the local server."""
    em = Emitter(run="probe", component="rollout", path=spool, heartbeat=False, host=node)
    with em.trajectory("t-0", step=1) as t:
        t.phase("reward", endpoint=ENDPOINT)
    em.close()
    (phase,) = (e for e in read_events(spool) if e["kind"] == "trajectory.phase")
    assert phase["src"]["host"] == node
    return str(phase["dep"])


def test_a_local_reward_server_that_hangs_on_one_node_is_that_node_s(tmp_path: Path) -> None:
    dep = {node: named_on(node, tmp_path / node) for node in NODES}
    assert dep == {"gpu-a": "reward@gpu-a:8000", "gpu-b": "reward@gpu-b:8000"}
    specs = [
        JobSpec(k, f"{node}-job{k}", trajectories=8, servers=1, reward_dep=dep[node],
                rollout_host=node)
        for k, node in enumerate(n for n in NODES for _ in range(PER_NODE))
    ]  # fmt: skip
    runs = {node: {s.run for s in specs if s.rollout_host == node} for node in NODES}
    shared = Shared(hangs=((dep["gpu-a"], 1200.0, 1500.0),))  # gpu-a's server only
    cluster = Cluster(len(specs), duration=1800.0, specs=specs, shared=shared)
    out = io.BytesIO()
    write_file(cluster, out, T0, 1.0)
    lines = [("trace", i, raw) for i, raw in enumerate(out.getvalue().splitlines())]
    alerts = list(replay(lines, Engine(RulesConfig.default())))

    stalled = {a.run for a in alerts if a.rule == "inference_idle_with_pending" and a.firing}
    assert stalled == runs["gpu-a"]  # the runs that wait on gpu-a's server, and only they
    assert {a.details.get("dep") for a in alerts
            if a.rule == "inference_idle_with_pending" and a.firing} == {dep["gpu-a"]}  # fmt: skip
    fleet = [a for a in alerts if a.run == "@fleet"]
    assert [(a.subject, a.state) for a in fleet] == [
        ("dep:reward@gpu-a:8000", "firing"), ("dep:reward@gpu-a:8000", "resolved")]  # fmt: skip
    opened, resolved = fleet
    assert opened.details["others"] == PER_NODE  # gpu-b's runs: the contrast, unaffected
    assert opened.details["others_affected"] == 0
    assert set(opened.details["runs"]) <= runs["gpu-a"]
    assert set(resolved.details["runs"]) == runs["gpu-a"]
    assert opened.incident is not None
    members = {a.run for a in alerts if a.incident and a.incident.fleet == opened.incident.id}
    assert members == runs["gpu-a"]  # no run of gpu-b joins it

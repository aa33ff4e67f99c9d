"""A fleet of simulated jobs sharing things, and faults that break one (issue 45's trace).

`fleet_cluster()` builds the trace issue 45 is checked on: `runs` jobs (60) share `servers`
reward servers (3: `reward@rm-K:8000`, each used by a third of them) and one sandbox pool
(`sandbox@pool-a:443`); the rollout workers of `node_runs` jobs (4) run on one node. Then,
within minutes of each other: one reward server hangs (work that reaches it waits until
it is back), that node goes down, and `coincident` jobs (6) fail in the same minute for
reasons of their own (each trainer raises something else). `Expected` says which runs each
fault affected: a fleet incident for the server and one for the node, none for the
coincidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runwatch.dev.simulate import Cluster, JobSpec, Shared

#: The jobs' silences for a fleet trace played live and fast (`fleet_cluster(config=LIVE)`,
#: in the trace's seconds): at 40x the defaults give 1.5 s (heartbeat) and 3 s (idle
#: inference) of wall time, which a loaded machine's delay in sending the events reaches --
#: every run then looks silent to the live path, judging on the wall clock, and never to a
#: replay of the same events. 240 s is 6 s at 40x.
LIVE = {"heartbeat_lost": {"timeout": 240.0}, "inference_idle_with_pending": {"idle_for": 240.0}}
SANDBOX = "sandbox@pool-a:443"
NODE = "rollout-node-7"


def reward_server(k: int) -> str:
    return f"reward@rm-{k}:8000"


@dataclass(frozen=True)
class Expected:
    """What the trace must yield: the hung server's and the dead node's subjects and runs,
    and the runs that failed by coincidence."""

    dep: str  # the hung server, as `dep:NAME`
    dep_runs: frozenset[str]
    host: str  # the dead node, as `host:NAME`
    host_runs: frozenset[str]
    coincident: frozenset[str]


def fleet_cluster(
    *,
    runs: int = 60,
    servers: int = 3,
    hung: int = 1,
    node_runs: int = 4,
    coincident: int = 6,
    seed: int = 45,
    duration: float = 2400.0,
    hang_at: float = 900.0,
    hang_for: float = 900.0,
    node_down_at: float = 960.0,
    crash_at: float = 930.0,
    trajectories: int = 16,
    prefix: str = "fleet",
    config: Mapping[str, Mapping[str, float]] | None = None,
) -> tuple[Cluster, Expected]:
    """The cluster (module docstring) and what it must yield. Jobs k use reward server
    k % `servers`; the node hosts the rollout workers of the first `node_runs` jobs that do
    not use the hung server, and `coincident` others fail at `crash_at`. `config`: the
    jobs' rule thresholds where not the defaults (`Cluster`)."""
    users = [k for k in range(runs) if k % servers == hung]
    rest = [k for k in range(runs) if k % servers != hung]
    on_node, crashing = rest[:node_runs], rest[node_runs : node_runs + coincident]
    specs = [
        JobSpec(
            k, f"{prefix}-{k:03d}", trajectories=trajectories, servers=1,
            sandbox_dep=SANDBOX, reward_dep=reward_server(k % servers),
            rollout_host=NODE if k in on_node else None,
            crash_at=crash_at + 3.0 * i if (i := _index(crashing, k)) is not None else None,
        )
        for k in range(runs)
    ]  # fmt: skip
    shared = Shared(
        hangs=((reward_server(hung), hang_at, hang_at + hang_for),),
        down=((NODE, node_down_at),),
    )
    cluster = Cluster(runs, seed=seed, duration=duration, specs=specs, shared=shared,
                      prefix=prefix, config=config)  # fmt: skip
    run = {k: spec.run for k, spec in enumerate(specs)}
    expected = Expected(
        dep=f"dep:{reward_server(hung)}",
        dep_runs=frozenset(run[k] for k in users),
        host=f"host:{NODE}",
        host_runs=frozenset(run[k] for k in on_node),
        coincident=frozenset(run[k] for k in crashing),
    )
    return cluster, expected


def shared_cluster(
    jobs: int,
    *,
    servers: int = 2,
    hang: bool = False,
    faults: list[str] | None = None,
    seed: int = 0,
    duration: float = 3600.0,
    fault_step: int = 3,
    prefix: str = "sim",
    **job_args: Any,
) -> Cluster:
    """`jobs` simulated jobs (with their own `faults`, as `Cluster`'s) that share `servers`
    reward servers -- job k uses `reward@rm-(k % servers):8000` -- and one sandbox pool;
    with `hang`, reward server 1 stops answering two thirds of the way through, for a
    sixth of the time (what the demo shows: `runwatch simulate --shared-fault`)."""
    base = Cluster(jobs, faults=faults, seed=seed, duration=duration, fault_step=fault_step,
                   prefix=prefix, **job_args)  # fmt: skip
    specs = [dataclasses.replace(spec, sandbox_dep=SANDBOX,
                                 reward_dep=reward_server(spec.index % servers))
             for spec in base.specs]  # fmt: skip
    start = duration * 2 / 3
    shared = Shared(hangs=((reward_server(1 % servers), start, start + duration / 6),) if hang
                    else ())  # fmt: skip
    return Cluster(jobs, seed=seed, duration=duration, prefix=prefix, specs=specs, shared=shared)


def _index(items: list[int], item: int) -> int | None:
    return items.index(item) if item in items else None

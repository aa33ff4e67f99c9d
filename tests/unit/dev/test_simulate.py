"""The simulator: each fault raises its rule's alert on replay, slow_but_healthy none,
and a seed reproduces the same events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.dev.simulate import EXPECTED_RULE, KINDS, Cluster
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

T0 = 1_773_496_800.0


def alerts_of(cluster: Cluster, speed: float = 1.0) -> list[tuple[str, str, str]]:
    lines = (("sim", i, json.dumps(e).encode()) for i, e in enumerate(cluster.events(T0, speed)))
    return [(a.run, a.rule, a.state) for a in replay(lines, Engine())]


@pytest.mark.parametrize("speed", [1.0, 60.0])
def test_each_fault_raises_its_rule_and_slow_but_healthy_none(speed: float) -> None:
    cluster = Cluster(len(KINDS) + 1, faults=list(KINDS), seed=7, duration=2400.0)
    fired = alerts_of(cluster, speed)
    for spec in cluster.specs:
        rules = {rule for run, rule, state in fired if run == spec.run and state == "firing"}
        if spec.fault in EXPECTED_RULE:
            assert EXPECTED_RULE[spec.fault] in rules, (spec.fault, rules)
        else:  # slow_but_healthy, and the healthy job
            assert rules == set(), (spec.fault, rules)


@pytest.mark.slow
def test_healthy_cluster_stays_quiet_over_two_hours() -> None:
    assert alerts_of(Cluster(6, faults=["slow_but_healthy"] * 3, seed=11, duration=7200.0)) == []


@pytest.mark.slow
def test_a_seed_reproduces_the_events(tmp_path: Path) -> None:
    def run(out: Path, seed: int) -> bytes:
        cmd = [sys.executable, "-m", "runwatch.cli", "simulate", "--jobs", "3", "--seed",
               str(seed), "--duration", "300", "--fault", "sandbox_hang", "--start",
               "2026-03-14T14:00:00Z", "--out", str(out)]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
        return out.read_bytes()

    a, b, c = run(tmp_path / "a", 1), run(tmp_path / "b", 1), run(tmp_path / "c", 2)
    assert a == b
    assert a != c
    assert len(a.splitlines()) > 1000


def test_bad_fault_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        Cluster(2, faults=["gpu_on_fire"])
    with pytest.raises(ValueError, match="at least as many jobs"):
        Cluster(1, faults=["sandbox_hang", "inference_crash"])


@pytest.mark.parametrize(
    ("start", "why"),
    [("0", "before 2001-09-09"), ("1800000000000", "looks like milliseconds")],
)
def test_a_start_no_event_could_carry_is_refused_in_one_line(
    tmp_path: Path, start: str, why: str
) -> None:
    """A file whose every event the rules would refuse (and whose ages would read as
    decades) is not written at all."""
    out = tmp_path / "sim.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "runwatch.cli", "simulate", "--jobs", "1", "--duration", "60",
         "--out", str(out), "--start", start],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"runwatch simulate: --start {start}: " + (
        "is before 2001-09-09: runwatch wants seconds since 1970 (UTC)" if why.startswith("before")
        else "looks like milliseconds since 1970: runwatch wants seconds")]  # fmt: skip
    assert not out.exists()


def test_a_speed_that_makes_silence_a_few_wall_seconds_is_warned_of() -> None:
    """Live paths judge silence on the wall clock: at 40x the default 60 s heartbeat
    timeout is 1.5 s, which a loaded machine's delay in sending reaches (issue 45's flake).
    `runwatch simulate` says so, with a speed that leaves 10 s; at 5x (12 s) it says
    nothing, nor for a cluster whose own timeout is long enough."""
    from runwatch.commands.simulate import short_silence
    from runwatch.dev.fleet import LIVE, fleet_cluster

    cluster = Cluster(2, seed=1, duration=600)
    warning = short_silence(cluster, 40)
    assert warning is not None
    assert "1.5 s of wall time" in warning
    assert "--speed 6 or less" in warning
    assert short_silence(cluster, 5) is None
    assert short_silence(fleet_cluster(runs=6, config=LIVE)[0], 40) is None

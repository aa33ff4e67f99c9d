"""The fleet decision (`runwatch.stream.fleet.decide`) on traces replayed as `runwatch
replay` does: a shared thing opens a fleet incident against a contrast -- runs that do not
use it -- or, where every run uses it, on the failures that point at it.

- a one-machine `serve`: three small jobs that crash within seconds of each other, each
  with its own exit status, share the host as they share everything: no fleet incident;
  three whose processes go silent together there point at it: the host's;
- two machines, the processes of the three jobs on one go silent: the node's;
- one reward server that every run uses hangs: the runs' alerts say their work waits on it,
  and that is the fleet incident, with no run elsewhere to compare.

And a fleet incident's duration is one: from its opening to its resolution, on event time,
in its resolved transition and in the history (`runwatch show @fleet`)."""

from __future__ import annotations

import io
import json
from itertools import count
from typing import Any

from runwatch.dev.deliver import write_file
from runwatch.dev.fleet import shared_cluster
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay
from runwatch.stream.rules.base import fmt_duration

T0 = 1_773_496_800.0
_ids = count()


def event(ts: float, run: str, kind: str, host: str, pid: int, **fields: Any) -> dict[str, Any]:
    src = {"component": "trainer", "host": host, "pid": pid}
    return {"v": 1, "id": f"e{next(_ids)}", "ts": T0 + ts, "run": run, "kind": kind, "src": src,
            **fields}  # fmt: skip


def job(
    run: str, host: str, pid: int, *, beats_until: float, end: str | None, at: float
) -> list[dict[str, Any]]:
    """A small job on `host`: it starts, beats every 10 s until `beats_until`, then at `at`
    its command exits 3 (`end` "crash": `runwatch watch`'s events, as docs/slack.md runs
    it) or it goes silent (`end` None: no word more)."""
    out = [event(0.0, run, "run.started", host, pid)]
    out += [event(t, run, "heartbeat", host, pid) for t in range(1, int(beats_until), 10)]
    if end == "crash":
        out.append(event(at, run, "component.failed", host, pid, error="exited with status 3",
                         how="exit", exit_code=3))  # fmt: skip
        out.append(event(at + 0.1, run, "run.finished", host, pid, status="failed"))
    return out


def jobs(
    prefix: str,
    host: str,
    pid: int,
    *,
    beats_until: float,
    end: str | None = None,
    at: float = 0.0,
    apart: float = 0.0,
) -> list[dict[str, Any]]:
    """Three `job`s on `host`, `PREFIX-0` to `-2`, ending `apart` seconds after each other."""
    return [e for i in range(3)
            for e in job(f"{prefix}-{i}", host, pid + i, beats_until=beats_until + apart * i,
                         end=end, at=at + apart * i)]  # fmt: skip


def replayed(events: list[dict[str, Any]], until: float | None = None) -> list[Alert]:
    events = sorted(events, key=lambda e: e["ts"])
    lines = [("trace", i, json.dumps(e).encode()) for i, e in enumerate(events)]
    engine = Engine(RulesConfig.default())
    return list(replay(lines, engine, until=None if until is None else T0 + until))


def fleet(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.run == "@fleet"]


def test_three_jobs_that_crash_together_on_one_machine_make_no_fleet_incident() -> None:
    alerts = replayed(jobs("job", "vm", 100, beats_until=5.0, end="crash", at=5.0, apart=0.8))
    failed = [a for a in alerts if a.rule == "component_failed" and a.firing]
    assert [a.details["host"] for a in failed] == ["vm"] * 3  # each names the host...
    assert fleet(alerts) == []  # ...which every run on the machine uses: no contrast


def test_processes_that_go_silent_together_on_one_machine_point_at_it() -> None:
    alerts = replayed(jobs("job", "vm", 100, beats_until=200.0), until=400.0)
    lost = [a for a in alerts if a.rule == "heartbeat_lost" and a.firing]
    assert [a.details["host"] for a in lost] == ["vm"] * 3
    (opened,) = fleet(alerts)  # (open: they are still silent)
    assert (opened.subject, opened.details["others"], opened.details["pointed"]) == (
        "host:vm", 0, 3)  # fmt: skip
    assert "every run uses it: 3 of them went silent on it" in opened.summary


def test_crashes_and_one_silence_on_one_machine_are_no_fleet_incident() -> None:
    events = jobs("job", "vm", 100, beats_until=150.0, end="crash", at=150.0, apart=5.0)
    events = [e for e in events if not (e["run"] == "job-2" and e["ts"] > T0 + 150.0)]
    alerts = replayed(events, until=400.0)  # job-2 went silent; job-0 and -1 exited 3
    assert {a.run for a in alerts if a.rule == "heartbeat_lost"} == {"job-2"}
    assert fleet(alerts) == []


def test_a_node_whose_runs_go_silent_against_runs_elsewhere_is_the_fleets() -> None:
    events = jobs("a", "box-a", 100, beats_until=200.0) + jobs("b", "box-b", 200, beats_until=400.0)
    alerts = replayed(events, until=400.0)
    (opened,) = fleet(alerts)  # (open: box-a is still silent)
    assert (opened.subject, opened.state) == ("host:box-a", "firing")
    assert opened.details["runs"] == ["a-0", "a-1", "a-2"]
    assert (opened.details["others"], opened.details["others_affected"]) == (3, 0)


def test_one_reward_server_every_run_uses_hangs_a_fleet_incident_names_it() -> None:
    cluster = shared_cluster(4, servers=1, hang=True, duration=1800.0, trajectories=8)
    out = io.BytesIO()
    write_file(cluster, out, T0, 1.0)
    lines = [("trace", i, raw) for i, raw in enumerate(out.getvalue().splitlines())]
    alerts = list(replay(lines, Engine(RulesConfig.default())))
    stalled = {a.run for a in alerts if a.rule == "inference_idle_with_pending" and a.firing
               and a.details.get("dep") == "reward@rm-0:8000"}  # fmt: skip
    assert len(stalled) == 4  # every run's alert says its work waits on the one server
    opened, resolved = fleet(alerts)
    assert (opened.subject, opened.details["others"]) == ("dep:reward@rm-0:8000", 0)
    assert "every run uses it" in opened.summary
    assert set(resolved.details["runs"]) == stalled
    members = {a.run for a in alerts if a.incident and a.incident.fleet == opened.incident.id}  # type: ignore[union-attr]
    assert members == stalled


def test_a_fleet_incident_lasts_from_its_opening_to_its_resolution() -> None:
    events = jobs("a", "box-a", 100, beats_until=100.0, apart=30.0)
    events += jobs("b", "box-b", 200, beats_until=400.0)
    events += [event(300.0 + i, f"a-{i}", "run.finished", "box-a", 100 + i, status="killed")
               for i in range(3)]  # fmt: skip
    opened, resolved = fleet(replayed(events, until=400.0))
    assert opened.incident is not None
    assert opened.since < opened.ts  # its founders' incidents opened before it
    lasted = resolved.ts - opened.incident.opened
    assert resolved.details["duration_s"] == round(lasted, 3)
    assert f"resolved after {fmt_duration(lasted)}:" in resolved.summary

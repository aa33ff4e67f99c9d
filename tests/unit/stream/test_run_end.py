"""A run's end closes its alerts (contract section 8): when `run.finished` arrives, whatever
its status, every alert of the run still firing resolves at that event's `ts` with
`details.reason: "run_finished"`, its incident closes, and nothing fires for it after."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import TRAINER, beats, by_ts, feed, make_engine, make_event

from runwatch.stream.alerts import Alert

RANK = [{"component": "trainer", "host": "node-0", "pid": 100 + r, "rank": r} for r in (0, 1)]


def troubled(run: str = "r1") -> list[dict[str, Any]]:
    """Zero reward, a frozen bar and two stalled ranks, all firing by 400."""
    events = beats(TRAINER, 0, 400, run=run)
    events += [make_event("reward", 10.0 * s, run=run, src=TRAINER, step=s, mean=0.0)
               for s in range(1, 7)]  # fmt: skip
    events += [make_event("progress", 10.0 * n, run=run, src=TRAINER, name="Rollout", n=n,
                          total=100) for n in (1, 2, 3)]  # fmt: skip
    events += [make_event("rank.status", 20, run=run, src=s, rank=r, world_size=2, phase="recv")
               for r, s in enumerate(RANK)]  # fmt: skip
    return by_ts(events)


def open_keys(alerts: list[Alert]) -> dict[str, Alert]:
    last: dict[str, Alert] = {}
    for a in alerts:
        last[a.key] = a
    return {k: a for k, a in last.items() if a.firing}


@pytest.mark.parametrize("status", ["ok", "failed", "killed"])
def test_every_alert_still_firing_resolves_at_the_end_and_its_incident_closes(
    status: str,
) -> None:
    engine = make_engine()
    before = feed(engine, troubled())
    firing = open_keys(before)
    assert {a.rule for a in firing.values()} >= {"zero_reward", "stuck_progress", "ranks_stalled"}
    assert engine.open_incidents("r1")
    end = feed(engine, [make_event("run.finished", 405.5, status=status)])
    assert {a.key for a in end} == set(firing)
    for a in end:
        assert (a.state, a.ts) == ("resolved", 405.5), a
        assert a.details["reason"] == "run_finished"
        assert a.details["status"] == status
        assert f"the run finished ({status})" in a.summary
    closing = {a.incident.id: a.incident.open for a in end if a.incident is not None}
    assert closing  # each incident's last transition closes it
    assert not any(closing.values())
    assert engine.open_incidents("r1") == []
    assert [f for f in engine.firing() if f[0] == "r1"] == []


def test_nothing_fires_for_a_run_after_its_end() -> None:
    """Late events and time going on: the run is over, no rule holds for it."""
    engine = make_engine()
    feed(engine, [*beats(TRAINER, 0, 50), make_event("run.finished", 60, status="failed")])
    late = [
        make_event("step.metrics", 55, src=TRAINER, step=9, metrics={"loss": float("nan")}),
        make_event("component.failed", 58, src=TRAINER, how="exception", error="E: x"),
        *[make_event("reward", 60.0 + s, src=TRAINER, step=s, mean=0.0) for s in range(10)],
    ]
    assert feed(engine, late) == []
    assert engine.advance(100_000) == []


def test_other_runs_go_on() -> None:
    engine = make_engine()
    feed(engine, by_ts(troubled("r1"), troubled("r2")))
    end = feed(engine, [make_event("run.finished", 405, run="r1", status="killed")])
    assert end
    assert {a.run for a in end} == {"r1"}
    assert [f for f in engine.firing() if f[0] == "r2"]


def test_the_evidence_of_an_incident_resolves_with_it() -> None:
    engine = make_engine()
    feed(engine, [make_event("rank.status", 10, src=s, rank=r, world_size=2, phase="recv")
                  for r, s in enumerate(RANK)])  # fmt: skip
    (stalled,) = engine.advance(320)
    assert stalled.incident is not None
    frames = [{"file": "/w/train.py", "line": 42, "function": "step"}]
    feed(engine, [make_event("process.stacks", 321, src=s, request=stalled.incident.id,
                             how="emitter", threads=[{"name": "MainThread", "frames": frames}])
                  for s in RANK])  # fmt: skip
    (evidence,) = engine.advance(360)
    assert evidence.rule == "process_stacks"
    end = feed(engine, [make_event("run.finished", 400, status="killed")])
    assert [(a.rule, a.state, a.ts, a.details["reason"]) for a in end] == [
        ("ranks_stalled", "resolved", 400.0, "run_finished"),
        ("process_stacks", "resolved", 400.0, "run_finished"),
    ]
    assert end[-1].incident is not None
    assert end[-1].incident.open is False

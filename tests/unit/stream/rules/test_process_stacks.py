"""`process_stacks` (info): a hang's incident asks the run's processes for their stacks (in
the run view) and shows the answers grouped, as its evidence."""

from __future__ import annotations

from typing import Any

from helpers import feed, make_engine, make_event

from runwatch.stream.engine import Engine
from runwatch.stream.state.stacks import PER_HOUR

LIB = "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def src(r: int) -> dict[str, Any]:
    return {"component": "trainer", "host": f"node-{r}", "pid": 1000 + r, "rank": r}


def rank(ts: float, r: int, phase: str) -> dict[str, Any]:
    return make_event("rank.status", ts, src=src(r), rank=r, world_size=4, phase=phase)


def stacks(ts: float, r: int, request: str, inner: tuple[str, int], **kw: Any) -> dict[str, Any]:
    frames = [{"file": "/w/train.py", "line": 90, "function": "<module>"},
              {"file": "/w/train.py", "line": 42, "function": "step"},
              {"file": LIB, "line": inner[1], "function": inner[0]}]  # fmt: skip
    threads = [{"name": "MainThread", "frames": frames},
               {"name": "runwatch-heartbeat-trainer", "frames": frames[:1]}]  # fmt: skip
    return make_event("process.stacks", ts, src=src(r), request=request, how="emitter",
                      threads=threads, **kw)  # fmt: skip


def divergence() -> tuple[Engine, str]:
    """Four ranks stop changing phase at 13: ranks_stalled fires at 313 and asks."""
    engine = make_engine()
    feed(engine, [rank(10, 0, "recv"), rank(11, 1, "recv"), rank(12, 2, "destroy_pg"),
                  rank(13, 3, "recv")])  # fmt: skip
    (fired,) = engine.advance(314)
    assert fired.rule == "ranks_stalled"
    assert fired.incident is not None
    view = engine.run_view("r1")
    assert view is not None
    assert view.to_dict()["stacks"] == {"request": fired.incident.id, "at": fired.ts}
    return engine, fired.incident.id


def test_the_answers_are_the_incident_s_evidence_grouped_by_where_each_process_is() -> None:
    engine, request = divergence()
    answers = [stacks(320, r, request, ("recv", 2310)) for r in (0, 1, 3)]
    answers.append(stacks(321, 2, request, ("destroy_process_group", 2011)))
    assert feed(engine, answers) == []  # not before `settle`
    (evidence,) = engine.advance(340)  # requested at 313 (+20)
    assert (evidence.rule, evidence.severity, evidence.state) == (
        "process_stacks",
        "info",
        "firing",
    )
    assert evidence.incident is not None
    assert (evidence.incident.id, evidence.incident.role) == (request, "evidence")
    assert evidence.incident.root_rule == "ranks_stalled"
    assert evidence.summary == (
        "where each process is: ranks 0,1,3: `recv` (distributed_c10d.py:2310) in `step` "
        "(train.py:42); rank 2: `destroy_process_group` (distributed_c10d.py:2011) in `step` "
        "(train.py:42)"
    )
    groups = evidence.details["groups"]
    assert [g["ranks"] for g in groups] == [[0, 1, 3], [2]]
    assert groups[0]["stack"][0] == [LIB, 2310, "recv"]  # innermost first
    # the ranks move again: the incident closes, its evidence with it, the request goes
    out = feed(engine, [rank(500 + r, r, "forward") for r in range(4)])
    assert [(a.rule, a.state) for a in out] == [("ranks_stalled", "resolved"),
                                                ("process_stacks", "resolved")]  # fmt: skip
    assert out[-1].incident is not None
    assert (out[-1].incident.id, out[-1].incident.open) == (request, False)
    view = engine.run_view("r1")
    assert view is not None
    assert "stacks" not in view.to_dict()


def test_processes_alive_that_did_not_answer_are_named() -> None:
    engine, request = divergence()
    beats = [make_event("heartbeat", 315, src=src(r)) for r in range(4)]
    feed(engine, [*beats, stacks(320, 0, request, ("recv", 2310))])
    (evidence,) = engine.advance(340)
    assert "; not answering: " in evidence.summary
    assert len(evidence.details["not_answering"]) == 3
    assert evidence.details["groups"][0]["processes"][0].startswith("trainer@node-0")


def test_an_answer_to_another_request_is_not_evidence_and_no_answer_means_no_alert() -> None:
    engine, _ = divergence()
    feed(engine, [stacks(320, 0, "incident|r1|99", ("recv", 2310))])
    assert engine.advance(1000) == []


def test_one_request_per_incident_and_a_few_per_hour() -> None:
    """A process that goes silent and comes back, again and again: an incident each time,
    a request for the first PER_HOUR of them in an hour, then none until the hour passed."""
    engine = make_engine({"heartbeat_lost": {"timeout": 10}})
    asked: list[str] = []
    opened: set[str] = set()
    for i in range(PER_HOUR + 3):
        t = 100.0 + i * 30
        out = feed(engine, [make_event("heartbeat", t, src=src(0))]) + engine.advance(t + 20)
        opened |= {a.incident.id for a in out if a.incident is not None}
        view = engine.run_view("r1")
        assert view is not None
        if view.stacks is not None and view.stacks.request not in asked:
            asked.append(view.stacks.request)
    assert len(opened) == PER_HOUR + 3
    assert len(asked) == PER_HOUR
    feed(engine, [make_event("heartbeat", 3800, src=src(0))])
    engine.advance(3820)
    view = engine.run_view("r1")
    assert view is not None
    assert view.stacks is not None
    assert view.stacks.request not in asked  # the hour has passed: asked again


def test_the_request_and_answers_go_through_a_checkpoint() -> None:
    from runwatch.stream import checkpoint
    from runwatch.stream.live import LiveDriver

    engine, request = divergence()
    first = LiveDriver()
    first.engine = engine
    second = LiveDriver()
    feed(engine, [stacks(320, 0, request, ("recv", 2310))])
    checkpoint.load(checkpoint.dump(first, {"offset": 1}), second)
    (evidence,) = second.engine.advance(340)
    assert "rank 0: `recv`" in evidence.summary

"""`restart_loop` (critical): one role keeps coming back with a new pid. Quiet for ranks or
workers that run side by side, for pids that start together, and for a single restart."""

from __future__ import annotations

from typing import Any

from helpers import brief, feed, make_engine, make_event

RULE = "restart_loop"


def mine(alerts: list[Any]) -> list[tuple[str, str, float]]:
    return [b for b in brief(alerts) if b[0] == RULE]


def life(pid: int, start: float, end: float, **src: Any) -> list[dict[str, Any]]:
    """A process of the rollout role that beats every 10 s over [start, end]."""
    where = {"component": "rollout", "host": "node-3", "pid": pid, **src}
    return [
        make_event("heartbeat", float(t), src=where) for t in range(int(start), int(end) + 1, 10)
    ]


def crash_loop(n: int, start: float = 0.0, lives: float = 60.0, gap: float = 15.0) -> list[Any]:
    out, t = [], start
    for i in range(n):
        out += life(1000 + i, t, t + lives)
        t += lives + gap
    return sorted(out, key=lambda e: e["ts"])


def test_a_role_that_keeps_restarting_fires_and_names_it() -> None:
    engine = make_engine()
    out = feed(engine, crash_loop(4))  # restarts at 75, 150, 225
    assert mine(out) == [(RULE, "firing", 255.0)]  # the third restart + 30 s
    (alert,) = [a for a in out if a.rule == RULE]
    assert alert.subject == "rollout@node-3"
    assert alert.details["restarts"] == [75.0, 150.0, 225.0]
    assert alert.details["pids"] == [1000, 1001, 1002, 1003]
    assert "restarted 3 times" in alert.summary
    assert "crash loop" in alert.summary
    # the loop stops: once fewer than 3 restarts are left in the half hour, it resolves
    assert mine(engine.advance(75 + 1800)) == [(RULE, "resolved", 1875.0)]


def test_a_loop_faster_than_confirm_fires_too() -> None:
    engine = make_engine({RULE: {"confirm": 30}})
    out = feed(engine, crash_loop(8, lives=5, gap=5))  # a new pid every 10 s
    assert [s for _, s, _ in mine(out)] == ["firing"]


def test_ranks_and_side_by_side_workers_and_one_restart_stay_quiet() -> None:
    engine = make_engine()
    ranks = [e for r in range(8) for e in life(2000 + r, 0, 600, rank=r)]
    workers = [e for i in range(8) for e in life(3000 + i, i * 0.3, 600, host="node-4")]
    once = life(4000, 0, 100, host="node-5") + life(4001, 130, 600, host="node-5")
    out = feed(engine, sorted(ranks + workers + once, key=lambda e: e["ts"]))
    assert mine(out + engine.advance(5000)) == []


def test_an_instance_named_server_is_one_slot_whatever_its_pid() -> None:
    engine = make_engine()
    events = []
    for i in range(3):
        src = {"component": "inference", "instance": "vllm-0"}
        events += life(5000 + i, i * 100.0, i * 100.0 + 50, **src)
    events += life(6000, 300, 400, component="inference", instance="vllm-0")
    out = feed(engine, sorted(events, key=lambda e: e["ts"]))
    assert [(s, a.subject) for a in out if a.rule == RULE for s in [a.state]] == [
        ("firing", "inference@node-3/vllm-0")
    ]


def test_the_run_finishing_resolves_it() -> None:
    engine = make_engine()
    out = feed(engine, crash_loop(4))
    assert [s for _, s, _ in mine(out)] == ["firing"]
    done = make_event("run.finished", 400.0, status="failed")
    assert mine(feed(engine, [done])) == [(RULE, "resolved", 400.0)]


def test_a_crash_loop_beside_a_healthy_sibling_of_its_slot_fires() -> None:
    """Two rollout workers on one host, no rank: one lives, the other keeps dying. The
    living sibling used to keep the slot looking alive (issue 32)."""
    engine = make_engine()
    sibling = life(7000, 0, 600)
    out = feed(engine, sorted(sibling + crash_loop(4), key=lambda e: e["ts"]))
    assert mine(out) == [(RULE, "firing", 255.0)]
    (alert,) = [a for a in out if a.rule == RULE]
    assert alert.details["restarts"] == [75.0, 150.0, 225.0]


def test_clean_stops_and_a_growing_pool_are_no_restarts() -> None:
    engine = make_engine()
    events = life(7100, 0, 600)  # a sibling that lives throughout
    for i in range(4):  # workers that each finish their share and say so, then the next
        events += life(7200 + i, i * 75.0, i * 75.0 + 60)
        events.append(make_event("heartbeat", i * 75.0 + 61, final=True,
                                 src={"component": "rollout", "host": "node-3",
                                      "pid": 7200 + i}))  # fmt: skip
    events += [e for i in range(4) for e in life(7300 + i, 300 + i * 20.0, 600)]  # scale-up
    out = feed(engine, sorted(events, key=lambda e: e["ts"]))
    assert mine(out + engine.advance(5000)) == []

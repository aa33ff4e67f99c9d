"""`weight_sync_stalled` (critical): the trainer published weights and an inference server
has not loaded them for `timeout`. Quiet while loads keep up, when no server reports loads,
and for a server whose process is gone."""

from __future__ import annotations

from typing import Any

from helpers import brief, feed, make_engine, make_event

RULE = "weight_sync_stalled"
TRAINER = {"component": "trainer", "host": "node-0", "pid": 100}


def server(k: int) -> dict[str, Any]:
    return {"component": "inference", "host": f"gpu-{k}", "pid": 200 + k, "instance": f"vllm-{k}"}


def mine(alerts: list[Any]) -> list[tuple[str, str, float]]:
    return [b for b in brief(alerts) if b[0] == RULE]


def published(ts: float, version: int, step: int | None = None) -> dict[str, Any]:
    fields = {"version": version} if step is None else {"version": version, "step": step}
    return make_event("weights.published", ts, src=TRAINER, **fields)


def loaded(ts: float, version: int, k: int) -> dict[str, Any]:
    return make_event("weights.loaded", ts, src=server(k), version=version, server=f"vllm-{k}")


def beats(k: int, start: float, end: float, every: float = 10.0) -> list[dict[str, Any]]:
    times = range(int(start), int(end), int(every))
    return [make_event("heartbeat", float(t), src=server(k)) for t in times]


def test_a_server_that_does_not_load_the_new_weights_fires_after_the_timeout() -> None:
    engine = make_engine({RULE: {"timeout": 300}})
    out = feed(engine, [loaded(0, 0, 0), loaded(0, 0, 1), published(100, 1, step=10),
                        loaded(130, 1, 0), *beats(1, 0, 600)])  # fmt: skip
    assert mine(out) == [(RULE, "firing", 400.0)]  # vllm-1 on v0 since v1 came at 100
    (alert,) = [a for a in out if a.rule == RULE]
    assert alert.severity == "critical"
    assert alert.since == 100.0
    assert alert.details["lagging"] == {"vllm-1": 0}
    assert alert.details["loaded"] == {"vllm-0": 1, "vllm-1": 0}
    assert alert.details["step"] == 10
    assert "weights v1 (step 10) published" in alert.summary
    assert "1 of 2 inference servers have not loaded them" in alert.summary
    assert mine(feed(engine, [loaded(610, 1, 1)])) == [(RULE, "resolved", 610.0)]


def test_loads_that_keep_up_stay_quiet_also_across_many_versions() -> None:
    engine = make_engine({RULE: {"timeout": 300}})
    events = [loaded(0, 0, 0), loaded(0, 0, 1)]
    for v in range(1, 40):
        t = 100.0 * v
        events += [published(t, v), loaded(t + 30, v, 0), loaded(t + 250, v, 1)]
    events += beats(0, 0, 4000) + beats(1, 0, 4000)
    assert mine(feed(engine, events)) == []
    assert mine(engine.advance(4000)) == []


def test_a_server_behind_by_several_versions_counts_from_the_first_it_missed() -> None:
    engine = make_engine({RULE: {"timeout": 300}})
    out = feed(engine, [loaded(0, 0, 0), loaded(0, 0, 1), published(100, 1), loaded(120, 1, 1),
                        published(250, 2)])  # fmt: skip
    assert mine(out + engine.advance(399)) == []
    fired = engine.advance(400)  # vllm-0 (v0) missed v1 at 100; vllm-1 (v1) only v2 at 250
    assert mine(fired) == [(RULE, "firing", 400.0)]
    assert fired[0].details["lagging"] == {"vllm-0": 0, "vllm-1": 1}


def test_no_loads_reported_or_a_dead_server_stays_quiet() -> None:
    engine = make_engine({RULE: {"timeout": 300}})
    assert mine(feed(engine, [published(t, t // 100) for t in range(100, 2000, 100)])) == []
    assert mine(engine.advance(5000)) == []
    # a server that stops beating is not waited for (heartbeat_lost says it is gone)
    engine = make_engine({RULE: {"timeout": 300}, "heartbeat_lost": {"timeout": 60}})
    out = feed(engine, [*beats(0, 0, 100), loaded(0, 0, 0), published(200, 1)])
    assert mine(out + engine.advance(2000)) == []


def test_a_lagging_server_that_dies_resolves_the_alert() -> None:
    engine = make_engine({RULE: {"timeout": 100}, "heartbeat_lost": {"timeout": 60}})
    out = feed(engine, [loaded(0, 0, 0), published(10, 1), *beats(0, 0, 200)])
    assert mine(out) == [(RULE, "firing", 110.0)]
    assert mine(engine.advance(300)) == [(RULE, "resolved", 250.0)]  # last beat 190 + 60


def test_the_run_finishing_resolves_it() -> None:
    engine = make_engine({RULE: {"timeout": 100}})
    feed(engine, [loaded(0, 0, 0), published(10, 1)])
    assert mine(engine.advance(200)) == [(RULE, "firing", 110.0)]
    done = make_event("run.finished", 300, src=TRAINER, status="ok")
    assert mine(feed(engine, [done])) == [(RULE, "resolved", 300.0)]


def test_loads_reported_out_of_order_keep_the_highest_version() -> None:
    engine = make_engine({RULE: {"timeout": 300}})
    # v2's load is reported before v1's (a slow report): the server is on v2, not v1
    out = feed(engine, [loaded(0, 0, 0), published(100, 1), published(200, 2),
                        loaded(210, 2, 0), loaded(220, 1, 0)])  # fmt: skip
    assert mine(out + engine.advance(5000)) == []

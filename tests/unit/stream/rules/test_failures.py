"""`component_failed`, `collective_timeout` and `inference_stalled` (critical): what consoles
say went wrong, as the rules see it once the lines are events."""

from __future__ import annotations

from typing import Any

from helpers import TRAINER, VLLM, beats, brief, by_ts, feed, make_engine, make_event, of_rule

ORCH = {"component": "orchestrator", "host": "node-5", "pid": 500}


def failed(ts: float, error: str, src: dict[str, Any] = ORCH, **fields: Any) -> dict[str, Any]:
    return make_event("component.failed", ts, src=src, error=error,
                      how=fields.pop("how", "exception"), **fields)  # fmt: skip


def nccl(ts: float, rank: int, seq: int, op: str = "ALLREDUCE", **fields: Any) -> dict[str, Any]:
    src = {"component": "trainer", "host": "node-0", "pid": 100 + rank}
    return make_event("collective.timeout", ts, src=src, backend="nccl", rank=rank,
                      group_rank=rank, seq=seq, op=op, **fields)  # fmt: skip


# --- component_failed ------------------------------------------------------------------------


def test_a_failed_process_fires_at_once_with_its_error() -> None:
    alerts = feed(make_engine(), [failed(100, "KeyError: 'teacher_logprobs'")])
    assert brief(alerts) == [("component_failed", "firing", 100.0)]
    (alert,) = alerts
    assert alert.subject == "orchestrator@node-5/500"
    assert "KeyError: 'teacher_logprobs'" in alert.summary
    assert alert.details["error"] == "KeyError: 'teacher_logprobs'"


def test_one_alert_per_process_however_many_lines_say_it() -> None:
    events = [failed(100, "EngineCore encountered a fatal error.", how="fatal"),
              failed(101, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore ..."),
              failed(102, "exited with status 1", how="exit", exit_code=1)]  # fmt: skip
    alerts = feed(make_engine(), events)
    assert brief(alerts) == [("component_failed", "firing", 100.0)]


def test_two_failed_processes_are_two_alerts() -> None:
    other = {"component": "inference", "host": "node-2", "pid": 300}
    alerts = feed(make_engine(), [failed(100, "A"), failed(101, "B", src=other)])
    assert sorted(a.subject or "" for a in alerts) == [
        "inference@node-2/300", "orchestrator@node-5/500"]  # fmt: skip


def test_a_step_that_ends_after_the_failure_resolves_it() -> None:
    engine = make_engine()
    feed(engine, [failed(100, "RuntimeError: boom")])
    before = feed(engine, [make_event("step.done", 90, src=TRAINER, step=1)])  # a late one
    assert before == []
    after = feed(engine, [make_event("step.done", 200, src=TRAINER, step=2)])
    assert brief(after) == [("component_failed", "resolved", 200.0)]


def test_a_run_s_end_resolves_it_whatever_its_status_saying_why() -> None:
    """Contract section 8 (which changed the rule that a failed run keeps it firing): the
    failure was shown; the run's end closes it."""
    for status in ("failed", "ok", "killed"):
        engine = make_engine()
        feed(engine, [failed(100, "RuntimeError: boom")])
        (done,) = feed(engine, [make_event("run.finished", 110, status=status)])
        assert (done.rule, done.state, done.ts) == ("component_failed", "resolved", 110.0)
        assert done.details["reason"] == "run_finished"
        assert done.incident is not None
        assert done.incident.open is False


def test_a_keyboard_interrupt_is_a_person_not_a_failure() -> None:
    assert feed(make_engine(), [failed(100, "KeyboardInterrupt")]) == []
    engine = make_engine({"component_failed": {"ignore": []}})
    assert len(feed(engine, [failed(100, "KeyboardInterrupt")])) == 1


# --- collective_timeout ----------------------------------------------------------------------


def test_ranks_in_one_collective_are_one_uniform_alert_after_settle() -> None:
    events = [nccl(100 + 0.01 * r, r, 808, timeout_s=600.0, ran_s=600.02, pg="0 (default_pg)",
                   last_completed=807, last_enqueued=811) for r in range(4)]  # fmt: skip
    engine = make_engine()
    assert feed(engine, events) == []  # settling: the other ranks are about to say it
    alerts = engine.advance(111)
    assert brief(alerts) == [("collective_timeout", "firing", 110.0)]
    (alert,) = alerts
    assert alert.subject == "process group 0 (default_pg)"
    assert alert.details["pattern"] == "uniform"
    assert "ranks 0-3 timed out in ALLREDUCE #808 (timeout 10m): uniform" in alert.summary
    assert "last completed 807, last enqueued 811" in alert.summary


def test_ranks_at_different_sequence_numbers_diverge_and_the_lowest_is_behind() -> None:
    events = [nccl(100, 0, 1580), nccl(100, 1, 1580), nccl(100, 3, 1580), nccl(101, 2, 1579)]
    engine = make_engine()
    feed(engine, events)
    (alert,) = engine.advance(200)
    assert alert.details["pattern"] == "divergent"
    assert alert.details["behind"] == ["2"]
    assert "ranks 0,1,3 in ALLREDUCE #1580; rank 2 in ALLREDUCE #1579" in alert.summary
    assert "rank 2 behind the others" in alert.summary


def test_a_line_without_a_group_joins_its_ranks_line_that_names_it() -> None:
    # torch 2.2-2.5: "Watchdog caught ... SeqNum=1580" then "[PG 1 Rank 0] ... at work: 1580"
    engine = make_engine()
    feed(engine, [nccl(100, 0, 1580, timeout_s=600.0),
                  nccl(100.1, 0, 1580, op=None, pg="1", last_completed=1579)])  # fmt: skip
    (alert,) = engine.advance(200)
    assert alert.subject == "process group 1"
    assert alert.details["ranks"]["0"]["op"] == "ALLREDUCE"
    assert alert.details["ranks"]["0"]["last_completed"] == 1579


def test_two_process_groups_are_two_alerts() -> None:
    engine = make_engine()
    feed(engine, [nccl(100, 0, 5, pg="1"), nccl(100, 1, 9, pg="2")])
    assert sorted(a.subject or "" for a in engine.advance(200)) == [
        "process group 1", "process group 2"]  # fmt: skip


def test_progress_after_the_timeout_resolves_it() -> None:
    engine = make_engine()
    feed(engine, [nccl(100, 0, 5)])
    assert len(engine.advance(200)) == 1
    out = feed(engine, [make_event("step.done", 300, src=TRAINER, step=9)])
    assert brief(out) == [("collective_timeout", "resolved", 300.0)]


def test_a_run_that_ends_failed_while_it_settles_fires_it_at_its_end() -> None:
    """No rank says more after the run's end: the gathering is complete, and the timeout
    the console showed is reported before the end closes it -- what `runwatch diagnose`
    reads in a log that ends so, `runwatch watch` of the job that exited raises (issue 41)."""
    engine = make_engine()
    assert feed(engine, [nccl(100, 0, 5), nccl(100.5, 1, 5)]) == []
    out = of_rule(feed(engine, [make_event("run.finished", 103, status="failed")]),
                  "collective_timeout")  # fmt: skip
    assert [(a.state, a.ts) for a in out] == [("firing", 103.0), ("resolved", 103.0)]
    assert "ranks 0,1 timed out in ALLREDUCE #5" in out[0].summary
    assert out[1].details["reason"] == "run_finished"
    assert engine.advance(200) == []


def test_a_run_that_ends_ok_while_it_settles_fires_it_at_its_end_too() -> None:
    """`runwatch watch -- cat FILE` of a console always ends `ok` (cat exits 0): the timeout
    its output showed still happened, and is reported before the end closes it; a step that
    ended after the timeout (the job went on) still lets it go."""
    engine = make_engine()
    feed(engine, [nccl(100, 0, 5)])
    out = of_rule(feed(engine, [make_event("run.finished", 103, status="ok")]),
                  "collective_timeout")  # fmt: skip
    assert [(a.state, a.ts) for a in out] == [("firing", 103.0), ("resolved", 103.0)]
    assert engine.advance(200) == []
    went_on = make_engine()
    feed(went_on, [nccl(100, 0, 5), make_event("step.done", 101, step=7)])
    assert of_rule(feed(went_on, [make_event("run.finished", 103, status="ok")]),
                   "collective_timeout") == []  # fmt: skip


# --- inference_stalled -----------------------------------------------------------------------


def stats(ts: float, running: int, gen: float | None, prompt: float | None = 0.0,
          waiting: int = 0) -> dict[str, Any]:  # fmt: skip
    fields: dict[str, Any] = {"server": "vllm-0", "running": running, "waiting": waiting}
    if gen is not None:
        fields["gen_tokens_per_s"] = gen
    if prompt is not None:
        fields["prompt_tokens_per_s"] = prompt
    return make_event("inference.stats", ts, src=VLLM, **fields)


def test_running_requests_and_no_tokens_for_stalled_for_fire() -> None:
    events = by_ts(beats(VLLM, 0, 400), [stats(0, 4, 300.0), stats(10, 1, 0.0),
                                         stats(20, 1, 0.0), stats(30, 1, 0.0)])  # fmt: skip
    alerts = of_rule(feed(make_engine(), events), "inference_stalled")
    assert brief(alerts) == [("inference_stalled", "firing", 190.0)]
    assert alerts[0].since == 10.0
    assert "holds 1 running and 0 waiting requests but has made no tokens for 3m" in (
        alerts[0].summary
    )


def test_vllm_v1_says_it_once_and_the_snapshot_stands() -> None:
    # V1 logs the first zero interval at INFO, the rest at DEBUG: one line, then silence
    events = by_ts(beats(VLLM, 0, 400), [stats(0, 4, 300.0), stats(10, 1, 0.0)])
    assert brief(of_rule(feed(make_engine(), events), "inference_stalled")) == [
        ("inference_stalled", "firing", 190.0)]  # fmt: skip


def test_prefill_is_progress_and_an_idle_engine_is_not_stalled() -> None:
    long_prefill = [stats(10 * i, 22, 0.0, prompt=1032.4) for i in range(40)]
    idle = [stats(400 + 10 * i, 0, 0.0) for i in range(40)]
    events = by_ts(beats(VLLM, 0, 800), long_prefill, idle)
    assert of_rule(feed(make_engine(), events), "inference_stalled") == []


def test_stats_that_do_not_say_their_throughput_say_nothing_of_progress() -> None:
    events = by_ts(beats(VLLM, 0, 800), [stats(10 * i, 3, None, None) for i in range(60)])
    assert of_rule(feed(make_engine(), events), "inference_stalled") == []


def test_tokens_again_resolve_it_and_a_lost_server_is_heartbeat_losts_business() -> None:
    engine = make_engine()
    events = by_ts(beats(VLLM, 0, 250), [stats(0, 1, 0.0)])
    assert len(of_rule(feed(engine, events), "inference_stalled")) == 1
    out = of_rule(feed(engine, [stats(260, 1, 55.0)]), "inference_stalled")
    assert brief(out) == [("inference_stalled", "resolved", 260.0)]
    engine = make_engine()
    feed(engine, by_ts(beats(VLLM, 0, 100), [stats(0, 1, 0.0)]))
    # beats stop at 100: lost at 160, before stalled_for ripens at 180
    assert of_rule(engine.advance(1000), "inference_stalled") == []

"""RunState: folding events into what the rules read, including late and reordered events."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import ROLLOUT, TRAINER, VLLM, decoded, make_event
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.stream.state.processes import process_id
from runwatch.stream.state.restarts import Slot
from runwatch.stream.state.run import RunState, StateConfig


def fold(state: RunState, *events: dict[str, Any]) -> RunState:
    for event in events:
        state.apply(decoded(event))
    return state


@pytest.fixture
def state() -> RunState:
    return RunState("r1", StateConfig(watched_metrics=frozenset({"reward"})))


# --- the run ---------------------------------------------------------------------------------


def test_clock_is_the_largest_ts_and_late_events_do_not_move_it(state: RunState) -> None:
    fold(state, make_event("heartbeat", 50), make_event("heartbeat", 20))
    assert state.clock == 50
    assert state.first_ts == 20
    assert state.events == 2


def test_run_started_keeps_the_earliest_start_labels_and_total_steps(state: RunState) -> None:
    fold(
        state,
        make_event("run.started", 10, labels={"team": "rl"}, total_steps=100),
        make_event("run.started", 5, labels={"model": "q"}),
    )
    assert state.started_ts == 5
    assert state.labels == {"team": "rl", "model": "q"}
    assert state.total_steps == 100
    assert not state.finished


def test_run_finished_records_status_and_clears_pending(state: RunState) -> None:
    fold(
        state,
        make_event("trajectory.started", 1, src=ROLLOUT, traj="a"),
        make_event("trajectory.started", 2, src=ROLLOUT, traj="b"),
        make_event("run.finished", 10, status="killed"),
    )
    assert state.finished
    assert (state.status, state.finished_ts) == ("killed", 10)
    assert state.inference.pending == {}
    assert state.inference.pending_since is None
    # nothing starts waiting after the end
    fold(state, make_event("trajectory.started", 11, src=ROLLOUT, traj="c"))
    assert state.inference.pending == {}


def test_watched_arrivals_keep_the_latest_ts_per_component_and_kind() -> None:
    state = RunState("r1", StateConfig(watched_arrivals=frozenset({("trainer", "step.done")})))
    fold(
        state,
        make_event("step.done", 30, step=2),
        make_event("step.done", 10, step=1),  # late
        make_event("step.done", 40, src=ROLLOUT, step=3),  # another component
        make_event("heartbeat", 50),  # another kind
    )
    assert state.last_arrival == {("trainer", "step.done"): 30}


def test_unknown_kinds_count_but_change_nothing_else(state: RunState) -> None:
    fold(state, make_event("custom.thing", 7, cmd="ls"))
    assert (state.events, state.clock) == (1, 7)
    assert state.processes.by_id == {}
    assert state.steps.by_number == {}


# --- heartbeats --------------------------------------------------------------------------------


def test_process_id_names_component_host_and_pid_or_instance() -> None:
    src = decoded(make_event("heartbeat", 0, src=VLLM)).src
    assert process_id(src) == "inference@node-2/vllm-0"
    assert process_id(decoded(make_event("heartbeat", 0, src=TRAINER)).src) == "trainer@node-0/100"
    bare = decoded(make_event("heartbeat", 0, src={"component": "sandbox"})).src
    assert process_id(bare) == "sandbox@?"


def test_heartbeats_keep_the_latest_beat_and_late_ones_change_nothing(state: RunState) -> None:
    fold(state, make_event("heartbeat", 10), make_event("heartbeat", 20))
    fold(state, make_event("heartbeat", 15, final=True))  # late: the process beat again after
    (proc,) = state.processes.by_id.values()
    assert proc.last_beat == 20
    assert not proc.final
    assert proc.lost_at(60) == 80
    assert proc.alive(79.9, 60)
    assert not proc.alive(80, 60)


def test_final_heartbeat_means_a_clean_exit_that_cannot_be_lost(state: RunState) -> None:
    fold(state, make_event("heartbeat", 10), make_event("heartbeat", 20, final=True))
    (proc,) = state.processes.by_id.values()
    assert proc.final
    assert proc.lost_at(60) is None
    assert not proc.alive(21, 60)
    # a later beat: the process (or its replacement) is back
    fold(state, make_event("heartbeat", 30))
    assert not proc.final
    assert proc.lost_at(60) == 90


def test_processes_are_told_apart_by_host_pid_and_instance(state: RunState) -> None:
    fold(
        state,
        make_event("heartbeat", 1, pid=1),
        make_event("heartbeat", 1, pid=2),
        make_event("heartbeat", 1, host="node-9", pid=1),
        make_event("heartbeat", 1, src=VLLM),
    )
    assert len(state.processes.by_id) == 4


def test_a_process_that_never_beat_is_presumed_alive(state: RunState) -> None:
    fold(state, make_event("inference.stats", 0, src=VLLM, server="v", running=0, waiting=0))
    (proc,) = state.processes.by_id.values()
    assert proc.last_beat is None
    assert proc.lost_at(60) is None
    assert proc.alive(1e9, 60)


# --- inference servers and trajectories --------------------------------------------------------


def stats(ts: float, running: int, waiting: int = 0, server: str = "vllm-0") -> dict[str, Any]:
    return make_event(
        "inference.stats", ts, src=VLLM, server=server, running=running, waiting=waiting
    )


def test_a_late_server_snapshot_is_ignored(state: RunState) -> None:
    fold(state, stats(10, running=4), stats(20, running=0), stats(15, running=7))
    srv = state.inference.servers["vllm-0"]
    assert (srv.stats_ts, srv.running, srv.idle) == (20, 0, True)


def test_a_snapshot_stands_until_replaced(state: RunState) -> None:
    fold(state, stats(10, running=0, waiting=3))
    fold(state, *(make_event("heartbeat", t, src=VLLM) for t in (20, 30, 40)))
    srv = state.inference.servers["vllm-0"]
    assert (srv.waiting, srv.idle) == (3, False)


def test_without_stats_a_server_is_idle_when_no_request_is_in_flight(state: RunState) -> None:
    fold(
        state,
        make_event("request.queued", 1, src=ROLLOUT, req="a", server="sg-0"),
        make_event("request.queued", 2, src=ROLLOUT, req="b", server="sg-0"),
        make_event("request.done", 3, src=ROLLOUT, req="a", server="sg-0"),
    )
    srv = state.inference.servers["sg-0"]
    assert srv.in_flight == {"b"}
    assert not srv.idle
    fold(state, make_event("request.done", 4, src=ROLLOUT, req="b", server="sg-0"))
    assert srv.idle


def test_servers_share_one_empty_set_of_requests_until_they_have_one(state: RunState) -> None:
    """A server that reports stats never has a request in flight: it holds the one shared
    empty set (`NO_REQUESTS`); the first request gets a set of its own, a done request
    before any queued one changes nothing, and the shared set stays empty."""
    from runwatch.stream.state.inference import NO_REQUESTS

    fold(state, make_event("heartbeat", 0, src=VLLM), stats(1, running=0),
         make_event("request.done", 1, src=ROLLOUT, req="x", server="sg-0"))  # fmt: skip
    assert state.inference.servers["vllm-0"].in_flight is NO_REQUESTS
    srv = state.inference.servers["sg-0"]
    assert srv.in_flight is NO_REQUESTS
    assert srv.idle
    fold(state, make_event("request.queued", 2, src=ROLLOUT, req="a", server="sg-0"),
         make_event("request.done", 3, src=ROLLOUT, req="a", server="sg-0"),
         make_event("request.queued", 4, src=ROLLOUT, req="b", server="sg-0"))  # fmt: skip
    assert srv.in_flight == {"b"}
    assert not srv.idle
    assert not NO_REQUESTS  # (what was added went into the server's own set)


def test_the_ledger_keeps_one_string_per_name_of_its_processes(state: RunState) -> None:
    """Every beat decodes its source's names anew; the ledger keeps one object per name
    (`shared`), not one per process -- and never the event's own string."""
    ranks = [{**TRAINER, "pid": 100 + r, "rank": r} for r in range(4)]
    events = [decoded(make_event("heartbeat", 10 + r, src=src)) for r, src in enumerate(ranks)]
    for event in events:
        state.apply(event)
    keys = list(state.ledger)
    assert len(keys) == 4
    assert all(k[0] is keys[0][0] and k[1] is keys[0][1] for k in keys)
    procs = [known[0] for known in state.ledger.values()]
    assert all(p.host is keys[0][1] and p.component is keys[0][0] for p in procs)
    assert all(keys[0][1] is not e.src.host for e in events)


def test_a_final_heartbeat_takes_a_server_out_of_the_picture(state: RunState) -> None:
    fold(state, make_event("heartbeat", 0, src=VLLM), stats(1, running=0))
    assert state.inference.live_servers() == [state.inference.servers["vllm-0"]]
    fold(state, make_event("heartbeat", 5, src=VLLM, final=True))
    assert state.inference.live_servers() == []


def test_pending_trajectories_and_their_phases(state: RunState) -> None:
    fold(
        state,
        make_event("trajectory.started", 10, src=ROLLOUT, traj="a", step=3),
        make_event("trajectory.started", 12, src=ROLLOUT, traj="b", step=3),
        make_event("trajectory.phase", 20, src=ROLLOUT, traj="a", phase="sandbox"),
        make_event("trajectory.phase", 15, src=ROLLOUT, traj="a", phase="tool"),  # late
        make_event("trajectory.phase", 30, src=ROLLOUT, traj="zz", phase="reward"),  # unknown
    )
    inf = state.inference
    assert set(inf.pending) == {"a", "b"}
    assert inf.pending_since == 10
    a, b = inf.pending["a"], inf.pending["b"]
    assert (a.phase, a.phase_since, a.started, a.step) == ("sandbox", 20, 10, 3)
    assert (b.phase, b.phase_since) == ("generate", 12)
    assert inf.started_in_step(3) == 2
    fold(state, make_event("trajectory.done", 40, src=ROLLOUT, traj="a", status="ok"))
    assert set(inf.pending) == {"b"}
    assert inf.pending_since == 10
    fold(state, make_event("trajectory.done", 41, src=ROLLOUT, traj="b", status="error"))
    assert inf.pending == {}
    assert inf.pending_since is None


def test_a_started_that_arrives_after_its_done_is_ignored(state: RunState) -> None:
    fold(
        state,
        make_event("trajectory.done", 20, src=ROLLOUT, traj="a", status="ok"),
        make_event("trajectory.started", 10, src=ROLLOUT, traj="a"),
    )
    assert state.inference.pending == {}


def test_the_last_ended_trajectories_are_remembered_and_older_ones_let_go(
    state: RunState,
) -> None:
    """A ring of ENDED_MEMORY digests: a late `started` of any of the latest is ignored, one
    of an id that ended longer ago starts a trajectory again (bounded memory per run)."""
    memory = state.inference.ENDED_MEMORY
    fold(state, *(make_event("trajectory.done", i, src=ROLLOUT, traj=f"t{i}", status="ok")
                  for i in range(memory + 1)))  # fmt: skip
    assert [state.inference.has_ended(f"t{i}") for i in (0, 1, memory)] == [False, True, True]
    assert not state.inference.has_ended("never")
    fold(state, make_event("trajectory.started", 500, src=ROLLOUT, traj=f"t{memory}"),
         make_event("trajectory.started", 501, src=ROLLOUT, traj="t0"))  # fmt: skip
    assert list(state.inference.pending) == ["t0"]


def test_a_duplicate_started_does_not_reset_the_trajectory(state: RunState) -> None:
    fold(
        state,
        make_event("trajectory.started", 10, src=ROLLOUT, traj="a"),
        make_event("trajectory.phase", 20, src=ROLLOUT, traj="a", phase="tool"),
        make_event("trajectory.started", 30, src=ROLLOUT, traj="a"),
    )
    t = state.inference.pending["a"]
    assert (t.started, t.phase) == (10, "tool")


def test_idle_with_pending_begins_and_ends_with_the_condition(state: RunState) -> None:
    inf = state.inference
    fold(state, stats(0, running=0))
    assert inf.idle_since is None  # nothing pending: idle is fine
    fold(state, make_event("trajectory.started", 10, src=ROLLOUT, traj="a"))
    assert inf.idle_since == 10
    fold(state, stats(20, running=1))
    assert inf.idle_since is None
    fold(state, stats(30, running=0))
    assert inf.idle_since == 30
    fold(state, make_event("trajectory.done", 50, src=ROLLOUT, traj="a", status="ok"))
    assert inf.idle_since is None


def test_every_server_must_be_idle(state: RunState) -> None:
    fold(
        state,
        stats(0, running=0, server="a"),
        stats(0, running=2, server="b"),
        make_event("trajectory.started", 10, src=ROLLOUT, traj="t"),
    )
    assert not state.inference.all_idle_with_pending()
    fold(state, stats(20, running=0, server="b"))
    assert state.inference.idle_since == 20


def test_no_server_seen_means_never_idle(state: RunState) -> None:
    fold(state, make_event("trajectory.started", 10, src=ROLLOUT, traj="t"))
    assert state.inference.servers == {}
    assert not state.inference.all_idle_with_pending()
    assert state.inference.idle_since is None


# --- progress counters -------------------------------------------------------------------------


def progress(ts: float, n: int, total: int | None = None, name: str = "bar") -> dict[str, Any]:
    return make_event("progress", ts, src=ROLLOUT, name=name, n=n, total=total)


def counter(state: RunState, name: str = "bar") -> Any:
    return state.progress.by_key[("rollout", name)]


def test_progress_advances_learn_the_pace(state: RunState) -> None:
    fold(state, progress(0, 0, 10))
    c = counter(state)
    assert (c.advances, c.pace()) == (0, None)
    fold(state, progress(10, 1))
    assert (c.advances, c.pace()) == (1, None)  # one interval is not a pace yet
    fold(state, progress(30, 2), progress(40, 3))
    assert c.advances == 3
    assert list(c.intervals) == [10, 20, 10]
    assert c.pace() == 10
    assert (c.n, c.total, c.last_advance, c.last_update) == (3, 10, 40, 40)


def test_progress_update_without_advance_is_not_an_advance(state: RunState) -> None:
    fold(state, progress(0, 0), progress(10, 1), progress(50, 1))
    c = counter(state)
    assert (c.advances, c.last_advance, c.last_update) == (1, 10, 50)


def test_progress_restart_learns_the_pace_afresh(state: RunState) -> None:
    fold(state, progress(0, 0), progress(10, 5), progress(20, 10))
    c = counter(state)
    assert c.pace() == 10
    fold(state, progress(100, 2, total=50))  # smaller n, later ts: a new bar
    assert (c.n, c.total, c.advances, c.pace()) == (2, 50, 0, None)
    assert (c.last_advance, c.last_update) == (100, 100)
    assert list(c.intervals) == []
    fold(state, progress(200, 3), progress(400, 4))
    assert c.pace() == 150


def test_progress_late_arrival_changes_nothing(state: RunState) -> None:
    fold(state, progress(0, 0), progress(10, 5), progress(20, 10))
    fold(state, progress(15, 7))  # smaller n, earlier ts: late
    c = counter(state)
    assert (c.n, c.advances, c.last_advance, c.last_update) == (10, 2, 20, 20)
    assert c.pace() == 10


def test_progress_complete_and_counters_per_component_and_name(state: RunState) -> None:
    fold(state, progress(0, 511, 512), progress(1, 512), progress(1, 3, name="other"))
    fold(state, make_event("progress", 1, name="bar", n=1))  # the trainer's bar of that name
    assert counter(state).complete
    assert not counter(state, "other").complete
    assert set(state.progress.by_key) == {
        ("rollout", "bar"),
        ("rollout", "other"),
        ("trainer", "bar"),
    }


# --- ranks ---------------------------------------------------------------------------------------


def rank(ts: float, r: int, phase: str, since: float | None = None, **kw: Any) -> dict[str, Any]:
    return make_event("rank.status", ts, rank=r, world_size=4, phase=phase, since=since, **kw)


def test_rank_phase_change_without_since_happens_at_the_first_status_showing_it(
    state: RunState,
) -> None:
    fold(state, rank(10, 0, "forward"), rank(20, 0, "forward"), rank(30, 0, "backward"))
    fold(state, rank(40, 0, "backward"))
    r = state.ranks.by_rank[0]
    assert (r.phase, r.changed_at, r.last_ts) == ("backward", 30, 40)


def test_rank_phase_change_with_since_happens_at_since(state: RunState) -> None:
    fold(state, rank(10, 0, "forward", since=8), rank(30, 0, "all_reduce", since=25))
    r = state.ranks.by_rank[0]
    assert (r.phase, r.changed_at) == ("all_reduce", 25)
    # the same phase entered again (the next all_reduce) counts as a change
    fold(state, rank(50, 0, "all_reduce", since=45))
    assert r.changed_at == 45
    assert state.ranks.last_change() == 45


def test_a_late_rank_status_is_ignored(state: RunState) -> None:
    fold(state, rank(30, 1, "recv", step=7), rank(20, 1, "forward", step=6))
    r = state.ranks.by_rank[1]
    assert (r.phase, r.changed_at, r.step) == ("recv", 30, 7)


def test_ranks_phases_and_missing(state: RunState) -> None:
    fold(
        state,
        rank(1, 0, "recv"),
        rank(1, 2, "destroy_process_group"),
        rank(2, 1, "recv"),
    )
    assert state.ranks.world_size == 4
    assert state.ranks.phases() == {"recv": [0, 1], "destroy_process_group": [2]}
    assert state.ranks.missing() == [3]
    assert state.ranks.last_change() == 2


# --- steps: rewards, metrics and GPU-idle gaps ---------------------------------------------------


def test_step_timings_rewards_and_watched_metrics(state: RunState) -> None:
    fold(
        state,
        make_event("step.started", 100, step=1),
        make_event("step.done", 160, step=1),
        make_event("step.started", 160, step=2),
        make_event("step.done", 200, step=2, duration_s=38.5),
        make_event("step.metrics", 161, step=1, metrics={"reward": 0.5, "loss": 1.0}),
        make_event("reward", 210, step=2, mean=0.25),
    )
    one, two = state.steps.by_number[1], state.steps.by_number[2]
    assert (one.duration, two.duration) == (60, 38.5)
    assert dict(one.metrics.items()) == {"reward": 0.5}  # only watched keys are kept
    assert one.reward(["reward"]) == 0.5
    assert two.reward(["reward"]) == 0.25
    assert (one.metrics_ts, two.reward_ts) == (161, 210)
    assert state.steps.latest == 2
    assert state.steps.last_done is two


def test_reward_event_wins_over_metrics(state: RunState) -> None:
    fold(
        state,
        make_event("step.metrics", 1, step=1, metrics={"reward": 0.0}),
        make_event("reward", 2, step=1, mean=0.75),
    )
    assert state.steps.by_number[1].reward(["reward"]) == 0.75


def test_non_finite_values_are_recorded_with_when_they_were_reported(state: RunState) -> None:
    fold(
        state,
        make_event("step.metrics", 10, step=1, metrics={"a": 1.0, "b": None}),
        make_event("step.metrics", 20, step=1, metrics={"loss": float("nan")}),
        make_event("reward", 30, step=1, mean=float("-inf")),
    )
    step = state.steps.by_number[1]
    assert step.nonfinite == ["loss", "reward.mean"]
    assert step.nonfinite_ts == 20


def test_a_later_metrics_event_of_a_step_adds_to_and_replaces_its_values() -> None:
    state = RunState("r1", StateConfig(watched_metrics=frozenset({"a", "b", "c"})))
    fold(state, make_event("step.metrics", 1, step=1, metrics={"a": 1.0, "b": 2.0, "z": 9.0}),
         make_event("step.metrics", 2, step=1, metrics={"b": 3.0, "c": None}))  # fmt: skip
    metrics = state.steps.by_number[1].metrics
    assert dict(metrics.items()) == {"a": 1.0, "b": 3.0, "c": None}
    assert (metrics.get("a"), metrics.get("b"), metrics.get("z")) == (1.0, 3.0, None)


def test_only_the_last_steps_are_kept() -> None:
    state = RunState("r1", StateConfig(keep_steps=3))
    fold(state, *(make_event("step.done", i, step=i) for i in range(10)))
    assert sorted(state.steps.by_number) == [7, 8, 9]
    assert [s.number for s in state.steps.recent(2)] == [8, 9]


def test_steps_past_keep_hold_only_their_watched_metrics_up_to_metric_steps() -> None:
    """Past the latest `keep_steps`, a step keeps its number, watched metrics and their time
    (a spike rule's baseline, `metric_steps`) and nothing else; past `metric_steps`, none."""
    cfg = StateConfig(keep_steps=3, metric_steps=6, watched_metrics=frozenset({"loss"}))
    state = RunState("r1", cfg)
    for i in range(10):
        fold(state, make_event("step.started", 100 * i, step=i),
             make_event("step.done", 100 * i + 50, step=i, duration_s=50.0),
             make_event("step.metrics", 100 * i + 60, step=i, metrics={"loss": float(i)}),
             make_event("reward", 100 * i + 70, step=i, mean=0.5))  # fmt: skip
    steps = state.steps
    assert list(steps.by_number) == [4, 5, 6, 7, 8, 9]
    assert [type(s).__name__ for s in steps.recent(6)] == ["PastStep"] * 3 + ["Step"] * 3
    assert [s.metrics.get("loss") for s in steps.recent(6)] == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    past = steps.by_number[5]
    assert (past.number, past.metrics_ts) == (5, 560)
    assert (past.started, past.done, past.duration, past.reward_mean, past.gap) == (
        None, None, None, None, 0.0)  # fmt: skip
    assert past.reward(["loss"]) == 5.0
    assert past.degenerate(0.0) == (0, 0)
    assert [s.number for s in steps.recent(steps.keep)] == [7, 8, 9]
    assert all(s.done is not None for s in steps.recent(steps.keep))


def test_a_late_event_of_a_past_step_makes_it_whole_again() -> None:
    cfg = StateConfig(keep_steps=2, metric_steps=5, watched_metrics=frozenset({"loss"}))
    state = RunState("r1", cfg)
    for i in range(5):
        fold(state, make_event("step.metrics", 10 * i, step=i, metrics={"loss": float(i)}))
    assert type(state.steps.by_number[1]).__name__ == "PastStep"
    fold(state, make_event("reward", 60, step=1, mean=0.25))
    step = state.steps.by_number[1]
    assert (type(step).__name__, step.reward_mean, step.metrics.get("loss"), step.metrics_ts) == (
        "Step", 0.25, 1.0, 10)  # fmt: skip
    assert list(state.steps.by_number) == [0, 1, 2, 3, 4]


def test_a_step_leaving_the_latest_keep_is_a_change_to_what_the_rules_read() -> None:
    """Rules over the done steps' groups re-read when `settled` moves (degenerate_groups):
    a step that becomes past leaves what they read."""
    state = RunState("r1", StateConfig(keep_steps=2, metric_steps=10))
    fold(state, make_event("step.started", 1, step=1), make_event("step.started", 2, step=2))
    before = state.steps.settled
    fold(state, make_event("step.started", 3, step=3))
    assert state.steps.settled > before


def test_past_steps_come_back_from_a_checkpoint() -> None:
    """A checkpoint's restricted unpickler builds `PastStep`s: they come back as they were,
    and a later step makes the oldest whole step past as before."""
    from runwatch.stream import checkpoint
    from runwatch.stream.live import LiveDriver

    driver = LiveDriver()
    for i in range(60):
        driver.engine.apply(decoded(make_event("step.metrics", 60.0 * i, step=i,
                                               metrics={"actor/grad_norm": 1.0 + i})))  # fmt: skip
    restored = LiveDriver()
    checkpoint.load(checkpoint.dump(driver, 0), restored)
    held, back = driver.engine.runs["r1"].state.steps, restored.engine.runs["r1"].state.steps
    assert [(type(s).__name__, s.number, s.metrics.items(), s.metrics_ts)
            for s in back.by_number.values()] == [
        (type(s).__name__, s.number, s.metrics.items(), s.metrics_ts)
        for s in held.by_number.values()]  # fmt: skip
    assert (back.keep, back.depth) == (23, 53)
    for steps in (held, back):
        steps.get(60)
    assert [type(s).__name__ for s in back.by_number.values()] == [
        type(s).__name__ for s in held.by_number.values()]  # fmt: skip


def test_the_spike_rules_keep_their_baseline_as_past_steps() -> None:
    from runwatch.stream.config import RulesConfig

    cfg = RulesConfig.from_mapping({}).state_config()
    assert (cfg.keep_steps, cfg.metric_steps) == (23, 53)  # step_slowdown's; spike's 50 + 3


def test_phase_timings_are_kept_for_the_latest_timing_steps_only() -> None:
    """Most of a kept step's size is its `timing`; only step_slowdown reads it, over its
    window: older steps let theirs go, and without the rule no step keeps one."""
    done = [make_event("step.done", i, step=i, timing={"gen": 1.0 + i, "update": 2.0})
            for i in range(10)]  # fmt: skip
    state = fold(RunState("r1", StateConfig(keep_steps=8, timing_steps=3)), *done)
    kept = {n: s.timing and dict(s.timing.items()) for n, s in state.steps.by_number.items()}
    assert kept == {2: None, 3: None, 4: None, 5: None, 6: None,
                    7: {"gen": 8.0, "update": 2.0}, 8: {"gen": 9.0, "update": 2.0},
                    9: {"gen": 10.0, "update": 2.0}}  # fmt: skip
    without = fold(RunState("r1", StateConfig(keep_steps=8)), *done)
    assert all(s.timing is None for s in without.steps.by_number.values())


def test_the_rules_in_force_decide_how_many_steps_keep_their_timing() -> None:
    from runwatch.stream.config import RulesConfig

    assert RulesConfig.from_mapping({}).state_config().timing_steps == 23  # window 20 + 3
    off = RulesConfig.from_mapping({"rules": {"step_slowdown": {"enabled": False}}})
    assert off.state_config().timing_steps == 0


def test_idle_spans_are_attributed_to_the_steps_open_during_them(state: RunState) -> None:
    fold(
        state,
        make_event("step.started", 0, step=1),
        stats(1, running=3),
        make_event("trajectory.started", 1, src=ROLLOUT, traj="a", step=1),
        stats(10, running=0),  # idle while `a` waits: 10..40
        make_event("trajectory.done", 40, src=ROLLOUT, traj="a", status="ok"),
        make_event("step.done", 45, step=1),
    )
    assert state.steps.by_number[1].gap == 30


def test_an_idle_span_open_at_step_done_counts_up_to_the_done(state: RunState) -> None:
    fold(
        state,
        make_event("step.started", 0, step=1),
        stats(1, running=0),
        make_event("trajectory.started", 5, src=ROLLOUT, traj="a", step=1),  # idle from 5
        make_event("step.done", 50, step=1),
        make_event("step.started", 60, step=2),
        make_event("trajectory.done", 80, src=ROLLOUT, traj="a", status="ok"),  # idle ends
        make_event("step.done", 100, step=2),
    )
    one, two = state.steps.by_number[1], state.steps.by_number[2]
    assert one.gap == 45  # 5..50, not counted again when the span ends
    assert two.gap == 20  # 60..80: from its own start
    assert state.inference.idle_since is None


def test_idle_spans_add_up_within_a_step_and_skip_steps_done_before(state: RunState) -> None:
    fold(
        state,
        make_event("step.started", 0, step=1),
        make_event("step.done", 5, step=1),
        make_event("step.started", 6, step=2),
        stats(7, running=0),
        make_event("trajectory.started", 10, src=ROLLOUT, traj="a"),
        make_event("trajectory.done", 20, src=ROLLOUT, traj="a", status="ok"),
        make_event("trajectory.started", 30, src=ROLLOUT, traj="b"),
        stats(35, running=1),
        make_event("trajectory.done", 40, src=ROLLOUT, traj="b", status="ok"),
        make_event("step.done", 50, step=2),
    )
    assert state.steps.by_number[1].gap == 0
    assert state.steps.by_number[2].gap == 15  # 10..20 and 30..35


def test_reconfigure_changes_what_is_kept(state: RunState) -> None:
    state.reconfigure(
        StateConfig(watched_metrics=frozenset({"x"}), keep_steps=2, progress_window=3)
    )
    fold(
        state,
        *(
            make_event("step.metrics", i, step=i, metrics={"x": 1.0, "reward": 0.0})
            for i in range(4)
        ),
    )
    assert sorted(state.steps.by_number) == [2, 3]
    assert dict(state.steps.by_number[3].metrics.items()) == {"x": 1.0}
    fold(state, make_event("progress", 5, name="rollout", n=1, total=8))  # its first bar
    assert state.progress.window == 3
    assert state.progress.by_key["trainer", "rollout"].intervals.maxlen == 3


@given(st.lists(st.tuples(st.integers(1, 20), st.integers(0, 30), st.booleans()), max_size=60))
def test_a_slots_newest_pid_is_the_one_that_beat_first_last(
    beats: list[tuple[int, int, bool]],
) -> None:
    """`Slot.newest` is kept as pids come (no sort a beat): it is always the pid whose first
    beat is the latest, None when two share it -- whatever the order, ties, `final`, evicted
    pids."""
    slot = Slot()
    for pid, ts, final in beats:
        slot.beat(pid, float(ts), final)
        firsts = sorted(first for first, _ in slot.pids.values())
        latest = [pid for pid, (first, _) in slot.pids.items() if first == firsts[-1]]
        assert slot.newest == (latest[0] if len(latest) == 1 else None)


def _folded(state: RunState) -> Any:
    """What a run's heartbeats leave that anything reads: each process's beat record and
    each slot's pids, first and last beats, `final` pids and newest."""
    procs = {n: (p.last_beat, p.final, p.dropped, p.dropped_at)
             for n, p in state.processes.by_id.items()}  # fmt: skip
    slots = {n: (dict(s.pids), s.final, s.newest) for n, s in state.restarts.slots.items()}
    return procs, slots, state.restarts.shared, state.processes.dropping


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["n0", None, "?"]),
                          st.one_of(st.integers(1, 3), st.integers(1, 24)),
                          st.integers(-2, 6), st.booleans(), st.integers(0, 2)),
                max_size=150))  # fmt: skip
def test_a_routine_beat_folds_what_the_long_way_folds(
    beats: list[tuple[str | None, int, int, bool, int]],
) -> None:
    """The short way of a routine beat (`RunState._heartbeat`, its ledger keeping each pid's
    list of its slot) leaves the state the long way (`EveryBeatInFull`) leaves: with more
    pids than a slot keeps (a pid let go and heard again), hosts whose slot names collide
    (None and "?"), late, `final` and dropping beats."""
    from runwatch.stream.state.run import EveryBeatInFull

    fast, full = RunState("r"), EveryBeatInFull("r")
    ts = 1_800_000_000.0
    routine = 0
    for host, pid, step, final, dropped in beats:
        ts += step  # (mostly forward; a step back is a late beat)
        src = {"component": "rollout", "host": host, "pid": pid}
        event = decoded(make_event("heartbeat", ts, src=src, final=(final and pid % 3 == 0) or None,
                                   dropped_events=dropped if dropped == 2 else None))  # fmt: skip
        fast.apply(event)
        full.apply(event)
        routine += fast.postponed is not None and fast.postponed != float("inf")
        assert _folded(fast) == _folded(full)


def test_a_pid_let_go_of_and_heard_again_is_not_folded_into_its_old_record() -> None:
    """Two ledger keys of one slot and pid (hosts None and "?" name one slot): the pid is let
    go of when the slot keeps too many, comes back under the other key, then beats under
    the first -- whose ledger still holds the old record, which must not take the beat."""
    from runwatch.stream.state.restarts import KEEP
    from runwatch.stream.state.run import EveryBeatInFull

    def beat(host: str | None, pid: int, ts: float) -> Any:
        src = {"component": "rollout", "host": host, "pid": pid}
        return decoded(make_event("heartbeat", 1_800_000_000.0 + ts, src=src))

    fast, full = RunState("r"), EveryBeatInFull("r")
    events = [beat(None, 1, 0), *(beat(None, pid, pid) for pid in range(2, KEEP + 2)),
              beat("?", 1, 40), beat(None, 1, 41), beat(None, 1, 50)]  # fmt: skip
    for event in events:
        fast.apply(event)
        full.apply(event)
        assert _folded(fast) == _folded(full)
    assert fast.restarts.slots["rollout@?"].pids[1] == [1_800_000_040.0, 1_800_000_050.0]


def test_a_slot_of_one_pid_holds_it_without_a_dict() -> None:
    """Most slots only ever see one pid: it is kept inline (`one`, `span`), the list the
    heartbeat ledger holds too; a second pid brings the dict, with the same lists, and the
    restart is told as before."""
    state = RunState("r1")
    fold(state, *(make_event("heartbeat", 1_800_000_000.0 + t) for t in (0, 10, 20)))
    (slot,) = state.restarts.slots.values()
    ((_, _, seen),) = state.ledger.values()
    assert (slot.many, slot.one, slot.newest) == (None, 100, 100)
    assert slot.span is seen
    assert slot.pids == {100: [1_800_000_000.0, 1_800_000_020.0]}
    assert slot.pids[100] is seen
    later = {**TRAINER, "pid": 101}
    fold(state, make_event("heartbeat", 1_800_000_200.0, src=later))
    assert slot.many is not None
    assert (slot.one, slot.span, slot.newest) == (None, None, 101)
    assert slot.many[100] is seen
    assert slot.restarts() == [1_800_000_200.0]


#: a stream of a run's inference events: two servers' snapshots (busy or idle, some late)
#: and trajectories starting and ending
_IDLE_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("stats"),
            st.sampled_from(["vllm-0", "vllm-1"]),
            st.integers(0, 2),
            st.integers(0, 1),
            st.floats(-5, 0),
        ),
        st.tuples(st.just("started"), st.integers(0, 3)),
        st.tuples(st.just("done"), st.integers(0, 3)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=_IDLE_STEPS)
def test_the_idle_condition_is_up_to_date_after_every_event(steps: list[Any]) -> None:
    """`idle_since` is set exactly while every server is idle with work pending, after every
    event -- snapshots that leave each server's idleness as it was included, which do not
    judge the condition again."""
    state = RunState("r1")
    for n, step in enumerate(steps):
        ts = 1000.0 + n
        if step[0] == "stats":
            _, server, running, waiting, late = step
            event = make_event("inference.stats", ts + late, src={**VLLM, "instance": server},
                               server=server, running=running, waiting=waiting)  # fmt: skip
        else:
            kind = "trajectory.started" if step[0] == "started" else "trajectory.done"
            more = {"status": "ok"} if step[0] == "done" else {}
            event = make_event(kind, ts, src=ROLLOUT, traj=f"t{step[1]}", **more)
        state.apply(decoded(event))
        inference = state.inference
        assert (inference.idle_since is not None) == inference.all_idle_with_pending()

"""`degenerate_groups` (warning): most GRPO prompt groups have rewards that are all equal for
several steps -- zero advantage, nothing learned. Counted from the trajectories' `group` and
`reward`; quiet on healthy groups, a near miss, and steps with too few groups."""

from __future__ import annotations

import random
from typing import Any

from helpers import brief, feed, make_engine, make_event

from runwatch.emitters import Emitter

RULE = "degenerate_groups"
ROLLOUT = {"component": "rollout", "host": "node-0", "pid": 7}


def mine(alerts: list[Any]) -> list[tuple[str, str, float]]:
    return [b for b in brief(alerts) if b[0] == RULE]


def step(number: int, degenerate: float, groups: int = 8, size: int = 4,
         seed: int = 0, on_done: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """One step: `groups` prompt groups of `size` trajectories, the first `degenerate`
    fraction of them all 0 or all 1, the rest mixed; then step.done."""
    rng = random.Random(f"{seed}/{number}")
    t0 = 100.0 * number
    out = []
    for g in range(groups):
        same = g < round(degenerate * groups)
        level = rng.choice((0.0, 1.0))
        for k in range(size):
            traj = f"s{number}-g{g}-{k}"
            reward = level if same else float(k % 2)
            fields = {"group": f"p{g}", "step": number} if on_done else {}
            started = {} if on_done else {"group": f"p{g}", "step": number}
            out.append(make_event("trajectory.started", t0 + 1, src=ROLLOUT, traj=traj, **started))
            out.append(make_event("trajectory.done", t0 + 50, src=ROLLOUT, traj=traj,
                                  status="ok", reward=reward, **fields))  # fmt: skip
    out.append(make_event("step.done", t0 + 90, step=number))
    return out


def run(fractions: list[float], **kw: Any) -> list[dict[str, Any]]:
    return [e for n, f in enumerate(fractions, 1) for e in step(n, f, **kw)]


def test_most_groups_degenerate_for_five_steps_fires_and_then_resolves() -> None:
    engine = make_engine()
    out = feed(engine, run([0.25, 0.25, 0.875, 0.875, 1.0, 0.875, 0.875]))
    assert mine(out) == [(RULE, "firing", 790.0)]  # steps 3-7; step 7 done at 790
    (alert,) = [a for a in out if a.rule == RULE]
    assert alert.details["first_step"] == 3
    assert alert.details["groups"] == 8
    assert alert.details["series"]["5"] == 1.0
    assert "of 8 prompt groups in step 7 have rewards that are all equal" in alert.summary
    assert mine(feed(engine, step(8, 0.25))) == [(RULE, "resolved", 890.0)]


def test_groups_named_only_on_the_done_events_count_too() -> None:
    out = feed(make_engine(), run([1.0] * 5, on_done=True))
    assert [s for _, s, _ in mine(out)] == ["firing"]


def test_healthy_groups_a_near_miss_and_small_steps_stay_quiet() -> None:
    engine = make_engine()
    healthy = run([0.25, 0.5, 0.375] * 10)
    near = [e for n in range(31, 36) for e in step(n, 0.75)]  # 6 of 8: below 80%
    small = [e for n in range(36, 46) for e in step(n, 1.0, groups=3)]  # under min_groups
    assert mine(feed(engine, healthy + near + small)) == []


def test_the_rollout_helper_carries_the_group(tmp_path: Any) -> None:
    from helpers import read_events

    em = Emitter(run="r1", component="rollout", path=tmp_path, heartbeat=False)
    with em.trajectory("t0", step=3, group="p7") as t:
        t.reward = 1.0
    em.close()
    events = {e["kind"]: e for e in read_events(tmp_path)}
    assert events["trajectory.started"]["group"] == "p7"
    assert (events["trajectory.done"]["group"], events["trajectory.done"]["step"]) == ("p7", 3)


def test_a_trajectory_done_twice_is_counted_once() -> None:
    """Groups of one trajectory judge nothing -- also when each `done` arrives twice."""
    events = []
    for n in range(1, 8):
        for g in range(8):
            traj = f"s{n}-g{g}"
            events.append(make_event("trajectory.started", 100.0 * n, src=ROLLOUT, traj=traj,
                                     step=n, group=f"p{g}"))  # fmt: skip
            events += [make_event("trajectory.done", 100.0 * n + 1, src=ROLLOUT, traj=traj,
                                  status="ok", reward=0.0, group=f"p{g}", step=n)
                       for _ in range(2)]  # fmt: skip
        events.append(make_event("step.done", 100.0 * n + 2, step=n))
    assert mine(feed(make_engine(), events)) == []


def test_the_remembered_streak_is_the_one_counted_afresh() -> None:
    """The rule re-reads the steps only when what done steps say about their groups moved
    (`Steps.settled`): after every event of a long run with late trajectories (done after
    their step), a streak longer than the steps kept (53 here, for the other rules), and a
    step done twice, its verdict is the one it gives with nothing remembered."""
    events: list[dict[str, Any]] = []
    for n in range(1, 40):
        events += step(n, 0.875 if n % 5 else 0.25, seed=n, on_done=n % 3 == 0)
        if n % 4 == 0:  # a straggler of the step before, done: its group p0 is mixed now,
            # and 7 of 8 degenerate groups become 6 (below `max_fraction`)
            events.append(make_event("trajectory.done", 100.0 * n + 95, src=ROLLOUT,
                                     traj=f"late-{n}", status="ok", reward=0.5, group="p0",
                                     step=n - 1))  # fmt: skip
        if n % 7 == 0:
            events.append(make_event("step.done", 100.0 * n + 96, step=n))
    for n in range(40, 110):  # a streak longer than the steps kept: each one let go moves it
        events += step(n, 1.0, seed=n)
    engine = make_engine({RULE: {"steps": 3}})
    index = [r.rule_id for r in engine.rules].index(RULE)
    rule = engine.rules[index]
    fired = 0
    for event in events:
        fired += len(mine(feed(engine, [event])))
        tracked = engine.runs["r1"]
        params = tracked.overrides.get(RULE, rule.params)
        remembered = rule.check(tracked.state, engine.now, params)
        tracked.state.steps.memo.clear()
        assert rule.check(tracked.state, engine.now, params) == remembered
    assert fired >= 4  # it fired and resolved on the way: the verdicts compared were not all quiet

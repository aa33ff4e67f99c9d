"""The engine's shortcuts change no alert: an engine that evaluates only the rules watching an
event's kind, skips rules on routine heartbeats and keeps rule state incrementally raises
exactly the transitions of one that evaluates every rule after every event
(`Engine(shortcuts=False)`), on the bundled scenarios and on generated heartbeat storms that
probe the routine-beat skip where it could go wrong: restarted pids, `final` beats, dropped
counts, late and out-of-order beats, a live clock ahead of event time, timers in between.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers import decoded, make_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runwatch.dev.scenarios import SCENARIOS
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.rules import BUILTIN_RULES

#: short windows, so that every heartbeat rule fires and resolves within a few dozen beats
SHORT = {
    "heartbeat_lost": {"timeout": 30.0},
    "restart_loop": {"restarts": 2, "within": 600.0, "confirm": 5.0},
    "emitter_dropping": {"quiet_for": 40.0},
    "inference_stalled": {"stalled_for": 25.0},
    "weight_sync_stalled": {"timeout": 35.0},
    "inference_idle_with_pending": {"idle_for": 20.0},
    "dep_held": {},  # (no window: it fires on the hold; the storms hold and release)
}


def test_every_rule_that_skips_routine_beats_has_short_windows_here() -> None:
    """A new such rule must fire and resolve inside the storms, or they test nothing of it."""
    skipping = {rule.id for rule in BUILTIN_RULES if rule.skips_routine_beats}
    assert skipping == set(SHORT), "give the rule short windows in SHORT"


def engines(rules: dict[str, Any] | None = None) -> tuple[Engine, Engine]:
    config = RulesConfig.from_mapping({"rules": rules or {}})
    return Engine(config), Engine(config, shortcuts=False)


def seen(alerts: list[Alert]) -> list[tuple[Any, ...]]:
    """The transitions in time order. Those made at one instant by timers may come in another
    order: the reference re-schedules a rule's check on every event, the shortcut does not."""
    made = [(a.ts, a.key, a.id, a.state, a.since, a.summary, a.details,
             a.incident and (a.incident.role, a.incident.root)) for a in alerts]  # fmt: skip
    return sorted(made, key=lambda m: (m[0], m[1]))


def run_both(events: list[tuple[dict[str, Any], float | None]], rules: dict[str, Any]) -> None:
    fast, reference = engines(rules)
    got: list[Alert] = []
    want: list[Alert] = []
    for raw, now in events:
        if raw.get("kind") == "tick":
            got += fast.advance(raw["ts"])
            want += reference.advance(raw["ts"])
            continue
        event = decoded(raw)
        got += fast.apply(event, now)
        want += reference.apply(event, now)
    assert seen(got) == seen(want)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_bundled_incident_raises_the_same_alerts(name: str) -> None:
    fast, reference = engines()
    got: list[Alert] = []
    want: list[Alert] = []
    for raw in SCENARIOS[name]():
        event = decoded(raw)
        got += fast.apply(event)
        want += reference.apply(event)
    assert seen(got) == seen(want)  # the healthy incidents: none in both


#: processes of one run: (component, host, instance or None); a pid is drawn per beat
PROCESSES = [("trainer", "n0", None), ("rollout", "n1", None), ("inference", "n2", "vllm-0"),
             ("inference", "n3", "vllm-1")]  # fmt: skip


@st.composite
def heartbeat_storm(draw: st.DrawFn) -> list[tuple[dict[str, Any], float | None]]:
    """Heartbeats of four processes with everything that makes a beat not routine mixed in
    (restarts, an old pid beating again, `final`, dropped counts, late beats),
    plus the inference, trajectory and weights events the heartbeat-reading rules combine
    them with."""
    seed = draw(st.integers(0, 2**32 - 1))
    live = draw(st.booleans())  # a live clock: `now` ahead of event time
    rnd = random.Random(seed)
    pids = {p: 1000 + i * 10 for i, p in enumerate(PROCESSES)}
    dropped = dict.fromkeys(PROCESSES, 0)
    started = 0
    out: list[tuple[dict[str, Any], float | None]] = []
    t = 1_800_000_000.0
    out.append((make_event("run.started", t, run="r"), None))
    for _ in range(draw(st.integers(20, 160))):
        t += rnd.choice([0.5, 3.0, 10.0, 10.0, 10.0, 20.0, 45.0])
        proc = rnd.choice(PROCESSES)
        component, host, instance = proc
        roll = rnd.random()
        if roll < 0.08:
            pids[proc] += 1  # a restart: a new pid in the slot
        ts = t - rnd.choice([0.0, 0.0, 0.0, 5.0, 40.0])  # sometimes late
        # now and then the pid before the newest beats again: it was not replaced after all
        pid = pids[proc] - 1 if 0.50 <= roll < 0.54 and pids[proc] > 1000 else pids[proc]
        src: dict[str, Any] = {"component": component, "host": host, "pid": pid}
        if instance is not None:
            src["instance"] = instance
        fields: dict[str, Any] = {}
        if 0.08 <= roll < 0.12:
            fields["final"] = True
        if 0.12 <= roll < 0.17:
            dropped[proc] += rnd.choice([1, 5])
        if dropped[proc]:
            fields["dropped_events"] = dropped[proc]
        if 0.17 <= roll < 0.25 and instance is not None:
            busy = rnd.random() < 0.7
            out.append((make_event("inference.stats", ts, run="r", src=src, server=instance,
                                   running=3 if busy else 0, waiting=0,
                                   gen_tokens_per_s=0.0 if busy else None), None))  # fmt: skip
        if 0.25 <= roll < 0.28:
            out.append((make_event("weights.published", ts, run="r", src=src, version=int(t)),
                        None))  # fmt: skip
        if 0.28 <= roll < 0.31 and instance is not None:
            out.append((make_event("weights.loaded", ts, run="r", src=src, server=instance,
                                   version=int(t)), None))  # fmt: skip
        if 0.36 <= roll < 0.44:
            started += 1
            out.append((make_event("trajectory.started", ts, run="r", component="rollout",
                                   traj=f"t{started}"), None))  # fmt: skip
        if 0.44 <= roll < 0.50 and started:
            traj = f"t{rnd.randint(1, started)}"
            out.append((make_event("trajectory.done", ts, run="r", component="rollout",
                                   traj=traj, status="ok"), None))  # fmt: skip
        if 0.31 <= roll < 0.36:
            out.append(({"kind": "tick", "ts": t + rnd.choice([5.0, 31.0, 60.0])}, None))
        hold = rnd.random()  # a process holds its calls to a service, and lets go
        if hold < 0.05:
            out.append((make_event("dep.held", ts, run="r", src=src, dep="sandbox"), None))
        elif hold < 0.09:
            out.append((make_event("dep.released", ts, run="r", src=src, dep="sandbox",
                                   reason="healthy"), None))  # fmt: skip
        now = t + rnd.choice([0.0, 2.0, 35.0]) if live else None
        out.append((make_event("heartbeat", ts, run="r", src=src, **fields), now))
    return out


@pytest.mark.slow
@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(heartbeat_storm())
def test_heartbeat_storms_raise_the_same_alerts(
    events: list[tuple[dict[str, Any], float | None]],
) -> None:
    run_both(events, SHORT)


def test_a_late_beat_of_a_process_already_lost_resolves_its_alert() -> None:
    """The case the routine skip must not swallow: live, the engine's clock has passed the
    process's deadline, and a beat sent before that deadline arrives after it."""
    t = 1_800_000_000.0
    src = {"component": "trainer", "host": "n0", "pid": 1}
    events: list[tuple[dict[str, Any], float | None]] = [
        (make_event("heartbeat", t, run="r", src=src), t),
        (make_event("heartbeat", t + 10, run="r", src=src), t + 10),
        (make_event("heartbeat", t + 20, run="r", src=src), t + 45),  # lost at t+40
    ]
    fast, _ = engines(SHORT)
    alerts = [a for raw, now in events for a in fast.apply(decoded(raw), now)]
    assert [(a.rule, a.state) for a in alerts] == [
        ("heartbeat_lost", "firing"),
        ("heartbeat_lost", "resolved"),
    ]
    run_both(events, SHORT)


@settings(max_examples=200, deadline=None)
@given(firing=st.sets(st.integers(0, len(BUILTIN_RULES) - 1)), postponed=st.floats(0, 1e9))
def test_a_routine_beat_evaluates_the_rules_that_take_it_and_those_firing(
    firing: set[int], postponed: float
) -> None:
    """After a routine beat (`postponed` finite) a run evaluates, in rule order, the rules
    that do not skip such beats and the skipping ones that fire: whichever rules fire."""
    from runwatch.stream.state.run import RunState
    from runwatch.stream.tracked import TrackedRun

    engine = Engine()
    tracked = TrackedRun(RunState("r"))
    tracked.state.postponed = postponed
    tracked.firing = {i: {"k": None} for i in sorted(firing)}  # type: ignore[dict-item]
    for kind, watching in engine._by_kind.items():
        want = [i for i in watching if i not in engine._skip_routine or i in firing]
        assert list(engine._routine_of(tracked, kind)) == want

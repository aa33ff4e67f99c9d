"""The engine's state as a checkpoint keeps it: everything a re-read of the input would
rebuild, out (`dump_state`) and back in (`load_state`). `Engine.dump_state` and
`Engine.load_state` are these; apart from the engine because what a checkpoint holds is its
own question (stream/checkpoint.py writes it, bench/checkpoint.py measures it)."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

import msgspec

from runwatch.stream.exceptions import ConfigError
from runwatch.stream.tracked import RecentIds, TrackedRun, id_window

if TYPE_CHECKING:
    from runwatch.stream.engine import Engine

INF = float("inf")


def dump_state(engine: Engine) -> dict[str, Any]:
    """Everything a re-read of the input would rebuild (run states, the alert lifecycle,
    pending checks, the dedup window), as objects a checkpoint can pickle. Per-run rule
    parameters go as JSON, read back through the rules' own models."""
    runs = [
        (
            run,
            t.state,
            {rule_id: msgspec.json.encode(p).decode() for rule_id, p in t.overrides.items()},
            t.firing,
            t.timers,
            t.transitions,
            t.lifted,
            t.resumed,
            t.incidents,
        )
        for run, t in engine.runs.items()
    ]
    return {
        "now": engine.now,
        "heard": engine.heard,
        "duplicates": engine.duplicates,
        "seen": engine.seen.state(),
        "timers": engine._timers + engine._silence_timers,
        "runs": runs,
    }


def load_state(engine: Engine, state: dict[str, Any]) -> None:
    """Take over what `dump_state` gave, made with the same rules config (the caller
    checks). Raises (ConfigError if a run's parameters no longer validate) before it
    changes anything."""
    rules = engine.config.by_id()
    runs: dict[str, TrackedRun] = {}
    for (
        run,
        run_state,
        overrides,
        firing,
        timers,
        transitions,
        lifted,
        resumed,
        incidents,
    ) in state["runs"]:
        tracked = TrackedRun(run_state)
        tracked.lifted, tracked.resumed, tracked.incidents = lifted, resumed, incidents
        if overrides:  # (else the shared `EMPTY` it starts with)
            tracked.overrides = {}
        for rule_id, raw in overrides.items():
            rule = rules.get(rule_id)
            if rule is None:
                raise ConfigError(f"run {run}: no rule {rule_id!r}")
            tracked.overrides[rule_id] = msgspec.json.decode(raw, type=rule.params_model)
        tracked.firing, tracked.timers, tracked.transitions = firing, timers, transitions
        engine._reindex(tracked)
        runs[run] = tracked
    now, duplicates = state["now"], state["duplicates"]
    heard = state.get("heard", now)  # (a checkpoint made before the two clocks)
    pending = [t for t in state["timers"] if t[2] not in engine._silent]
    silence = [t for t in state["timers"] if t[2] in engine._silent]
    seen = id_window(engine.seen.capacity, state["seen"], native=type(engine.seen) is not RecentIds)
    heapq.heapify(pending)
    heapq.heapify(silence)
    # all read: only now is anything replaced (a state that fails to load changes nothing)
    engine.runs, engine.now, engine.heard, engine.duplicates = runs, now, heard, duplicates
    engine._timers, engine._silence_timers, engine.seen = pending, silence, seen
    engine._due = min(pending[0][0] if pending else INF, silence[0][0] if silence else INF)

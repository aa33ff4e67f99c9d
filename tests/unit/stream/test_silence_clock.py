"""The engine's two clocks: events and most rules on event time, the rules on silence on the
clock of what was heard, which a live driver holds while it cannot have read everything
(`Engine.hold`). Replay never holds, and the two are one there."""

from __future__ import annotations

import pickle

from helpers import decoded, make_engine, make_event

from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine

T0 = 1_800_000_000.0
RULES = {"heartbeat_lost": {"timeout": 3.0}}


def beat(ts: float, host: str) -> object:
    return decoded(make_event("heartbeat", ts, host=host, component=host))


def nan_step(ts: float, number: int, loss: float) -> object:
    return decoded(make_event("step.metrics", ts, host="a", component="a", step=number,
                              metrics={"loss": loss}))  # fmt: skip


def seen(alerts: list[Alert]) -> list[tuple[str, str, float]]:
    return [(a.rule, a.state, a.ts) for a in alerts]


def backlog(engine: Engine, hold: float | None) -> list[Alert]:
    """Processes a and b beat every 0.5 s; the broker is away from T0+2 to T0+12. a's
    backlog (with a NaN step at T0+5, healed at T0+7) comes in first, then a beats live,
    and b's backlog only after that -- its emitter reconnected later. While `hold` is
    given, the driver holds the silence clock there."""
    out: list[Alert] = []
    for i in range(4):
        out += engine.apply(beat(T0 + i * 0.5, "a"))
        out += engine.apply(beat(T0 + i * 0.5, "b"))
    if hold is not None:
        engine.hold = hold
    for i in range(4, 30):
        out += engine.apply(beat(T0 + i * 0.5, "a"))
        if i == 10:
            out += engine.apply(nan_step(T0 + 5, 1, float("nan")))
        if i == 14:
            out += engine.apply(nan_step(T0 + 7, 2, 1.0))
    for i in range(4, 30):
        out += engine.apply(beat(T0 + i * 0.5, "b"))
    return out


def test_a_held_silence_clock_holds_the_rules_on_silence_only() -> None:
    engine = make_engine(RULES)
    out = backlog(engine, hold=T0 + 1.5)
    # the NaN is judged at its own time; b's silence is not judged while the clock is held
    assert seen(out) == [("non_finite_metric", "firing", T0 + 5),
                         ("non_finite_metric", "resolved", T0 + 7)]  # fmt: skip
    assert (engine.heard, engine.now) == (T0 + 1.5, T0 + 14.5)
    engine.hold = float("inf")  # all delivered: silence is judged again, and there is none
    assert engine.advance(T0 + 15) == []
    assert engine.heard == T0 + 15


def test_without_a_hold_the_late_backlog_reads_as_silence() -> None:
    """What the hold is for: read in this order on event time alone, b looks silent."""
    out = backlog(make_engine(RULES), hold=None)
    assert ("heartbeat_lost", "firing", T0 + 4.5) in seen(out)


def test_a_silence_that_outlasts_the_hold_fires_at_its_time_once_released() -> None:
    engine = make_engine(RULES)
    engine.apply(beat(T0, "a"))
    engine.apply(beat(T0, "b"))
    engine.hold = T0 + 1
    assert engine.apply(beat(T0 + 10, "a")) == []  # b silent since T0: not judged yet
    engine.hold = float("inf")
    fired = engine.advance(T0 + 10)
    assert seen(fired) == [("heartbeat_lost", "firing", T0 + 3)]  # when it became true


def test_a_checkpoint_keeps_the_silence_clock_and_its_checks() -> None:
    engine = make_engine(RULES)
    engine.apply(beat(T0, "a"))
    engine.apply(beat(T0, "b"))
    engine.hold = T0 + 1
    engine.apply(beat(T0 + 10, "a"))
    state = pickle.loads(pickle.dumps(engine.dump_state()))
    restored = make_engine(RULES)
    restored.load_state(state)
    assert (restored.now, restored.heard) == (engine.now, engine.heard)
    for e in (engine, restored):
        e.hold = float("inf")
    assert seen(restored.advance(T0 + 10)) == seen(engine.advance(T0 + 10)) != []

"""`emitter_dropping` (warning): an emitter's `dropped_events` count rises -- the monitor is
losing the run's data. Quiet when nothing is dropped, or when a restarted process counts
from zero."""

from __future__ import annotations

from typing import Any

from helpers import TRAINER, brief, feed, make_engine, make_event

RULE = "emitter_dropping"


def mine(alerts: list[Any]) -> list[tuple[str, str, float]]:
    """This rule's transitions (heartbeat_lost judges the same beats)."""
    return [b for b in brief(alerts) if b[0] == RULE]


def beat(ts: float, dropped: int | None, src: dict[str, object] = TRAINER) -> dict[str, object]:
    fields = {} if dropped is None else {"dropped_events": dropped}
    return make_event("heartbeat", ts, src=src, **fields)


def test_fires_at_the_beat_that_shows_a_drop_and_resolves_after_a_quiet_spell() -> None:
    engine = make_engine()
    alerts = feed(engine, [beat(0, 0), beat(10, 0), beat(20, 7), beat(30, 7)])
    assert mine(alerts) == [(RULE, "firing", 20.0)]
    (alert,) = [a for a in alerts if a.rule == RULE]
    assert (alert.severity, alert.subject, alert.since) == ("warning", "trainer@node-0/100", 20.0)
    assert alert.details == {"process": "trainer@node-0/100", "component": "trainer",
                             "dropped": 7, "last_drop": 20.0}  # fmt: skip
    assert "dropped 7 events" in alert.summary
    assert mine(engine.advance(619.9)) == []
    assert mine(engine.advance(620.0)) == [(RULE, "resolved", 620.0)]


def test_a_drop_that_goes_on_keeps_it_firing_and_a_new_one_fires_again() -> None:
    engine = make_engine()
    out = feed(engine, [beat(0, 0), beat(100, 3), beat(500, 9), beat(1000, 9)])
    assert mine(out) == [(RULE, "firing", 100.0)]  # 500 rose again: still the same alert
    out = engine.advance(1100) + feed(engine, [beat(1200, 9), beat(1300, 12)])
    assert mine(out) == [(RULE, "resolved", 1100.0), (RULE, "firing", 1300.0)]


def test_nothing_dropped_or_no_count_at_all_stays_quiet() -> None:
    engine = make_engine()
    assert mine(feed(engine, [beat(t, 0) for t in range(0, 600, 10)])) == []
    assert mine(feed(engine, [beat(t, None) for t in range(600, 900, 10)])) == []
    assert mine(engine.advance(1e6)) == []


def test_a_restart_counting_from_zero_is_not_a_loss() -> None:
    engine = make_engine()
    out = feed(engine, [beat(0, 4), beat(10, 4)])
    assert mine(out) == [(RULE, "firing", 0.0)]  # dropped before we saw it: a loss too
    assert mine(engine.advance(700)) == [(RULE, "resolved", 600.0)]
    assert mine(feed(engine, [beat(710, 0), beat(720, 0)])) == []  # back, counting afresh
    assert mine(feed(engine, [beat(730, 2)])) == [(RULE, "firing", 730.0)]


def test_min_dropped_sets_how_many_count() -> None:
    engine = make_engine({RULE: {"min_dropped": 100}})
    assert mine(feed(engine, [beat(0, 0), beat(10, 50)])) == []
    assert mine(feed(engine, [beat(20, 150)])) == [(RULE, "firing", 20.0)]

"""`response_length_drift` (warning): responses that collapse toward nothing, or run into
the maximum length, for many steps; a healthy lengthening and short dips stay quiet."""

from __future__ import annotations

import math
import random

from helpers import brief, feed, make_engine, make_event, of_rule

RULE = "response_length_drift"


def steps(rows: list[dict[str, float]]) -> list[dict]:
    return [make_event("step.metrics", 60.0 * (i + 1), step=i + 1, metrics=m)
            for i, m in enumerate(rows)]  # fmt: skip


def lengths(n: int, level: float = 800.0, clip: float = 0.02, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"response_length/mean": level * math.exp(rng.gauss(0, 0.1)),
             "response_length/clip_ratio": clip} for _ in range(n)]  # fmt: skip


def test_a_collapse_fires_after_ten_short_steps_and_says_so() -> None:
    short = [{"response_length/mean": 40.0, "response_length/clip_ratio": 0.0}] * 12
    alerts = of_rule(feed(make_engine(), steps([*lengths(30), *short])), RULE)
    assert brief(alerts) == [(RULE, "firing", 60.0 * 40)]
    (alert,) = alerts
    assert (alert.subject, alert.since) == ("collapse", 60.0 * 31)
    assert alert.details["metric"] == "response_length/mean"
    assert "responses have collapsed" in alert.summary


def test_responses_at_the_maximum_length_fire_and_resolve() -> None:
    clipped = lengths(10, level=4000, clip=0.7)
    rows = [*lengths(30), *clipped, *lengths(2)]
    alerts = of_rule(feed(make_engine(), steps(rows)), RULE)
    assert brief(alerts) == [(RULE, "firing", 60.0 * 40), (RULE, "resolved", 60.0 * 41)]
    assert alerts[0].subject == "clipped"
    assert "maximum length" in alerts[0].summary


def test_a_healthy_lengthening_and_short_dips_stay_quiet() -> None:
    rows = [{"response_length/mean": 300 + 2 * t, "response_length/clip_ratio": 0.05}
            for t in range(500)]  # fmt: skip
    for t in (100, 101, 102, 300):
        rows[t] = {"response_length/mean": 10.0, "response_length/clip_ratio": 0.9}
    assert of_rule(feed(make_engine(), steps(rows)), RULE) == []


def test_openrlhf_s_mean_length_is_read() -> None:
    rows = [{"train/response_length": 500.0}] * 30 + [{"train/response_length": 20.0}] * 10
    assert brief(of_rule(feed(make_engine(), steps(rows)), RULE)) == [(RULE, "firing", 2400.0)]

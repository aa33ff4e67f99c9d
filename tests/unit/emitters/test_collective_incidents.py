"""One `collective_timeout` alert per failing collective, however its lines are cut or come
late: the watchdog's lines of one console read by the reader, then applied in every order,
with the rule's settle passing between any of them (a loaded emitter or service delivers one
batch seconds after another: the flake of tests/e2e/test_field_consoles.py, where
`nccl_llamafactory_torch24` fired twice, "rank 0" and then "process group 1: ranks 0,4")."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from helpers import feed, make_engine, make_event

from runwatch.emitters.console import LineParser

FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "field"
SETTLE = 10.0
SRC = {"component": "trainer", "host": "node-0", "pid": 80746}


def _events(name: str) -> list[dict[str, Any]]:
    """The `collective.timeout` events the reader gives for a console, line by line."""
    parser = LineParser()
    found = []
    for line in (FIELD / name).read_text().splitlines():
        if not line.startswith("# "):
            found += parser.parse(line)
    found += parser.finish()
    out = []
    for kind, fields in found:
        if kind == "collective.timeout":
            src = fields.pop("src", None)
            out.append({"src": {"component": "worker", **src} if src else SRC, **fields})
    return out


def _played(events: list[dict[str, Any]], order: Iterable[int], late: Iterable[bool]) -> list[Any]:
    """`events` in `order`; before one, the settle passes with nothing heard when its `late`
    says so; every transition, in order."""
    engine = make_engine({"collective_timeout": {"settle": SETTLE}})
    out: list[Any] = []
    t = 100.0
    for index, gap in zip(order, late, strict=True):
        if gap:
            t += SETTLE + 1
            out += engine.advance(t)
        t += 0.01
        fields = dict(events[index])
        out += feed(engine, [make_event("collective.timeout", t, **fields)])
    out += engine.advance(t + SETTLE + 1)
    return out


def _firing(alerts: list[Any]) -> list[str]:
    return [a.summary for a in alerts if a.rule == "collective_timeout" and a.state == "firing"]


LLAMAFACTORY = _events("nccl_llamafactory_torch24.log")


def test_the_reader_gives_four_lines_of_one_collective_two_naming_its_group() -> None:
    assert len(LLAMAFACTORY) == 4
    assert {f["seq"] for f in LLAMAFACTORY} == {1580}
    assert [f.get("pg") for f in LLAMAFACTORY] == [None, None, "1", "1"]


def test_one_alert_in_every_order_however_late_each_line_comes() -> None:
    n = len(LLAMAFACTORY)
    for order in itertools.permutations(range(n)):
        for late in itertools.product((False, True), repeat=n - 1):
            alerts = _played(LLAMAFACTORY, order, (False, *late))
            assert len(_firing(alerts)) == 1, (order, late, _firing(alerts))


def test_named_lines_after_an_unnamed_group_fired_join_its_alert() -> None:
    # the flake: rank 0's line without its group fired alone; its own line naming PG 1, and
    # rank 4's and rank 3's, came after the settle
    alerts = _played(LLAMAFACTORY, range(4), (False, True, False, False))
    (summary,) = _firing(alerts)
    assert "rank 0 timed out in ALLREDUCE #1580" in summary


def test_lines_in_one_settle_make_one_alert_naming_the_group_and_every_rank() -> None:
    (alert,) = _played(LLAMAFACTORY, range(4), (False,) * 4)
    assert alert.subject == "process group 1"
    assert alert.details["pg"] == "1"
    assert "ranks 0,3,4 timed out in ALLREDUCE #1580" in alert.summary


@pytest.mark.parametrize("name", sorted(p.name for p in FIELD.glob("*nccl_*.log")))
def test_each_watchdog_console_is_one_alert_whichever_line_comes_late(name: str) -> None:
    events = _events(name)
    assert events
    for cut in range(len(events)):  # the settle passes before this line
        late = [i == cut for i in range(len(events))]
        for order in (range(len(events)), range(len(events) - 1, -1, -1)):
            alerts = _played(events, order, late)
            assert len(_firing(alerts)) == 1, (cut, list(order), _firing(alerts))


def test_two_process_groups_named_by_their_lines_stay_two_alerts() -> None:
    base = {"src": SRC, "backend": "nccl", "op": "ALLREDUCE"}
    events = [{**base, "rank": 0, "seq": 5, "pg": "1"}, {**base, "rank": 1, "seq": 9, "pg": "2"}]
    for late in ((False, False), (False, True)):
        assert len(_firing(_played(events, range(2), late))) == 2


def test_a_stuck_watchdog_of_a_named_group_joins_the_unnamed_timeout_of_its_hang() -> None:
    # ArcticTraining: rank 7's heartbeat monitor ([PG ID 0 ...], no collective) and rank 2's
    # watchdog line (no group): one hang, one alert, whichever comes first
    events = _events("nccl_arctic_watchdog_stuck.log")
    for order in ((0, 1), (1, 0)):
        (summary,) = _firing(_played(events, order, (False, False)))
        assert "rank 2 timed out in _ALLGATHER_BASE #120049" in summary
        assert "watchdog stuck on rank 7" in summary

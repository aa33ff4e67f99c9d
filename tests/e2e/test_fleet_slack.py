"""Fleet incidents from events to Slack (issue 45, item 4): the simulator's fleet trace
(`runwatch.dev.fleet`: 120 jobs on three reward servers, one of which hangs -- forty runs --
and a node that dies under four) through the engine and the fleet stage, as replay and
`serve` run them, into the notifier and the strict Slack with Slack's rate limits on (on a
virtual clock: no wall time). One thread per shared cause, its root naming the cause and,
at the end, every run healed; every transition in exactly one message; the runs that joined
a fleet incident have no thread of their own, and the first runs of a storm (whose threads
opened before there were enough of them to call it shared) leave one-line pointers to it;
Slack never refused a call. `slack_checked` holds `runwatch serve` to the same, on the live
trace of `test_shared_cause.py`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.slack_server import FakeSlack, Message, VirtualClock
from runwatch.dev.fleet import fleet_cluster
from runwatch.notify.config import NotifyConfig
from runwatch.notify.notifier import Notifier
from runwatch.notify.slack import SlackPoster
from runwatch.notify.store import NotifyStore
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

pytestmark = pytest.mark.slow

TOKEN = "xoxb-fleet-e2e"
T0 = 1_800_000_000.0


def _ids(m: Message) -> list[str]:
    payload = (m.metadata or {}).get("event_payload") or {}
    return [str(i) for i in payload.get("alert_ids") or ()]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS",), clock=VirtualClock())
    try:
        yield fake
    finally:
        fake.close()


def test_the_fleet_trace_from_events_to_slack(slack: FakeSlack, tmp_path: Path) -> None:
    cluster, expected = fleet_cluster(runs=120, node_runs=4, coincident=6)
    lines = (("f", i, json.dumps(e).encode()) for i, e in enumerate(cluster.events(T0, 1.0)))
    alerts: list[Alert] = list(replay(lines, Engine()))
    fleets = {a.incident.id: a.subject for a in alerts if a.run == "@fleet" and a.incident}
    assert sorted(fleets.values()) == sorted([expected.dep, expected.host])
    assert len(expected.dep_runs) == 40

    clock = slack.clock
    assert isinstance(clock, VirtualClock)
    poster = SlackPoster(TOKEN, base_url=slack.url, sleep=clock.sleep, clock=clock)
    config = NotifyConfig(channel="C-ALERTS", base_url=slack.url)
    now = alerts[-1].ts + 60
    notifier = Notifier(config, poster, NotifyStore(tmp_path / "n.sqlite"), clock=lambda: now)
    try:
        for i in range(0, len(alerts), 25):  # as serve's thread or a poll takes them
            assert "failed" not in notifier.notify_many(alerts[i : i + 25])
        notifier.tidy(wait=True)
    finally:
        notifier.close()

    # every transition in exactly one message; Slack never refused a call
    shown = [i for m in slack.messages for i in _ids(m) if not i.startswith("fleet:")]
    assert sorted(shown) == sorted(a.id for a in alerts)
    assert slack.limited == []
    assert len(slack.messages) < len(alerts) / 2
    # one thread per shared cause, its root naming the cause, every run healed at the end
    roots = {m.ts: m for m in slack.roots()}
    where = {i: m.thread_ts or m.ts for m in slack.messages for i in _ids(m)}
    for fleet, subject in fleets.items():
        (opened,) = [a for a in alerts if a.run == "@fleet" and a.firing and a.subject == subject]
        root = roots[where[opened.id]]
        (healed,) = [a for a in alerts if a.run == "@fleet" and not a.firing
                     and a.subject == subject]  # fmt: skip
        assert f"Shared cause {subject} — {len(healed.details['runs'])} runs, all healed" in (
            root.text)  # fmt: skip
        members = [a for a in alerts if a.incident and a.incident.fleet == fleet]
        assert {where[a.id] for a in members} == {root.ts}  # every member's: in its thread
    # a member run's incident has no thread of its own, but the first of a storm (opened
    # before it was known to be shared) left a pointer to its fleet thread
    fleet_roots = {where[a.id] for a in alerts if a.run == "@fleet"}
    by_id = {a.id: a for a in alerts}
    in_fleet = {a.incident.id for a in alerts if a.incident and a.incident.fleet}
    for m in roots.values():
        first = by_id[_ids(m)[0]]
        if m.ts not in fleet_roots and first.incident and first.incident.id in in_fleet:
            assert "continued in the shared-cause thread" in m.text, m.text
            assert slack.replies(m) == []
    pointers = sum(1 for m in roots.values() if "continued in" in m.text)
    print(f"{len(alerts)} transitions, {len(slack.messages)} messages, {len(roots)} threads "
          f"({len(fleet_roots)} fleet, {pointers} pointers)")  # fmt: skip


def slack_checked(slack: FakeSlack, alerts: list[dict[str, Any]], timeout: float = 120) -> None:
    """What serve's notifier made of its transitions `alerts` (waited for): each in exactly
    one message, a fleet member's in its fleet thread, one thread per fleet incident, no
    429."""
    want = {a["id"] for a in alerts}
    deadline = time.monotonic() + timeout
    while not want <= {i for m in list(slack.messages) for i in m.shown}:
        assert time.monotonic() < deadline, "not every transition reached Slack"
        time.sleep(0.2)
    shown = [i for m in slack.messages for i in m.shown if not i.startswith("fleet:")]
    assert sorted(shown) == sorted(want)
    where = {i: m.thread_ts or m.ts for m in slack.messages for i in m.shown}
    fleets = {a["incident"]["id"]: where[a["id"]] for a in alerts if a["run"] == "@fleet"}
    assert len(set(fleets.values())) == len(fleets)  # a thread each
    for a in alerts:
        fleet = (a.get("incident") or {}).get("fleet")
        if fleet is not None:
            assert where[a["id"]] == fleets[fleet], a["id"]
    assert slack.limited == []

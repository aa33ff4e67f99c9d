"""Emitters that deliver late with no outage at all (a node starved of CPU: its emitters'
senders run seconds behind) -- the live clock rule holds silence behind the wall clock by
the delay the records show, so a process whose beats are late is not taken for silent, and
a re-read of the same records judges as the live worker did (issue 43: the cluster bench's
heartbeat_lost alerts on healthy processes while its traffic lagged 5-14 s)."""

from __future__ import annotations

from helpers import encode, make_event

from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.live import LiveDriver
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.timekeeping.reading import RECONNECT_S

T0 = 1_800_000_000.0
TIMEOUT = 5.0  # as the cluster bench: over LATE_S and a beat, which delays under LATE_S stay within
CONFIG = RulesConfig.from_mapping({"rules": {"heartbeat_lost": {"timeout": TIMEOUT}}})
#: three processes of one host: a on time, b's sender behind, c dies at T0+40
PIDS = {"a": 100, "b": 200, "c": 300}


def lateness(name: str, ts: float) -> float:
    """b's delay: none, then growing to 7 s over 10 s, 7 s for 40 s, then none again."""
    if name != "b" or not T0 + 10 <= ts < T0 + 70:
        return 0.05
    return min(7.0, 0.05 + (ts - T0 - 10) * 0.7) if ts < T0 + 60 else 0.05


def records() -> list[tuple[bytes, float, int]]:
    """The partition: each process beats every second; (value, append time, offset), in
    append order (b's late beats come after a's newer ones; each sender sends in order)."""
    sent: list[tuple[float, bytes]] = []
    last = dict.fromkeys(PIDS, 0.0)
    for i in range(90):
        for name, pid in PIDS.items():
            ts = T0 + i
            if name == "c" and ts > T0 + 40:
                continue
            last[name] = max(ts + lateness(name, ts), last[name] + 0.001)
            sent.append((last[name], encode(make_event("heartbeat", ts, component=name,
                                                       pid=pid))))  # fmt: skip
    sent.sort(key=lambda s: s[0])
    return [(raw, arrival, offset) for offset, (arrival, raw) in enumerate(sent)]


def driver() -> LiveDriver:
    return LiveDriver(CONFIG, topic="runwatch.events", partition=0, arrival_gaps=True)


def live(part: list[tuple[bytes, float, int]]) -> list[tuple[float, Alert]]:
    """A worker that reads each record as it is appended, fetches answering all along, and
    ticks every 0.5 s (`Horizon.of`, caught up); each transition with when it was made."""
    d, out, wall = driver(), [], T0
    for record in part:
        while wall + 0.5 <= record[1]:
            wall += 0.5
            d.reading.observe(wall)
            out += [(wall, a) for a in d.tick(d.reading.limit(wall, wall))]
        out += [(record[1], a) for a in d.feed([record])[0]]
    return out


def test_beats_delivered_late_are_not_silence_and_a_death_still_fires() -> None:
    part = records()
    made = live(part)
    assert [(a.subject, a.state) for _, a in made] == [("c@node-0/300", "firing")]
    [(when, fired)] = made
    assert fired.ts == T0 + 40 + TIMEOUT  # stamped when it became true, as ever
    # judged behind the wall clock by b's delay and a backoff: at most RECONNECT_S late
    assert T0 + 40 + TIMEOUT < when <= T0 + 40 + TIMEOUT + RECONNECT_S + 1


def test_a_re_read_of_late_deliveries_judges_as_the_live_worker_did() -> None:
    part = records()
    published = PublishedAlerts()
    for _, alert in live(part):
        published.add(alert)
    d = driver()
    d.start_replay()
    d.feed(part)
    assert d.finish_replay(published, T0 + 100) == ([], [])
    nothing = driver()  # and with nothing published, it makes the one firing alone
    nothing.start_replay()
    nothing.feed(part)
    alerts, _ = nothing.finish_replay(PublishedAlerts(), T0 + 100)
    assert [(a.subject, a.state) for a in alerts] == [("c@node-0/300", "firing")]

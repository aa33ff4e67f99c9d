"""What must hold after a cluster play (`harness.cluster`), whatever was paused, killed or
restarted while it played -- read from what every consumer of the topics would read:

- every event the traffic emitted is on `runwatch.events` and stored once in the history;
- the alert transitions on `runwatch.alerts`, read `read_committed` (a fenced worker's
  writes end aborted, and no consumer sees them), are exactly those the events imply, each
  once: the engine replayed over each partition's events in the order they happened (event
  time), as `runwatch replay` reads them. Nothing else: no resolve of a condition that did
  not heal, no re-fire, no silence alert on a process that beat all along. A transition
  may come later than it would have live; it carries the same id (`key#n`) and state;
- the history holds exactly the transitions of the topic;
- Slack showed each transition once (a post, or a quick resolve folded into its firing's
  message), each incident its own thread, each reply in its incident's thread.

`Verdict.problems()` lists what does not hold, in words; the figures (alert delays, writes
aborted) are for the bench.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, TopicPartition

from runwatch import configfile
from runwatch.store.store import Store
from runwatch.stream.engine import Engine
from runwatch.stream.records import is_batch
from runwatch.stream.replay import replay

if TYPE_CHECKING:
    from harness.cluster import Cluster


@dataclass
class Record:
    partition: int
    offset: int
    timestamp: float  # the broker's append time, seconds
    value: dict[str, Any]


def read_all(bootstrap: str, topic: str, committed: bool = True) -> list[Record]:
    """Every record of `topic`, partition by partition, in offset order -- a batch record
    (`runwatch.stream.records`) as its lines; `committed`: as a `read_committed` consumer
    reads it (records of aborted transactions left out)."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=isolation)  # fmt: skip
    try:
        parts = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in parts]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # (the last stable offset, read committed)
        out: list[Record] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    if r.offset >= ends[tp] or r.value is None:
                        continue
                    # a record of events may be a batch of one run's, a line each
                    lines = r.value.split(b"\n") if is_batch(r.headers) else [r.value]
                    out += [Record(tp.partition, r.offset, r.timestamp / 1000.0,
                                   json.loads(line)) for line in lines if line.strip()]  # fmt: skip
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()


def implied(events: list[Record], config: Path) -> list[dict[str, Any]]:
    """The transitions the events imply: per partition (a worker's engine holds one), the
    engine over its events in the order they happened."""
    rules = configfile.rules(str(config))
    out: list[dict[str, Any]] = []
    for partition in sorted({r.partition for r in events}):
        mine = [r for r in events if r.partition == partition]
        mine.sort(key=lambda r: (r.value.get("ts", 0.0), r.offset))
        lines: Iterator[tuple[str, int, bytes]] = (
            ("events", r.offset, json.dumps(r.value).encode()) for r in mine
        )
        out += [a.to_dict() for a in replay(lines, Engine(rules))]
    return out


@dataclass
class Verdict:
    emitted: int | None
    events: list[Record]
    stored: Counter[str]
    expected: list[dict[str, Any]]
    published: list[Record]
    uncommitted: int  # records on runwatch.alerts, aborted ones too
    history: Counter[str]
    slack: list[tuple[str, str | None, list[str]]]  # (ts, thread_ts, alert ids shown)
    faults: dict[str, float]
    kinds: dict[str, str]
    timeout: float
    notes: list[str] = field(default_factory=list)

    # -- the counts ------------------------------------------------------------------------

    def ids(self) -> Counter[str]:
        return Counter(r.value["id"] for r in self.published)

    def missing(self) -> list[dict[str, Any]]:
        have = {(r.value["id"], r.value["state"]) for r in self.published}
        return [a for a in self.expected if (a["id"], a["state"]) not in have]

    def extra(self) -> list[dict[str, Any]]:
        want = {(a["id"], a["state"]) for a in self.expected}
        return [r.value for r in self.published if (r.value["id"], r.value["state"]) not in want]

    def duplicated(self) -> list[str]:
        return [i for i, n in self.ids().items() if n > 1]

    def lost_events(self) -> int:
        """Events emitted that are not on the topic (by distinct id)."""
        on_topic = len({r.value["id"] for r in self.events})
        return 0 if self.emitted is None else max(0, self.emitted - on_topic)

    def unstored(self) -> list[str]:
        return [r.value["id"] for r in self.events if self.stored[r.value["id"]] == 0]

    def stored_twice(self) -> list[str]:
        return [i for i, n in self.stored.items() if n > 1]

    def false_silences(self) -> list[dict[str, Any]]:
        """Silence alerts fired on a run whose process the traffic never silenced."""
        return [a for a in self.extra() if a["state"] == "firing"
                and a["rule"] in ("heartbeat_lost", "stuck_progress")
                and self.kinds.get(a["run"]) != "silent"]  # fmt: skip

    def save(self, path: Path, **extra: Any) -> None:
        """What the verdict read, as JSON, for looking into a failure after the broker is
        gone: every event and published transition with its partition, offset and append
        time, and the faults played."""

        def rows(records: list[Record]) -> list[dict[str, Any]]:
            return [{"partition": r.partition, "offset": r.offset, "appended": r.timestamp,
                     **r.value} for r in records]  # fmt: skip

        path.write_text(json.dumps({"events": rows(self.events), "published": rows(self.published),
                                    "faults": self.faults, "kinds": self.kinds,
                                    "timeout": self.timeout, **extra}))  # fmt: skip

    def delays(self) -> dict[str, list[float]]:
        """Per rule, seconds from each fault's condition becoming true (the NaN step's
        send; the last beat plus the timeout) to its first firing on runwatch.alerts."""
        out: dict[str, list[float]] = {}
        for run, at in self.faults.items():
            rule = "heartbeat_lost" if self.kinds[run] == "silent" else "non_finite_metric"
            true_at = at + (self.timeout if rule == "heartbeat_lost" else 0.0)
            fired = [r.timestamp for r in self.published
                     if r.value["run"] == run and r.value["rule"] == rule
                     and r.value["state"] == "firing"]  # fmt: skip
            if fired:
                out.setdefault(rule, []).append(min(fired) - true_at)
        return out

    # -- Slack -----------------------------------------------------------------------------

    def slack_problems(self) -> list[str]:
        out = []
        shown = Counter(i for _, _, ids in self.slack for i in ids)
        twice = [i for i, n in shown.items() if n > 1]
        if twice:
            out.append(f"{len(twice)} transitions shown on Slack twice: {twice[:5]}")
        published = {r.value["id"]: r.value for r in self.published}
        unshown = [i for i in published if i not in shown]
        if unshown:
            out.append(f"{len(unshown)} transitions not on Slack: {unshown[:5]}")
        strange = [i for i in shown if i not in published]
        if strange:
            out.append(f"{len(strange)} Slack messages of no published transition: {strange[:5]}")
        # the firing that opened each incident is its thread's root; every other message of
        # the incident is a reply in that thread (a quick resolve may be folded into either)
        opened: dict[str, str] = {}
        for r in self.published:
            a = r.value
            if a["state"] == "firing":
                opened.setdefault(a["incident"]["id"], a["id"])
        root_of: dict[str, str] = {}  # message ts -> the incident whose thread it roots
        for ts, thread, ids in self.slack:
            first = published.get(ids[0]) if ids else None
            if thread is None and first is not None:
                incident = first["incident"]["id"]
                if opened.get(incident) != first["id"]:
                    out.append(f"a root message for {first['id']} ({first['state']}), which "
                               f"did not open incident {incident}")  # fmt: skip
                root_of[ts] = incident
        for _, thread, ids in self.slack:
            if thread is None:
                continue
            for i in ids:
                alert = published.get(i)
                if alert is not None and root_of.get(thread) != alert["incident"]["id"]:
                    out.append(f"{i} replied in the thread of {root_of.get(thread)}, not of "
                               f"its incident {alert['incident']['id']}")  # fmt: skip
        return out

    # -- all of it -------------------------------------------------------------------------

    def problems(self) -> list[str]:
        out = []
        if self.emitted is None:
            out.append("the traffic did not say how many events it emitted")
        if lost := self.lost_events():
            out.append(f"{lost} events emitted and not on the events topic")
        if unstored := self.unstored():
            out.append(f"{len(unstored)} events not in the history: {unstored[:3]}")
        if twice := self.stored_twice():
            out.append(f"{len(twice)} events stored twice: {twice[:3]}")
        if dup := self.duplicated():
            out.append(f"{len(dup)} transitions published twice: {dup[:5]}")
        if missing := self.missing():
            out.append(f"{len(missing)} transitions missing: " + _brief(missing))
        if extra := self.extra():
            out.append(f"{len(extra)} transitions the events do not imply: " + _brief(extra))
        if self.ids() != self.history:
            differ = (self.history - self.ids()) + (self.ids() - self.history)
            out.append(f"the history's transitions differ from the topic's: {sorted(differ)[:5]}")
        return out + self.slack_problems() + self.notes

    def figures(self) -> dict[str, Any]:
        delays = self.delays()
        return {
            "events emitted": self.emitted,
            "events lost": self.lost_events(),
            "events stored twice": len(self.stored_twice()),
            "transitions implied": len(self.expected),
            "published (read_committed)": len(self.published),
            "aborted writes on runwatch.alerts": self.uncommitted - len(self.published),
            "duplicated": len(self.duplicated()),
            "missing": len(self.missing()),
            "extra": len(self.extra()),
            "false silence alerts": len(self.false_silences()),
            "slack problems": len(self.slack_problems()),
            **{f"{rule} delay (s)": _spread(v) for rule, v in sorted(delays.items())},
        }


def _brief(alerts: list[dict[str, Any]]) -> str:
    return "; ".join(f"{a['id']} {a['state']} {a['summary'][:60]}" for a in alerts[:6])


def _spread(values: list[float]) -> str:
    v = sorted(values)
    return (f"n={len(v)} p50 {v[len(v) // 2]:.1f} max {v[-1]:.1f}" if v else "none")  # fmt: skip


def judge(cluster: Cluster) -> Verdict:
    """Read what the play left (the broker up, the workers stopped, the sink caught up)."""
    traffic = cluster.traffic
    assert traffic is not None
    events = read_all(cluster.bootstrap, cluster.topic("events"))
    published = read_all(cluster.bootstrap, cluster.topic("alerts"))
    everything = read_all(cluster.bootstrap, cluster.topic("alerts"), committed=False)
    with Store.reader(cluster.db, wait=60) as store:
        stored = Counter(i for (i,) in store.con.execute("SELECT id FROM events").fetchall())
        history = Counter(i for (i,) in store.con.execute("SELECT id FROM alerts").fetchall())
    slack = [(m.ts, m.thread_ts, list(m.shown)) for m in cluster.slack.messages]
    return Verdict(
        emitted=traffic.events,
        events=events,
        stored=stored,
        expected=implied(events, cluster.config),
        published=published,
        uncommitted=len(everything),
        history=history,
        slack=slack,
        faults=dict(traffic.faults),
        kinds=dict(traffic.kinds),
        timeout=cluster.timeout,
    )

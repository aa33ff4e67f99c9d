"""The cluster path through an operator's week, in a minute and a half: a real broker (its
own, so it can be restarted), two workers in one group, a sink, a notifier and the strict
Slack fake, with live traffic from the real Emitter (harness.traffic) -- while a worker
is paused past its session timeout (SIGSTOP), the other is killed with SIGKILL under traffic
and started again, the notifier is killed while Slack holds its post, and the broker is
stopped for 9 seconds and started on its data again.

What must hold: no alert transition lost or published twice (each id once on
runwatch.alerts, in the history, and as one Slack message); no false firing (only the three
faults the traffic plays fire); every one of them on runwatch.alerts within BOUND seconds of
its condition becoming true -- by the design, a takeover's session timeout plus a rebuild
plus the rule's own threshold, in seconds, not minutes; and no worker data directory left
behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from kafka import KafkaConsumer
from test_live_surfaces import TOKEN, Proc
from test_sink import SinkProcess
from test_worker import WorkerProcess

from harness.slack_server import FakeSlack
from runwatch.dev.broker import KafkaBroker
from runwatch.store.store import Store
from runwatch.stream.kafka.host import DATADIR_PREFIX

#: solo: its heartbeat timeout is 4 s, and beside the heaviest tests (load average 8-9 on
#: two cores) its own traffic thread fell that far behind: `make test` runs it alone
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.solo]

TIMEOUT = 4.0  # heartbeat_lost's, for the test
SESSION = 6.0  # the workers' session timeout (the broker's minimum)
#: the most seconds from a condition becoming true to its alert on runwatch.alerts: a
#: takeover (the session timeout) and a rebuild and a tick, with room for a loaded machine
BOUND = 45.0
FAULTS = ["nan-0@8:nan", "dead-0@32:silent", "dead-1@54:silent"]
#: (rule, run) of each alert the faults must raise, and nothing else
EXPECTED = {
    ("non_finite_metric", "nan-0"),
    ("heartbeat_lost", "dead-0"),
    ("heartbeat_lost", "dead-1"),
}


class Traffic:
    """The traffic player, its fault lines collected as they come."""

    def __init__(self, bootstrap: str, prefix: str, spool: Path) -> None:
        cmd = [sys.executable, "-m", "harness.traffic", "--kafka", bootstrap,
               "--topic-prefix", prefix, "--runs", "12", "--duration", "80",
               "--spool", str(spool)]  # fmt: skip
        for fault in FAULTS:
            cmd += ["--fault", fault]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self.started = time.monotonic()
        self.faults: dict[str, float] = {}
        self.done = False
        self._reader = threading.Thread(target=self._read, name="traffic")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            said = json.loads(line)
            if said.get("done"):
                self.done = True
            else:
                self.faults[said["run"]] = said["at"]

    def at(self, seconds: float) -> None:
        """Wait until `seconds` into the traffic."""
        time.sleep(max(0.0, self.started + seconds - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(60)
        self._reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def published(bootstrap: str, topic: str) -> list[tuple[dict[str, Any], float]]:
    """Every record of `topic`: (the alert, its broker time)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000)  # fmt: skip
    try:
        return [(json.loads(r.value), r.timestamp / 1000.0) for r in consumer]
    finally:
        consumer.close()


def _tell(
    workers: list[WorkerProcess],
    notify: Proc,
    records: list[tuple[dict[str, Any], float]],
    traffic: Traffic | None,
    slack: FakeSlack,
) -> None:
    """What each part said, for a failure's report (times in seconds into the traffic)."""
    start = min(traffic.faults.values(), default=0.0) - 8 if traffic else 0.0
    for w in workers:
        print(f"--- worker {w.proc.pid}", *w.lines[-40:], sep="\n")
    print("--- notify", *notify.lines[-40:], sep="\n")
    print(
        "--- faults",
        {run: round(t - start, 1) for run, t in (traffic.faults if traffic else {}).items()},
    )
    print("--- slack calls", [m for m, _ in slack.calls][-20:])
    for r, t in records:
        print(f"--- alert {t - start:.1f}", r["state"], r["rule"], r["run"], r["summary"][:100])


def test_the_cluster_path_through_pauses_kills_and_a_broker_restart(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path / "kafka")
    bootstrap = broker.start()
    prefix, group = f"t{uuid.uuid4().hex[:8]}.", f"rw-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "rules.toml"
    config.write_text(f"[rules.heartbeat_lost]\ntimeout = {TIMEOUT}\n")
    slack = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
    slack.add_channel("#alerts", "C-ALERTS")
    notify_args = ["notify", "--kafka", bootstrap, "--topic-prefix", prefix, "--channel",
                   "#alerts", "--state", str(tmp_path / "notify.sqlite"), "--slack-url",
                   slack.url, "--group", f"n-{group}"]  # fmt: skip
    slack_env = {"SLACK_BOT_TOKEN": TOKEN}
    db = tmp_path / "history.duckdb"

    def worker() -> WorkerProcess:
        return WorkerProcess(bootstrap, prefix, group, config, 4,
                             extra=("--session-timeout", str(SESSION)))  # fmt: skip

    a, b = worker(), worker()
    workers = [a, b]
    notify = Proc(notify_args, slack_env)
    sink = SinkProcess(["--kafka", bootstrap, "--topic-prefix", prefix, "--db", str(db),
                        "--group", f"s-{group}", "-q"], log=tmp_path / "sink.log")  # fmt: skip
    traffic = None
    try:
        wait_for(lambda: a.live() and b.live(), "both workers live", timeout=120)
        traffic = Traffic(bootstrap, prefix, tmp_path / "spool")
        # a worker paused past its session timeout: the group gives its partitions away
        traffic.at(12)
        os.kill(a.proc.pid, signal.SIGSTOP)
        traffic.at(12 + SESSION + 4)
        os.kill(a.proc.pid, signal.SIGCONT)
        # the other killed under traffic, and started again
        traffic.at(26)
        b.kill()
        b = worker()
        workers.append(b)
        # the notifier killed while Slack holds the post of dead-1's firing
        traffic.at(50)
        slack.hold("chat.postMessage")
        assert slack.held.wait(60), "no post to hold"
        notify.proc.kill()
        notify.stop()
        slack.release()
        notify = Proc(notify_args, slack_env)
        # the broker stopped for 9 s and started on its data
        traffic.at(62)
        broker.stop()
        time.sleep(9)  # the outage itself
        broker.start()
        wait_for(lambda: traffic.done, "the traffic played out", timeout=180)

        def settled() -> list[tuple[dict[str, Any], float]] | None:
            records = published(bootstrap, f"{prefix}runwatch.alerts")
            fired = {(r["rule"], r["run"]) for r, _ in records if r["state"] == "firing"}
            roots = len(slack.roots())
            return records if fired >= EXPECTED and roots >= len(EXPECTED) else None

        settled_at = len(wait_for(settled, "every fault alerted, on Slack too", timeout=180,
                                  every=1))  # fmt: skip
        # what comes after the faults counts too (a stacks answer delayed by the outage
        # publishes its evidence late): the workers stop, then all they published is checked
        for w in workers:
            if w.proc.poll() is None:
                w.stop()
        records = published(bootstrap, f"{prefix}runwatch.alerts")
        print("--- published after the faults settled",
              [(r["state"], r["rule"], r["run"]) for r, _ in records[settled_at:]])  # fmt: skip
        ids = {r["id"] for r, _ in records}
        wait_for(lambda: ids <= set(_history(db)), "the history holds every transition",
                 timeout=120, every=1)  # fmt: skip
    except AssertionError:
        _tell(workers, notify, published(bootstrap, f"{prefix}runwatch.alerts"), traffic, slack)
        raise
    finally:
        if traffic is not None:
            traffic.close()
        for w in workers:
            if w.proc.poll() is None:
                w.stop()
        notify.stop()
        try:
            sink.stop()
        except AssertionError:
            print((tmp_path / "sink.log").read_text()[-6000:])
            raise
        slack.close()
        broker.stop()
    try:
        _check(records, traffic, slack, db, workers)
    except AssertionError:
        _tell(workers, notify, records, traffic, slack)
        raise


def _history(db: Path) -> list[str]:
    """The ids of the alert transitions the history holds (read while the sink writes)."""
    with Store.reader(db, wait=60) as store:
        return [r[0] for r in store.con.execute("SELECT id FROM alerts").fetchall()]


def _check(
    records: list[tuple[dict[str, Any], float]],
    traffic: Traffic,
    slack: FakeSlack,
    db: Path,
    workers: list[WorkerProcess],
) -> None:
    # no false firing, none lost, none twice
    firing = [(r, t) for r, t in records if r["state"] == "firing"]
    faults = [r for r, _ in firing if r["incident"]["role"] != "evidence"]
    assert {(r["rule"], r["run"]) for r in faults} == EXPECTED, [r["summary"] for r in faults]
    # the stacks a lost process's incident asked for (its live siblings answer on Kafka):
    # evidence of an expected incident, never an alert of its own
    for r, _ in firing:
        if r["incident"]["role"] == "evidence":
            assert r["rule"] == "process_stacks", r
            assert (r["incident"]["root_rule"], r["run"]) in EXPECTED, r
    ids = [r["id"] for r, _ in records]
    assert len(ids) == len(set(ids)), "a transition published twice"
    for key in {r["key"] for r, _ in records}:
        states = [r["state"] for r, _ in records if r["key"] == key]
        assert states == (["firing", "resolved"] * len(states))[: len(states)], (key, states)
    # each within BOUND of its condition
    for rule, run in EXPECTED:
        became_true = traffic.faults[run] + (TIMEOUT if rule == "heartbeat_lost" else 0.0)
        appended = min(t for r, t in firing if (r["rule"], r["run"]) == (rule, run))
        assert appended - became_true < BOUND, (rule, run, appended - became_true)
    # Slack: one message per transition it showed, no repeat after the kill
    shown = [m.metadata["event_payload"]["alert_id"] for m in slack.messages if m.metadata]
    assert len(shown) == len(set(shown)), "a Slack post made twice"
    opened: dict[str, str] = {}  # incident -> the firing that opened it: its thread's root
    for r, _ in firing:
        opened.setdefault(r["incident"]["id"], r["id"])
    # a root carries its firing's id, or a quick resolve's folded into it (of the same alert)
    by_id = {r["id"]: r for r, _ in records}
    roots = set()
    for m in slack.roots():
        shown = by_id[m.metadata["event_payload"]["alert_id"]] if m.metadata else None
        if shown is not None and shown["state"] == "resolved":
            shown = by_id[opened[shown["incident"]["id"]]]
            assert shown["key"] == by_id[m.metadata["event_payload"]["alert_id"]]["key"]
        if shown is not None:
            roots.add(shown["id"])
    assert roots == set(opened.values()), "an incident not shown as its own thread"
    # the history holds each transition once
    assert sorted(_history(db)) == sorted(ids)
    # the killed worker's data directory was swept by the next one; the others removed
    left = [
        p
        for p in os.listdir(tempfile.gettempdir())
        if p.startswith(DATADIR_PREFIX)
        and p[len(DATADIR_PREFIX) :].split("-")[0] in {str(w.proc.pid) for w in workers}
    ]
    assert left == []

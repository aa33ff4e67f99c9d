"""Fleet incidents on the Kafka path (issue 45 item 3): two `runwatch worker`s split the runs
of issue 45's fleet trace (the 24-run one serve's test plays, live at 40x, its server hung
longer) and the fleet stage they run between them judges the fleet records they publish. The
`shared_cause` transitions on `runwatch.alerts`, read `read_committed` (`Setup.read`), are
those a replay of the same events gives, each once; the member runs' own transitions carry
the fleet incident's id (`incident.fleet`, stamped by the workers from the stage's decisions
on `runwatch.fleet.members`) for at least 80% of each cause's runs, never an id replay does
not give them, each transition once -- also when a worker is killed mid-incident; and while
the reward server's fleet incident is open, a run that opted into the fleet pause reads the
held service in its view (`KafkaSource`: the run's record merged with the stage's `@fleet`
record), and the worker that judges it exports it on /metrics."""

from __future__ import annotations

import json
import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import http_get, terminate
from test_worker import RUNWATCH, Setup

from runwatch.dev.broker import free_port
from runwatch.dev.deliver import KafkaSink, send_live
from runwatch.dev.fleet import LIVE, fleet_cluster
from runwatch.dev.simulate import scaled_config
from runwatch.emitters.follower import KafkaSource
from runwatch.emitters.kafka_security import PLAINTEXT
from runwatch.emitters.runview import RunView
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEED = 40.0
PARAMS = {"window": 600.0 / SPEED, "users_within": 3600.0 / SPEED}
#: The test's own deadline (it takes about 60 s alone), inside pytest's timeout (300 s) with
#: room to stop the workers: a failure says what it waited for, and what the workers said.
BUDGET_S = 240.0
#: The shortest silence the trace's runs are judged on, on the wall clock (`LIVE`'s): the
#: live path agrees with replay only while the events reach it within that.
SILENT_S = min(scaled_config(SPEED, LIVE)[r][k] for r, k in (
    ("heartbeat_lost", "timeout"), ("inference_idle_with_pending", "idle_for"),
    ("stuck_progress", "min_stall"), ("ranks_stalled", "timeout")))  # fmt: skip


@pytest.fixture
def setup(kafka_broker: str, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(kafka_broker, tmp_path)
    s.config.write_text("[rules.shared_cause]\nhold = true\n"
                        + "".join(f"{k} = {v}\n" for k, v in PARAMS.items()))  # fmt: skip
    try:
        yield s
    finally:
        for w in s.workers:
            w.stop()


def fleet_of(alerts: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """subject -> every member run, as the resolutions name them."""
    return {a["subject"]: sorted(a["details"]["runs"]) for a in alerts
            if a["rule"] == "shared_cause" and a["state"] == "resolved"}  # fmt: skip


@pytest.mark.parametrize("stage", ["in the workers, one killed", "alone"])
def test_two_workers_and_the_fleet_stage_give_replays_fleet_incidents(
    setup: Setup, stage: str
) -> None:
    """The stage run by `runwatch fleet` on its own; or by the workers (one judges), one
    of which is killed (SIGKILL) once the reward server's fleet incident is open and the
    stage has told it (the member run's view holds the server): the other takes its
    partitions over, and the stage if it held it, and publishes what the dead one had not
    committed, stamped as it knows it then. The server hangs 1000 s of the trace (25 s at
    40x): the group notices a death after 6 s, and the stage's decision reaches the workers
    some seconds after the incidents it joins opened (its watermark trails the partitions'
    marks; more on a loaded machine) -- a member run that heals before its worker knows
    carries no fleet id, which replay's would."""
    alone = stage == "alone"
    killed = not alone
    cluster, expected = fleet_cluster(runs=24, node_runs=3, coincident=3, duration=1600.0,
                                      hang_at=400.0, hang_for=1000.0, node_down_at=460.0,
                                      crash_at=430.0, trajectories=8,
                                      config=LIVE)  # fmt: skip
    extra = ("--no-fleet-stage",) if alone else ("--session-timeout", "6",
                                                  "--checkpoint-every", "5")  # fmt: skip
    deadline = time.monotonic() + BUDGET_S
    ports = [free_port(), free_port()] if killed else [None, None]
    workers = [setup.worker(4, port, *extra) for port in ports]
    for w in workers:
        w.wait_live(timeout=max(1.0, deadline - time.monotonic()))
    fleet = None
    if alone:
        cmd = [RUNWATCH, "fleet", "--kafka", setup.bootstrap, "--topic-prefix", setup.prefix,
               "--app-id", setup.group, "--config", str(setup.config)]  # fmt: skip
        fleet = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    said, stopped = "", 0
    member = sorted(expected.dep_runs)[0]
    source = KafkaSource(setup.bootstrap, member, f"{setup.prefix}runwatch.breaker")
    exported: list[str] = []

    def judged_and_killed() -> None:
        """The open fleet incident on the /metrics of the worker that judges (as on serve's),
        then the first worker killed."""
        for port in ports:
            answer = http_get(port, "/metrics") if port is not None else None
            exported.extend(answer[1].splitlines() if answer is not None else ())
        workers[0].kill()

    watch = ViewWatch(source, judged_and_killed if killed else None)
    try:
        sink = TimedSink(setup.bootstrap, setup.events, PLAINTEXT)
        t0 = time.time() + 0.2
        sent = send_live(cluster, sink, SPEED, t0=t0, every=5.0)

        def said_so() -> str:
            return f"{sink.said()}\n{said_by(workers, fleet)}"

        check_alerts(setup, cluster, expected, t0, sent, watch.held, deadline, said_so)
        print(sink.said())  # (shown with -s)
        assert not killed or workers[0].proc.returncode == -9, "the first worker not killed"
        gauge = f'runwatch_fleet_incident_runs{{cause="{expected.dep}",kind="dep"}}'
        assert alone or any(line.startswith(gauge) for line in exported), exported[-40:]
    finally:
        watch.stop()
        if fleet is not None:
            stopped = terminate(fleet)
            assert fleet.stderr is not None
            said = fleet.stderr.read()
            fleet.stderr.close()
            print(said[-5000:])  # (shown when the test fails)
    in_workers = "\n".join(line for w in workers for line in w.lines)
    assert "fleet stage: holds" in (said if alone else in_workers), (said or in_workers)[-3000:]
    assert alone == ("fleet stage" not in in_workers)
    assert stopped == 0, said[-3000:]  # SIGTERM: a clean stop


class TimedSink(KafkaSink):
    """The events to the broker, noting how late the sender got: one that falls behind the
    trace by more than its shortest silence (`SILENT_S`) makes every run look silent on
    the live path, which a replay of the same events never sees."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.late = 0.0

    def send(self, batch: list[dict[str, Any]]) -> None:
        super().send(batch)
        self.late = max(self.late, time.time() - batch[0]["ts"])

    def said(self) -> str:
        return (f"the sender was at most {self.late:.2f} s behind the trace (silence on the "
                f"live path: {SILENT_S:.2f} s)")  # fmt: skip


class ViewWatch:
    """The member run's view, as its emitters' follower reads it, looked at every half
    second in a thread of its own until stopped (a look reads Kafka, and the sender must
    not wait on it: `TimedSink`); the first time it holds the reward server, `on_held`
    (the worker killed mid-incident, whenever the stage decides)."""

    def __init__(self, source: KafkaSource, on_held: Callable[[], None] | None) -> None:
        self.source, self.on_held = source, on_held
        self.held: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="view-watch")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.5):
                _look(self.source, self.held)
                if self.held and self.on_held is not None:
                    on_held, self.on_held = self.on_held, None
                    on_held()
        finally:
            self.source.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def check_alerts(setup: Setup, cluster: Any, expected: Any, t0: float, sent: int,
                 held: list[str], deadline: float, said: Callable[[], str]) -> None:  # fmt: skip
    """The fleet transitions on runwatch.alerts are replay's, each once; the member run's
    view held the reward server while its fleet incident was open."""
    service, causes = expected.dep.removeprefix("dep:"), {expected.dep, expected.host}
    while (
        set(fleet_of(alerts := [a for a, _ in setup.read("runwatch.alerts")])) < causes
        or service not in held
    ):
        if time.monotonic() > deadline:
            runs = sum(a["run"] != "@fleet" for a in alerts)
            raise AssertionError(
                f"fleet incidents resolved on runwatch.alerts: {sorted(fleet_of(alerts))}, "
                f"waited for {expected.dep} and {expected.host}; the member run's view held "
                f"{sorted(set(held))}, waited for {service} ({runs} run transitions there)\n"
                f"{said()}"
            )
        time.sleep(0.5)
    fleet = [a for a in alerts if a["rule"] == "shared_cause"]
    assert len({a["id"] for a in fleet}) == len(fleet), "a fleet transition twice"
    rules = RulesConfig.from_mapping({"rules": {"shared_cause": PARAMS}})
    events = list(cluster.events(t0, SPEED))  # the same events, made again (deterministic)
    assert len(events) == sent
    lines = (("f", i, json.dumps(e).encode()) for i, e in enumerate(events))
    replayed = [a.to_dict() for a in replay(lines, Engine(rules))]
    assert fleet_of(alerts) == fleet_of(replayed), said()
    firing = sorted(a["subject"] for a in fleet if a["state"] == "firing")
    assert firing == sorted([expected.dep, expected.host]), firing
    check_members(alerts, replayed, expected, said)


def check_members(alerts: list[dict[str, Any]], replayed: list[dict[str, Any]],
                  expected: Any, said: Callable[[], str]) -> None:  # fmt: skip
    """The member runs' own transitions carry the fleet incident's id (contract section 8)
    as the workers learn the stage's decisions: each transition once, none that replay also
    makes carrying an id replay does not give it, and at least 80% of each cause's runs
    carrying it. A transition replay does not make at all (a run the live path saw silent
    while a starved sender or worker fell behind the trace) is not compared: it may carry
    the id of a fleet incident open then, of its own cause (`carry <= users` below); nor is
    one stamped with a fleet incident that had resolved in event time by then (the worker
    had not yet read the stage's decision: `runwatch.stream.fleet.members`). Nor is
    one the live path put in another run incident than replay did: its silences are judged
    at the worker's ticks, so a root that replay resolves just before a symptom fires may
    still be open live (the symptom joins it, a member, where replay's opens one of its own)."""
    runs = [a for a in alerts if a["run"] != "@fleet"]
    assert len({a["id"] for a in runs}) == len(runs), "a run transition twice"
    replays = {a["id"]: a for a in replayed}
    over = {a["incident"]["id"]: a["ts"] for a in replayed
            if a["run"] == "@fleet" and a["state"] == "resolved"}  # fmt: skip
    wrong = [(a["id"], a["run"], a["rule"], a["ts"], _fleet(a), _fleet(replays[a["id"]]))
             for a in runs if a["id"] in replays and _incident(a) == _incident(replays[a["id"]])
             and _fleet(a) not in (None, _fleet(replays[a["id"]]))
             and a["ts"] < over.get(_fleet(a) or "", math.inf)]  # fmt: skip
    assert not wrong, wrong
    apart = [a for a in runs if _incident(a) != _incident(replays.get(a["id"], {}))]
    ids = {a["incident"]["id"] for a in replayed if a["run"] == "@fleet"}
    assert {_fleet(a) for a in apart} <= ids | {None}, apart
    live_only = [a for a in runs if a["id"] not in replays]
    for thing, users in ((expected.dep, expected.dep_runs), (expected.host, expected.host_runs)):
        carry = {a["run"] for a in runs if (_fleet(a) or "").startswith(f"fleet|{thing}|")}
        assert carry <= users, sorted(carry - users)
        assert len(carry) >= 0.8 * len(users), (thing, sorted(carry), sorted(users), said())
        ours = sum((_fleet(a) or "").startswith(f"fleet|{thing}|") for a in runs)
        theirs = sum((_fleet(a) or "").startswith(f"fleet|{thing}|") for a in replayed)
        print(
            f"{thing}: {len(carry)} of {len(users)} runs carry it, on {ours} transitions "
            f"(replay: {theirs}); {len(live_only)} transitions replay does not make"
        )  # (shown with -s)


def said_by(workers: list[Any], fleet: subprocess.Popen[str] | None) -> str:
    """What the workers said of the fleet stage and their partitions, and their last lines
    (a failure's context)."""
    out = []
    for i, w in enumerate(workers):
        lines = w.lines
        stage = [ln for ln in lines if "fleet" in ln or "assigned partitions" in ln]
        out.append(f"-- worker {i} ({w.proc.poll()=}):\n" + "\n".join(stage[-30:] + lines[-15:]))
    if fleet is not None:
        out.append(f"-- runwatch fleet: {fleet.poll()=}")
    return "\n".join(out)


def _fleet(alert: dict[str, Any]) -> str | None:
    return (alert.get("incident") or {}).get("fleet")


def _incident(alert: dict[str, Any]) -> str | None:
    return (alert.get("incident") or {}).get("id")


def _look(source: KafkaSource, held: list[str]) -> None:
    """One look at the member run's view, as its emitters' follower takes it."""
    try:
        raw = source.fetch()
    except Exception:  # (the follower's way: the next look tries again)
        return
    if raw is not None:
        held += [h.dep for h in RunView.parse(raw).held]

"""Many jobs watched into one `runwatch serve`: a run is judged as it would be alone,
whatever the other runs' deliveries do (contract section 2).

Every console of tests/played.py is read by `runwatch watch`'s own reader (`Watcher`) into
the events it sends, stamped on a fake clock: all the jobs start together on one host, as a
user with many jobs starts them. Each job's batches reach the service in process one after
the other (one sender: a batch waits for the one before), on a loaded start's delivery
times: for the first seconds a batch takes up to several seconds on its way, then a few
milliseconds. The service runs on the same fake clock, ticking as serve's main loop does,
with the rules' defaults (a hung job is watched past them). Each run must make the same
alerts, saying the same, as a serve with that job alone does, and raise what its console
supports (what `runwatch diagnose` and the end-to-end test read in it).

Until issue 43's two clocks, a batch a few seconds late (a loaded emitter starting) held the
one clock of every run, as if the service had been cut off: a run whose NaN step or failure
came meanwhile ended (its run.finished, in the same batch, closes its alerts) before its
condition could ripen, and never alerted, though alone it did. Deterministic: the delivery
times come from a seeded generator.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import random
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from played import MANIFEST, hangs, text

from runwatch.dev import envelope
from runwatch.emitters.console import LineParser
from runwatch.emitters.watch import Watcher
from runwatch.service.core import TOPIC, Service
from runwatch.stream.alerts import Alert
from runwatch.stream.decode import admit
from runwatch.stream.live import LiveDriver

T0 = 1_800_000_000.0
HOST = "node-7"  # every job on one host: one clock, many runs
#: seconds of the start during which batches are slow, and how slow they may be
LOADED_S, SLOWEST_S = 12.0, 6.0
#: how long the hung jobs are watched (heartbeats every 10 s: past the rules' defaults for a
#: collective's settle, a stalled engine and stalled ranks), and serve's tick
HUNG_FOR_S, TICK_S = 330.0, 0.25
END = T0 + HUNG_FOR_S + LOADED_S + SLOWEST_S


class Recorder:
    """What `Watcher` sends through its emitter, kept in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any] | None, str, dict[str, Any]]] = []

    def emit(self, kind: str, /, **fields: Any) -> None:
        self.sent.append((None, kind, fields))

    def emit_from(self, src: dict[str, Any], kind: str, /, **fields: Any) -> None:
        self.sent.append((src, kind, fields))


def watched(name: str) -> list[tuple[dict[str, Any] | None, str, dict[str, Any]]]:
    """What `runwatch watch -- cat FILE` sends of the console, read as watch reads it."""
    recorder = Recorder()
    # a wait a line shows began before the line was read: on the fake clock, as its events
    watcher = Watcher(recorder, LineParser(), progress_every=1.0,  # type: ignore[arg-type]
                      clock=lambda: T0)  # fmt: skip
    read, write = os.pipe()
    sink = os.open(os.devnull, os.O_WRONLY)

    def play() -> None:
        with os.fdopen(write, "wb") as out:
            out.write(text(name))

    writer = threading.Thread(target=play)
    writer.start()
    try:
        watcher.pump({read: sink})
    finally:
        writer.join()
        os.close(read)
        os.close(sink)
    return recorder.sent


class Job:
    """One watched console's batches, stamped on the fake clock from `start`."""

    def __init__(self, index: int, name: str, start: float) -> None:
        self.name = name
        self.ids = (f"{name}-{i}" for i in itertools.count())
        self.src = {"component": "trainer", "host": HOST, "pid": 1000 + index}
        self.batches = [
            [self.event("run.started", start, labels={"command": f"cat {name}.log"}),
             self.event("heartbeat", start)],
            [self.event(kind, start + 0.2 + i * 1e-4, src, **fields)
             for i, (src, kind, fields) in enumerate(watched(name))],
        ]  # fmt: skip
        end = start + 0.3
        if hangs(name):  # it prints its console and hangs: watch beats on
            beats = range(10, int(HUNG_FOR_S) + 1, 10)
            self.batches += [[self.event("heartbeat", start + t)] for t in beats]
        else:
            self.batches.append([self.event("run.finished", end, status="ok", exit_code=0),
                                 self.event("heartbeat", end, final=True)])  # fmt: skip

    def event(
        self, kind: str, ts: float, src: dict[str, Any] | None = None, **fields: Any
    ) -> bytes:
        where = {**self.src, **(src or {})}
        return json.dumps(envelope.event(kind, ts, self.name, where, next(self.ids), **fields))


def deliveries(jobs: list[Job], seed: int) -> Iterator[tuple[float, list[bytes]]]:
    """(arrival, lines) of every batch of every job, in arrival order: a job's batch leaves
    once it is stamped and the one before it has arrived."""
    rng = random.Random(seed)
    out: list[tuple[float, int, list[bytes]]] = []
    n = itertools.count()
    for job in jobs:
        arrived = -1.0
        for batch in filter(None, job.batches):  # (a console may say nothing)
            stamped = json.loads(batch[-1])["ts"]
            sent = max(stamped, arrived)
            slow = sent - T0 < LOADED_S
            arrived = sent + (rng.uniform(0.05, SLOWEST_S) if slow else rng.uniform(0.001, 0.02))
            heapq.heappush(out, (arrived, next(n), [line.encode() for line in batch]))
    while out:
        arrival, _, lines = heapq.heappop(out)
        yield arrival, lines


class Ticks:
    """serve's main loop on the fake clock: a tick every TICK_S seconds."""

    def __init__(self) -> None:
        self.at = T0

    def until(self, end: float) -> Iterator[float]:
        while self.at + TICK_S <= end:
            self.at += TICK_S
            yield self.at


def firing(alerts: Iterable[Alert | dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Per run, the (rule, summary) of each firing transition, in order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for a in alerts:
        d = a if isinstance(a, dict) else a.to_dict()
        if d["state"] == "firing":
            out.setdefault(d["run"], []).append((d["rule"], d["summary"]))
    return out


def served(where: Path, jobs: list[Job], seed: int) -> dict[str, list[tuple[str, str]]]:
    """The jobs' batches into one service, in process, on the fake clock."""
    now = [T0]
    service = Service(where / "h.duckdb", where / "wal", clock=lambda: now[0])
    try:
        service.recover()
        loop = Ticks()
        for arrival, lines in deliveries(jobs, seed):
            for now[0] in loop.until(arrival):  # between requests
                service.tick()
            now[0] = arrival
            got = service.ingest(lines)
            assert (got.accepted, got.rejected) == (len(lines), [])
        for now[0] in loop.until(END):
            service.tick()
        return firing(service.alerts(limit=len(service.recent)))
    finally:
        service.close()


def alone(job: Job, seed: int) -> list[tuple[str, str]]:
    """What a serve with this one job decides: its driver alone, fed and ticked as the
    service feeds and ticks it (no logs: they change no verdict, and cost a disk's time)."""
    driver = LiveDriver(topic=TOPIC, fleet=True)
    made: list[Alert] = []
    loop = Ticks()
    for arrival, lines in deliveries([job], seed):
        for at in loop.until(arrival):
            made += driver.tick(at)
        decoded = [(admit(line, arrival), line, arrival, i, 0) for i, line in enumerate(lines)]
        made += driver.feed_events(decoded)[0]
    for at in loop.until(END):
        made += driver.tick(at)
    return firing(made).get(job.name, [])


@pytest.mark.parametrize("seed", [1, 2])
def test_jobs_watched_into_one_serve_are_judged_each_as_alone(tmp_path: Path, seed: int) -> None:
    jobs = [Job(i, name, T0 + i * 0.02) for i, name in enumerate(sorted(MANIFEST))]
    shared = served(tmp_path, jobs, seed)
    for job in jobs:
        assert shared.get(job.name, []) == alone(job, seed), job.name
        fired = sorted({rule for rule, _ in shared.get(job.name, [])})
        assert fired == sorted(MANIFEST[job.name]["rules"]), job.name

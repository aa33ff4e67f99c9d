"""The fleet pause, trainer side (`runwatch.emitters.hold`): calls to a service held while
the run view lists it for a run that opted in, one canary let through per interval, the
hold lifted by a canary that succeeds (and again on a relapse), nothing held for a run that
did not opt in, every hold released when runwatch cannot be read or sends something that
is not a run view (fail open), and an asyncio worker's wait awaited.

The view comes from a scripted source through the emitter's real follower; time for the
canaries is a clock the test moves (the follower's next look wakes the waiting calls); the
events go to a directory and are read back."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_events

from runwatch.dev.broker import free_port
from runwatch.emitters import Emitter
from runwatch.emitters.hold import Holds

from .test_guard import DEADLINE_S, Scripted, wait_for

SANDBOX = "sandbox@pool-a:443"
FLEET = f"fleet|dep:{SANDBOX}|1"


def view(hold: float | None = 60.0, held: tuple[str, ...] = (SANDBOX,), fleet: str = FLEET,
         back: float | None = None, **more: Any) -> bytes:  # fmt: skip
    """A run view as serve answers it: the run's opt-in and the services held."""
    wire: dict[str, Any] = {"v": 1, "run": "r", "ts": 0.0, "lifted": 0, "resumed": None,
                            "alerts": []}  # fmt: skip
    if hold is not None:
        wire["hold"] = {"canary_every": hold}
    if held:
        wire["held"] = [{"dep": dep, "fleet": fleet, "since": 0.0, "back": back} for dep in held]
    return json.dumps({**wire, **more}).encode()


class Clock:
    """The holds' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sandbox:
    """A sandbox pool that is down (every call refused) until the test brings it up."""

    def __init__(self) -> None:
        self.up = False
        self.calls: list[str] = []

    def run(self, who: str) -> str:
        self.calls.append(who)
        if not self.up:
            raise ConnectionError("pool-a: connection refused")
        return "ok"


class Pausing:
    """An emitter writing to a directory, its run view from a scripted source, its holds
    on the test's clock; rollouts on threads of their own."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.source = Scripted(None)
        monkeypatch.setattr(Emitter, "_view_source", lambda em, topic=None: self.source)
        self.dir = tmp_path / "events"
        self.em = Emitter(run="r", component="rollout", path=self.dir, heartbeat=False,
                          stacks=False)  # fmt: skip
        self.clock = Clock()
        self.holds: Holds = self.em.holding(poll_interval=0.01)
        self.holds.clock = self.clock
        self.sandbox = Sandbox()
        self.results: dict[str, str] = {}
        self.threads: list[threading.Thread] = []

    def rollout(self, name: str) -> None:
        def body() -> None:
            try:
                with self.em.trajectory(name, step=1) as t:
                    t.phase("generate")
                    with t.call("sandbox", dep=SANDBOX):
                        self.sandbox.run(name)
                self.results[name] = "ok"
            except ConnectionError:
                self.results[name] = "error"

        thread = threading.Thread(target=body, name=f"rollout-{name}")
        thread.start()
        self.threads.append(thread)

    def tick(self, seconds: float) -> None:
        """Move the clock; the follower's next look wakes the waiting calls."""
        self.clock.now += seconds

    def events(self, prefix: str = "dep.") -> list[dict[str, Any]]:
        assert self.em.flush(timeout=DEADLINE_S)
        return [e for e in read_events(self.dir) if e["kind"].startswith(prefix)]

    def close(self) -> None:
        self.em.close(timeout=1)
        for thread in self.threads:
            thread.join(DEADLINE_S)
        assert not [t.name for t in self.threads if t.is_alive()]


@pytest.fixture
def pausing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pausing]:
    p = Pausing(tmp_path, monkeypatch)
    yield p
    p.close()


def test_held_calls_wait_one_canary_per_interval_and_a_canary_that_succeeds_lifts_it(
    pausing: Pausing,
) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "the view's hold reaches the emitter")
    for k in range(3):
        p.rollout(f"t{k}")
    wait_for(lambda: holds.waiting(SANDBOX) == 3, "three calls wait")
    assert p.sandbox.calls == []  # nothing reaches the pool while it is held

    p.tick(61)  # one canary goes through; the pool is still down
    wait_for(lambda: len(p.results) == 1, "the canary ends")
    assert list(p.results.values()) == ["error"]
    assert holds.canaries == 1
    assert holds.waiting(SANDBOX) == 2  # the others still wait

    p.sandbox.up = True
    p.tick(61)  # the next canary succeeds: every call goes on
    wait_for(lambda: len(p.results) == 3, "the held calls go on")
    assert sorted(p.results.values()) == ["error", "ok", "ok"]
    assert holds.canaries == 2
    assert not holds.held(SANDBOX)
    with p.em.hold(dep=SANDBOX):  # healthy: a new call does not wait
        pass

    said = [(e["kind"], e.get("status") or e.get("reason")) for e in p.events()]
    assert said == [("dep.held", None), ("dep.canary", "error"), ("dep.canary", "ok"),
                    ("dep.released", "healthy")]  # fmt: skip
    held, _, _, released = p.events()
    assert (held["dep"], held["fleet"]) == (SANDBOX, FLEET)
    assert released["waited"] == 3
    # every call that waited was in phase `held` on the sandbox; the only trajectory that
    # failed was the canary's
    phases = [e for e in p.events("trajectory.phase") if e["phase"] == "held"]
    assert sorted(e["traj"] for e in phases) == ["t0", "t1", "t2"]
    assert {e["dep"] for e in phases} == {SANDBOX}
    failed = [e for e in p.events("trajectory.done") if e["status"] != "ok"]
    assert len(failed) == 1 == sum(e.get("status") == "error" for e in p.events())


def test_calls_that_fail_in_a_row_after_a_canary_hold_the_service_again(pausing: Pausing) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")
    p.sandbox.up = True
    p.tick(61)
    p.rollout("canary")
    wait_for(lambda: p.results.get("canary") == "ok", "the canary succeeds")
    assert not holds.held(SANDBOX)
    p.sandbox.up = False
    for k in range(holds.relapse_after):
        assert not holds.held(SANDBOX)
        p.rollout(f"fails-{k}")
        wait_for(lambda k=k: f"fails-{k}" in p.results, "a call fails")
    assert holds.held(SANDBOX)  # the fleet incident is still open: held again
    p.rollout("waits")
    wait_for(lambda: holds.waiting(SANDBOX) == 1, "the next call waits")
    p.source.answer = view(hold=60.0, held=())  # the fleet incident resolves
    wait_for(lambda: "waits" in p.results, "it goes on")
    reasons = [e.get("reason") for e in p.events() if e["kind"] == "dep.released"]
    assert reasons == ["resolved"]  # (the first hold had no waiting call to release)
    assert [e["kind"] for e in p.events()].count("dep.held") == 1


def test_the_service_s_own_heartbeats_lift_the_hold_too(pausing: Pausing) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")
    p.sandbox.up = True
    for k in range(2):
        p.rollout(f"t{k}")
    wait_for(lambda: holds.waiting(SANDBOX) == 2, "two calls wait")
    p.source.answer = view(hold=60.0, back=5.0)  # the pool's own process beats again
    wait_for(lambda: len(p.results) == 2, "the calls go on, no canary needed")
    assert holds.canaries == 0
    reasons = [e.get("reason") for e in p.events() if e["kind"] == "dep.released"]
    assert reasons == ["beating"]
    p.sandbox.up = False  # it fails again: held again, until it is back once more
    for k in range(holds.relapse_after):
        p.rollout(f"fails-{k}")
        wait_for(lambda k=k: f"fails-{k}" in p.results, "a call fails")
    wait_for(lambda: holds.held(SANDBOX), "held again")
    looks = holds.looks
    wait_for(lambda: holds.looks > looks + 2, "the view is read again")
    assert holds.held(SANDBOX)  # the same word of it does not lift it again
    p.source.answer = view(hold=60.0, back=9.0)
    wait_for(lambda: not holds.held(SANDBOX), "back once more")


def test_a_run_that_did_not_opt_in_is_not_held(pausing: Pausing) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=None)  # the fleet incident is open; the run said nothing
    wait_for(lambda: holds.looks > 2, "the view is read")
    assert not holds.held(SANDBOX)
    p.rollout("t0")
    wait_for(lambda: "t0" in p.results, "the call goes straight through")
    assert p.sandbox.calls == ["t0"]
    assert p.events() == []


def test_a_new_fleet_incident_is_a_new_hold(pausing: Pausing) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")
    p.rollout("t0")
    wait_for(lambda: holds.waiting(SANDBOX) == 1, "waits")
    p.source.answer = view(hold=60.0, fleet=f"fleet|dep:{SANDBOX}|2")
    wait_for(lambda: [e["kind"] for e in p.events()] == ["dep.held", "dep.released", "dep.held"],
             "the old hold released, the call waits in the new one")  # fmt: skip
    assert p.events()[1]["reason"] == "resolved"
    assert p.events()[2]["fleet"] == f"fleet|dep:{SANDBOX}|2"
    assert holds.waiting(SANDBOX) == 1
    p.em.close(timeout=1)  # the emitter's end releases what it holds, and the call goes on
    wait_for(lambda: "t0" in p.results, "the call goes on at close")


def test_an_unreachable_runwatch_holds_nothing(
    pausing: Pausing, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runwatch.emitters")
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")
    for k in range(2):
        p.rollout(f"t{k}")
    wait_for(lambda: holds.waiting(SANDBOX) == 2, "two calls wait")
    p.source.answer = ConnectionRefusedError(111, "Connection refused")
    wait_for(lambda: len(p.results) == 2, "fail open: the calls go on")
    failures = holds.failures
    wait_for(lambda: holds.failures > failures + 3, "it keeps looking")
    assert not holds.held(SANDBOX)
    (released,) = [e for e in p.events() if e["kind"] == "dep.released"]
    assert (released["reason"], released["waited"]) == ("unreachable", 2)
    said = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    assert len(said) == 1
    assert "Connection refused" in said[0]
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "back: held again")


def test_an_emitter_whose_service_is_not_there_never_waits(tmp_path: Path) -> None:
    em = Emitter(run="r", component="rollout", url=f"http://127.0.0.1:{free_port()}",
                 spool=tmp_path, heartbeat=False, stacks=False)  # fmt: skip
    try:
        holds = em.holding(poll_interval=0.01)
        wait_for(lambda: holds.failures > 0, "the view cannot be read")
        with em.hold(endpoint="https://pool-a:443"):  # `sandbox`-less: named without a role
            pass
        assert holds.canaries == 0
        assert not holds.held("pool-a:443")
    finally:
        em.close(timeout=0.5)


HOSTILE = [
    b"",
    b"[1, 2]",
    b"\xff\xfe",
    view(hold=0.0),  # a canary every 0 seconds: not a policy
    view(hold=-1.0),
    view(hold=1e400),  # infinite
    view(held=("",)),  # an empty service name
    view(held=("x" * 201,)),
    view(v=2),
    json.dumps({**json.loads(view()), "hold": {"canary_every": "60"}}).encode(),
    json.dumps({**json.loads(view()), "held": [{"dep": SANDBOX}]}).encode(),
    json.dumps({**json.loads(view()), "held": {"dep": SANDBOX}}).encode(),
    json.dumps({**json.loads(view()), "held": [{"dep": 7, "fleet": FLEET, "since": 0.0}]}).encode(),
    view(held=tuple(f"s{k}@pool:443" for k in range(257))),  # more than one view may hold
]


@pytest.mark.parametrize("record", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_or_malformed_view_is_refused_and_the_follower_goes_on(
    pausing: Pausing, record: bytes
) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")
    p.rollout("t0")
    wait_for(lambda: holds.waiting(SANDBOX) == 1, "a call waits")
    p.source.answer = record
    wait_for(lambda: "t0" in p.results, "refused: fail open, the call goes on")
    failures = holds.failures
    wait_for(lambda: holds.failures > failures + 2, "the follower goes on looking")
    assert not holds.held(SANDBOX)
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "a good view again: held again")
    assert p.em._follower is not None
    assert p.em._follower._thread.is_alive()


def test_an_asyncio_worker_awaits_the_hold_and_its_loop_goes_on(pausing: Pausing) -> None:
    p, holds = pausing, pausing.holds
    p.source.answer = view(hold=60.0)
    wait_for(lambda: holds.held(SANDBOX), "held")

    async def until(what: Any, why: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while not what():
            assert loop.time() < deadline, why
            await asyncio.sleep(0.01)

    async def rollout(name: str) -> str:
        async with p.em.trajectory(name) as t, t.call("sandbox", dep=SANDBOX):
            return p.sandbox.run(name)

    async def main() -> list[str]:
        calls = [asyncio.create_task(rollout(f"t{k}")) for k in range(2)]
        await until(lambda: holds.waiting(SANDBOX) == 2, "both wait, awaited")
        other = await asyncio.wait_for(asyncio.sleep(0, result="the loop runs"), DEADLINE_S)
        assert other == "the loop runs"
        assert not any(c.done() for c in calls)
        p.sandbox.up = True
        p.tick(61)  # one canary; it succeeds and lets the other go
        return list(await asyncio.wait_for(asyncio.gather(*calls), DEADLINE_S))

    assert asyncio.run(main()) == ["ok", "ok"]
    assert holds.canaries == 1
    assert [e["kind"] for e in p.events()] == ["dep.held", "dep.canary", "dep.released"]

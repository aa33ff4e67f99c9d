"""The fleet pause held and lifted in a sandbox outage, through a real `runwatch serve` with
real emitters (issue 45, item 7).

Four runs share a sandbox pool; three opted in (`run.started.config`: `shared_cause.hold`).
The pool hangs: each run's first rollouts sit in the sandbox while vLLM idles, every run's
stall names the pool, and the pool's fleet incident opens. The runs that opted in hold
their next calls to it (no more errored trajectories but the canaries'); the one that did
not sends them into the pool. vLLM gets other work, so the stalls resolve -- and the held
work keeps the runs' incidents, and the fleet incident, open. The pool is refused, then
heals: a canary succeeds, the held calls go on and succeed, the runs' incidents close, the
fleet incident resolves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from runwatch.dev.launch import ServeProcess
from runwatch.emitters import Emitter

pytestmark = pytest.mark.slow

SANDBOX = "sandbox@pool-a:443"
OPTED = ("run-a", "run-b", "run-c")
PLAIN = "run-d"
DEADLINE_S = 120.0


class Pool:
    """The shared sandbox pool: `hang` (a call waits until the mode changes), `refuse` (a
    call fails at once), `up`."""

    def __init__(self) -> None:
        self.mode = "hang"
        self.changed = threading.Condition()

    def set(self, mode: str) -> None:
        with self.changed:
            self.mode = mode
            self.changed.notify_all()

    def run(self) -> str:
        with self.changed:
            self.changed.wait_for(lambda: self.mode != "hang")
            if self.mode == "refuse":
                raise ConnectionError("pool-a:443: connection refused")
        return "ok"


class Run:
    """One run's rollout worker: its emitter, and rollouts on threads of their own -- a
    batch of them, or slots that start one rollout after another until told to stop."""

    def __init__(self, name: str, url: str, pool: Pool, tmp: Path, opt_in: bool) -> None:
        self.name, self.pool = name, pool
        self.em = Emitter(run=name, component="rollout", url=url, heartbeat=False,
                          stacks=False, spool=tmp / name)  # fmt: skip
        self.holds = self.em.holding(poll_interval=0.05)
        config: dict[str, Any] = {"inference_idle_with_pending": {"idle_for": 1.0}}
        if opt_in:
            config["shared_cause"] = {"hold": True, "canary_every": 0.5}
        self.em.emit("run.started", config=config)
        self.outcomes: dict[str, str] = {}
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()

    def stats(self, running: int) -> None:
        self.em.emit("inference.stats", server="vllm-0", running=running, waiting=0)

    def rollouts(self, wave: str, n: int = 2) -> None:
        for k in range(n):
            name = f"{self.name}-{wave}{k}"
            thread = threading.Thread(target=self._rollout, args=(name,), name=name)
            thread.start()
            self.threads.append(thread)

    def slots(self, wave: str, n: int = 2, most: int = 100) -> None:
        """`n` slots, each rolling out one trajectory after another (at most `most`)."""
        for k in range(n):

            def loop(k: int = k) -> None:
                for i in range(most):
                    if self.stop.is_set():
                        return
                    self._rollout(f"{self.name}-{wave}{k}.{i}")

            thread = threading.Thread(target=loop, name=f"{self.name}-{wave}{k}")
            thread.start()
            self.threads.append(thread)

    def _rollout(self, traj: str) -> None:
        try:
            with self.em.trajectory(traj, step=1) as t:
                t.phase("generate")
                with t.call("sandbox", dep=SANDBOX):
                    self.pool.run()
            self.outcomes[traj] = "ok"
        except ConnectionError:
            self.outcomes[traj] = "error"

    def errors(self, wave: str) -> int:
        return sum(v == "error" for k, v in list(self.outcomes.items()) if f"-{wave}" in k)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(DEADLINE_S)
        self.em.close(timeout=5)


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[tuple[ServeProcess, Pool, dict[str, Run]]]:
    pool = Pool()
    runs: dict[str, Run] = {}
    with ServeProcess(tmp_path / "h.duckdb") as serve:
        try:
            for name in (*OPTED, PLAIN):
                runs[name] = Run(name, serve.url, pool, tmp_path, opt_in=name in OPTED)
            yield serve, pool, runs
        finally:
            pool.set("up")  # nothing waits in the pool after the test
            for run in runs.values():
                run.close()
    assert not [t.name for r in runs.values() for t in r.threads if t.is_alive()]


def transitions(serve: ServeProcess, rule: str | None = None) -> list[dict[str, Any]]:
    alerts = serve.get("/v1/alerts?limit=2000")["alerts"]
    return [a for a in alerts if rule is None or a["rule"] == rule]


def fired(serve: ServeProcess, rule: str, state: str = "firing") -> set[str]:
    return {a["run"] for a in transitions(serve, rule) if a["state"] == state}


def test_the_pause_holds_during_a_sandbox_outage_and_lifts_when_it_heals(
    outage: tuple[ServeProcess, Pool, dict[str, Run]],
) -> None:
    serve, pool, runs = outage
    everyone = set(runs)

    # the pool hangs: every run's first rollouts sit in it while vLLM idles
    for run in runs.values():
        run.stats(running=2)
        run.rollouts("first")
    for run in runs.values():
        wait_for(lambda run=run: run.holds.looks > 0, "each worker reads its view")
        run.stats(running=0)
    wait_for(lambda: fired(serve, "inference_idle_with_pending") == everyone,
             "each run's stall fires", timeout=DEADLINE_S)  # fmt: skip
    stalls = [a for a in transitions(serve, "inference_idle_with_pending")]
    assert {a["details"]["dep"] for a in stalls} == {SANDBOX}
    wait_for(lambda: fired(serve, "shared_cause") == {"@fleet"}, "the fleet incident opens",
             timeout=DEADLINE_S)  # fmt: skip
    (opened,) = transitions(serve, "shared_cause")
    assert opened["subject"] == f"dep:{SANDBOX}"
    fleet_id = opened["incident"]["id"]

    # the runs that opted in hold their calls to the pool; the other does not
    for name in OPTED:
        wait_for(lambda name=name: runs[name].holds.held(SANDBOX), f"{name} holds the pool")
        view = serve.get(f"/v1/breaker/{name}")
        assert [(h["dep"], h["fleet"]) for h in view["held"]] == [(SANDBOX, fleet_id)]
    plain_view = serve.get(f"/v1/breaker/{PLAIN}")
    assert "hold" not in plain_view
    assert "held" not in plain_view
    assert not runs[PLAIN].holds.held(SANDBOX)
    for name in OPTED:  # their workers go on rolling out
        runs[name].slots("held")
    runs[PLAIN].rollouts("held")
    wait_for(lambda: fired(serve, "dep_held") == set(OPTED), "the held work is seen",
             timeout=DEADLINE_S)  # fmt: skip

    # vLLM gets other work: the stalls resolve, and the held work keeps the incidents open
    for run in runs.values():
        run.stats(running=3)
    wait_for(lambda: fired(serve, "inference_idle_with_pending", "resolved") == everyone,
             "the stalls resolve", timeout=DEADLINE_S)  # fmt: skip
    for a in transitions(serve, "inference_idle_with_pending"):
        if a["state"] == "resolved" and a["run"] in OPTED:
            assert a["incident"]["open"], a  # held work keeps it open
            assert a["incident"]["fleet"] == fleet_id
    assert fired(serve, "shared_cause", "resolved") == set()

    # the pool refuses: what sat in it fails; of the held runs, only canaries reach it
    pool.set("refuse")
    for name in OPTED:
        run = runs[name]
        wait_for(lambda run=run: run.errors("held") >= 2, f"{name}'s canaries fail",
                 timeout=DEADLINE_S)  # fmt: skip
        assert run.holds.held(SANDBOX)
        assert run.errors("held") <= run.holds.canaries
    wait_for(lambda: runs[PLAIN].errors("held") == 2, "the run that did not opt in fails")
    assert fired(serve, "shared_cause", "resolved") == set()  # still open: nothing lifts it

    # the pool heals: a canary succeeds, the held calls go on, the incidents close
    pool.set("up")
    for name in OPTED:
        run = runs[name]
        wait_for(lambda run=run: not run.holds.held(SANDBOX), f"{name}'s canary succeeds",
                 timeout=DEADLINE_S)  # fmt: skip
        run.stop.set()
        for thread in run.threads:
            thread.join(DEADLINE_S)
        # no errored trajectory since the hold but the canaries that failed: every canary
        # but the one that succeeded
        assert run.errors("held") == run.holds.canaries - 1, (name, run.holds.canaries)
        assert run.errors("first") == 2  # (what sat in the pool before the hold)
        assert sum(v == "ok" for v in run.outcomes.values()) >= 2
    wait_for(lambda: fired(serve, "dep_held", "resolved") == set(OPTED), "the holds end",
             timeout=DEADLINE_S)  # fmt: skip
    wait_for(lambda: fired(serve, "shared_cause", "resolved") == {"@fleet"},
             "the fleet incident resolves", timeout=DEADLINE_S)  # fmt: skip
    resolved = [a for a in transitions(serve, "shared_cause") if a["state"] == "resolved"]
    assert set(resolved[0]["details"]["runs"]) == everyone
    assert serve.get("/v1/alerts?state=firing")["alerts"] == []
    assert [i for i in serve.get("/v1/alerts")["incidents"] if i.get("run") in everyone] == []
    for name in OPTED:
        assert "held" not in serve.get(f"/v1/breaker/{name}")

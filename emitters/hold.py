"""The fleet pause, trainer side: calls to a service held while its fleet incident is open.

A run opts in through its config (`run.started.config`: `{"shared_cause": {"hold": true,
"canary_every": 60}}`); a rollout worker marks the calls runwatch may hold:

    with em.trajectory("s4-t511", step=4) as t:
        t.phase("generate")
        ...
        with t.call("sandbox", endpoint=cfg.sandbox_url):  # waits while the sandbox is held
            result = sandbox.run(code)

(`async with t.call(...)` in an asyncio worker: the wait is awaited, the loop goes on; `with
em.hold(dep=...)` for a call outside a trajectory.) `Holds` reads the run view through the
emitter's one follower (`runwatch.emitters.follower`): while the view says the run opted in
and lists the service (`RunView.held`: its fleet incident is open), a call to it waits --
and its trajectory says so, phase `held` -- but for one canary, which goes through:
`canary_every` seconds after the hold began, then that long after the last canary ended
(one at a time: a service that hangs takes one call, not one per interval). A canary that
succeeds lifts the hold: every waiting call goes on. So does the service's own word where
it sends heartbeats (a process whose `src.instance` is the service's name): the view says it
beats again after it had gone silent (`back`). The hold also lifts when the fleet incident
leaves the view. After a lift, `relapse_after` calls failing in a row while the fleet
incident is still open hold the service again.

It says what it does in events: `dep.held` when the first call waits, `dep.canary` for each
canary and how it ended, `dep.released` with the reason (`healthy`, `beating`, `resolved`,
`unreachable`, `closed`) -- which keep the run's incident open while its work is held (rule
`dep_held`), so the pause cannot lift itself by failing nothing.

It fails open like the guard: a view that cannot be read, or is not a run view, releases
every hold (`unreachable`, said once per outage), and `timeout` (or `max_wait`) bounds one
call's wait; runwatch being down never stops training.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from runwatch.emitters.guard import _one_line
from runwatch.emitters.runview import RunView

if TYPE_CHECKING:
    from runwatch.emitters.emitter import Emitter
    from runwatch.emitters.follower import RunViewFollower

log = logging.getLogger("runwatch.emitters")

#: how a held call ended (a trajectory's statuses): `ok` lifts the hold when it was a canary
Outcome = Literal["ok", "error", "timeout", "aborted"]
Reason = Literal["healthy", "beating", "resolved", "unreachable", "closed"]


@dataclass(eq=False)
class _Held:
    """One service this process holds, for one fleet incident (clock: `Holds.clock`)."""

    fleet: str
    every: float
    next_canary: float
    held_at: float | None = None  # when the first call waited (`dep.held` said)
    waiting: int = 0  # calls waiting now
    waited: int = 0  # calls that waited in this hold
    healthy: bool = False  # a canary succeeded: calls go through
    probing: bool = False  # a canary is under way (one at a time: a hung one holds the rest)
    back: float | None = None  # the view's word that the service's own process is back
    failed: int = 0  # calls failed in a row since it was healthy


@dataclass(frozen=True)
class Pass:
    """What `Holds.enter` gives a call: go on; `canary` when the call is the one let
    through to see whether the service is healthy (its outcome goes to `Holds.leave`)."""

    dep: str
    canary: _Held | None = field(default=None, compare=False)
    started: float = 0.0


class Holds:
    """The services this process holds now, kept current by a `RunViewFollower`
    (module docstring). One per `Emitter` (`Emitter.holding()`); without a follower
    (events go to a directory) it holds nothing."""

    def __init__(
        self,
        emitter: Emitter,
        follower: RunViewFollower | None,
        *,
        poll_interval: float = 5.0,
        max_wait: float | None = None,
        relapse_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not poll_interval > 0:
            raise ValueError("poll_interval must be a positive number of seconds")
        if max_wait is not None and not max_wait >= 0:
            raise ValueError("max_wait must be None or a number of seconds")
        if relapse_after < 1:
            raise ValueError("relapse_after must be at least 1")
        self.emitter, self.run = emitter, emitter.run
        self.follower = follower
        self.poll_interval = float(poll_interval)
        self.max_wait = max_wait
        self.relapse_after = relapse_after
        self.clock = clock
        self.looks = 0  # views read
        self.failures = 0  # looks that failed (each released every hold)
        self.canaries = 0  # calls let through as canaries
        self.gave_up = 0  # calls that waited their `timeout` out and went on
        self._deps: dict[str, _Held] = {}
        self._cond = threading.Condition()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self._closed = False
        self._down = False
        self._said_gave_up = False
        if follower is not None:
            follower.follow(self, self.poll_interval)

    # -- what the follower feeds -------------------------------------------------------------

    def see(self, view: RunView | None) -> None:
        """A view the follower read: hold what it lists (when the run opted in), release
        what it no longer lists."""
        self.looks += 1
        if self._down:
            self._down = False
            log.warning("runwatch holds: reading run %s's view again", self.run)
        policy = view.hold if view is not None else None
        wanted = {h.dep: h for h in view.held} if view is not None and policy else {}
        with self._cond:
            if self._closed:
                return
            now = self.clock()
            for dep, ended in list(self._deps.items()):
                listed = wanted.get(dep)
                if listed is None or listed.fleet != ended.fleet:
                    del self._deps[dep]
                    self._release(dep, ended, "resolved", now)
            for dep, listed in wanted.items():
                assert policy is not None
                held = self._deps.get(dep)
                if held is None:
                    every = policy.canary_every
                    held = self._deps[dep] = _Held(listed.fleet, every, now + every)
                elif held.every != policy.canary_every:
                    held.every = policy.canary_every
                    held.next_canary = min(held.next_canary, now + held.every)
                if listed.back is not None and listed.back != held.back:
                    held.back = listed.back  # its own heartbeats say it is back
                    if not held.healthy:
                        self._release(dep, held, "beating", now)
                        held.healthy, held.failed = True, 0
            self._notify()

    def missed(self, err: Exception) -> None:
        """A look that failed: fail open -- release every hold -- and say so once."""
        self.failures += 1
        if not self._down:
            self._down = True
            where = self.follower.source.name if self.follower is not None else "runwatch"
            log.warning("runwatch holds: cannot read run %s's view from %s (%s); no call "
                        "is held until it can", self.run, where, _one_line(err))  # fmt: skip
        self._release_all("unreachable")

    # -- what a call does --------------------------------------------------------------------

    def held(self, dep: str) -> bool:
        """Whether a call to `dep` would wait now (cheap: never the network)."""
        held = self._deps.get(dep)
        return held is not None and not held.healthy

    def waiting(self, dep: str) -> int:
        """Calls waiting on `dep` now."""
        held = self._deps.get(dep)
        return held.waiting if held is not None else 0

    def enter(
        self, dep: str, timeout: float | None = None, on_wait: Callable[[], None] | None = None
    ) -> Pass:
        """Wait while `dep` is held, then go on: when it is not (any more), as its canary,
        after `timeout` (default `max_wait`; None: as long as it is held), or at `close()`.
        `on_wait` runs once if the call waits (its trajectory says so)."""
        limit = self.max_wait if timeout is None else timeout
        deadline = None if limit is None else self.clock() + limit
        waiting: _Held | None = None
        with self._cond:
            try:
                while True:
                    step = self._step(dep, deadline, waiting, on_wait)
                    if isinstance(step, Pass):
                        return step
                    waiting, left = step
                    self._cond.wait(left)
            finally:
                if waiting is not None:
                    waiting.waiting -= 1

    async def aenter(
        self, dep: str, timeout: float | None = None, on_wait: Callable[[], None] | None = None
    ) -> Pass:
        """`enter` for a coroutine: the wait is awaited, the event loop goes on."""
        limit = self.max_wait if timeout is None else timeout
        deadline = None if limit is None else self.clock() + limit
        waiting: _Held | None = None
        loop = asyncio.get_running_loop()
        try:
            while True:
                with self._cond:
                    step = self._step(dep, deadline, waiting, on_wait)
                    if isinstance(step, Pass):
                        return step
                    waiting, left = step
                    woken: asyncio.Future[None] = loop.create_future()
                    self._waiters.add((loop, woken))
                try:
                    await asyncio.wait_for(woken, left)
                except TimeoutError:
                    pass
                finally:
                    with self._cond:
                        self._waiters.discard((loop, woken))
        finally:
            if waiting is not None:
                with self._cond:
                    waiting.waiting -= 1

    def _step(
        self,
        dep: str,
        deadline: float | None,
        waiting: _Held | None,
        on_wait: Callable[[], None] | None,
    ) -> Pass | tuple[_Held, float | None]:
        """One look at `dep` for a call (under the lock): go on, or wait that long (None:
        until woken)."""
        held = self._deps.get(dep)
        if held is None or held.healthy or self._closed:
            return Pass(dep)
        now = self.clock()
        if not held.probing and now >= held.next_canary:
            held.probing = True
            self.canaries += 1
            return Pass(dep, held, now)
        if deadline is not None and now >= deadline:
            self.gave_up += 1
            if not self._said_gave_up:
                self._said_gave_up = True
                log.warning("runwatch holds: a call to %s waited its timeout out and goes on "
                            "while the service is held", dep)  # fmt: skip
            return Pass(dep)
        if waiting is not held:
            if waiting is not None:  # a new hold of the service replaced the one it waited in
                waiting.waiting -= 1
            held.waiting += 1
            held.waited += 1
            if held.held_at is None:
                held.held_at = now
                self._say("dep.held", dep=dep, fleet=held.fleet, waiting=held.waiting)
            if on_wait is not None and waiting is None:
                _call(on_wait)
        left = None if held.probing else held.next_canary - now  # a canary ends: woken
        if deadline is not None:
            left = deadline - now if left is None else min(left, deadline - now)
        return held, None if left is None else max(left, 0.0)

    def leave(self, passed: Pass, outcome: Outcome) -> None:
        """How a call that `enter` let go on ended: a canary's `ok` lifts the hold, its
        failure keeps it; calls failing in a row after that hold the service again."""
        with self._cond:
            now = self.clock()
            held = self._deps.get(passed.dep)
            canary = passed.canary
            if canary is not None:
                self._say("dep.canary", dep=passed.dep, fleet=canary.fleet, status=outcome,
                          duration_s=round(max(0.0, now - passed.started), 6))  # fmt: skip
                canary.probing = False
                if held is not canary or self._closed:
                    return  # the hold it probed has ended meanwhile
                if outcome == "ok":
                    self._release(passed.dep, held, "healthy", now)
                    held.healthy, held.failed = True, 0
                else:  # the next one an interval after this one ended; at once if it said
                    # nothing of the service (aborted)
                    held.next_canary = now if outcome == "aborted" else now + held.every
                self._notify()
                return
            if held is None or not held.healthy:
                return
            if outcome == "ok":
                held.failed = 0
            elif outcome != "aborted":
                held.failed += 1
                if held.failed >= self.relapse_after:  # it fails again: hold again
                    held.healthy, held.failed = False, 0
                    held.held_at, held.waited = None, 0
                    held.next_canary = now + held.every

    def close(self) -> None:
        """Release every hold (`closed`) and let every waiting call go on."""
        self._release_all("closed")
        with self._cond:
            self._closed = True
            self._notify()
        if self.follower is not None:
            self.follower.drop(self)

    # -- inside ------------------------------------------------------------------------------

    def _release_all(self, reason: Reason) -> None:
        with self._cond:
            now = self.clock()
            deps, self._deps = self._deps, {}
            for dep, held in deps.items():
                self._release(dep, held, reason, now)
            self._notify()

    def _release(self, dep: str, held: _Held, reason: Reason, now: float) -> None:
        """Say that a hold in which calls waited has ended (under the lock)."""
        if held.held_at is None or held.healthy:
            return  # no call waited in it, or a canary released it already
        self._say("dep.released", dep=dep, fleet=held.fleet, reason=reason,
                  held_s=round(max(0.0, now - held.held_at), 6), waited=held.waited)  # fmt: skip

    def _say(self, kind: str, **fields: object) -> None:
        try:
            self.emitter.emit(kind, **fields)
        except Exception:  # emit never raises on transport; a closed emitter spools
            log.exception("runwatch holds: could not emit %s", kind)

    def _notify(self) -> None:
        """Wake every waiting call, threads and coroutines (under the lock)."""
        self._cond.notify_all()
        for loop, woken in list(self._waiters):
            try:
                loop.call_soon_threadsafe(_wake, woken)
            except RuntimeError:  # its loop has closed: nobody waits there any more
                self._waiters.discard((loop, woken))


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


def _call(hook: Callable[[], None]) -> None:
    try:
        hook()
    except Exception:
        log.exception("runwatch holds: a hook of a held call failed")

"""Rollout and inference-client helpers: a trajectory or a request as a `with` block.

    with em.trajectory("s4-t511", step=4) as t:
        t.phase("generate")
        ...
        t.phase("sandbox", endpoint=cfg.sandbox_url)   # waits on sandbox@pool-a:443
        t.phase("reward", dep="reward@rm-1:8000")
        t.reward = score

emits `trajectory.started`, one `trajectory.phase` per call and `trajectory.done` with
`duration_s`, the reward if set, and a status: `ok`, or for an exception `timeout`
(TimeoutError), `aborted` (cancelled, interrupted) or `error` (anything else; its type rides
along as `error`). The exception is never swallowed. `async with` works the same way.
`em.request(req, server=...)` does the same for `request.queued` / `request.done`.

A phase (and a request) may say the service its work waits on (`dep`, contract section 8):
`dep=` as written, or `endpoint=` (a URL or `host:port`), named by
`runwatch.emitters.deps.service` with the phase as its role (a loopback host by the
emitter's machine, `Emitter.machine`), so every emitter names one service alike and runwatch can
tell when many runs wait on the same one.

`t.call(phase, dep=...)` is a phase as a block around the call itself: the fleet pause
(`runwatch.emitters.hold`) may hold it while the service's fleet incident is open -- for a
run that opted in -- and learns from how the block ends whether a canary call succeeded:

    with t.call("sandbox", endpoint=cfg.sandbox_url):   # `async with` in asyncio code
        result = sandbox.run(code)
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runwatch.emitters.deps import dep_of

if TYPE_CHECKING:
    from runwatch.emitters.emitter import Emitter
    from runwatch.emitters.hold import Pass

_ABORTED = (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit, SystemExit)


def _status_of(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, _ABORTED):
        return "aborted"
    return "error"


class _Block:
    """Start on enter, end on exit, once; the async forms are the same calls."""

    _ended = False
    _t0 = 0.0

    def start(self) -> None:
        raise NotImplementedError

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(error=exc)

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)


class Trajectory(_Block):
    """One rollout trajectory; see the module docstring."""

    def __init__(
        self, emitter: Emitter, traj: str, step: int | None = None, group: str | None = None
    ) -> None:
        self.emitter, self.traj, self.step, self.group = emitter, str(traj), step, group
        self.reward: float | None = None
        self.status: str | None = None  # set to override what the exit decides

    def start(self) -> None:
        self._t0 = time.monotonic()
        fields: dict[str, Any] = {"traj": self.traj}
        if self.step is not None:
            fields["step"] = self.step
        if self.group is not None:
            fields["group"] = str(self.group)
        self.emitter.emit("trajectory.started", **fields)

    def phase(self, name: str, dep: str | None = None, endpoint: str | None = None) -> None:
        """The trajectory enters a phase (`generate`, `tool`, `sandbox`, `reward`, ...), and
        the service it waits on there: `dep`, or the one at `endpoint` (module docstring)."""
        waits_on = dep_of(dep, endpoint, name, node=self.emitter.machine)
        if waits_on is None:
            self.emitter.emit("trajectory.phase", traj=self.traj, phase=name)
        else:
            self.emitter.emit("trajectory.phase", traj=self.traj, phase=name, dep=waits_on)

    def call(
        self,
        phase: str,
        dep: str | None = None,
        endpoint: str | None = None,
        *,
        timeout: float | None = None,
    ) -> Call:
        """A call to the service `dep` (or the one at `endpoint`) in `phase`, as a `with`
        (or `async with`) block that the fleet pause may hold (module docstring); `timeout`
        bounds the wait (default: the emitter's `holding(max_wait=...)`)."""
        waits_on = dep_of(dep, endpoint, phase, node=self.emitter.machine)
        if waits_on is None:
            raise ValueError("a call names the service it waits on: give dep or endpoint")
        return Call(self.emitter, waits_on, phase=phase, traj=self.traj, timeout=timeout)

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        """Emit `trajectory.done` (once); exits of the `with` block call it for you."""
        if self._ended:
            return
        self._ended = True
        fields: dict[str, Any] = {
            "traj": self.traj,
            "status": status or self.status or _status_of(error),
            "duration_s": time.monotonic() - self._t0,
        }
        if self.reward is not None:
            fields["reward"] = float(self.reward)
        if self.group is not None:  # the group's rewards are judged from the done events
            fields["group"], fields["step"] = str(self.group), self.step
            if self.step is None:
                del fields["step"]
        if error is not None:
            fields["error"] = type(error).__name__
        self.emitter.emit("trajectory.done", **fields)


class Request(_Block):
    """One generation request to an inference server; `tokens()` records its sizes."""

    def __init__(
        self,
        emitter: Emitter,
        req: str,
        server: str | None = None,
        dep: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.emitter, self.req, self.server = emitter, str(req), server
        #: the service the request waits on (module docstring): the inference server's
        self.dep = dep_of(dep, endpoint, "inference", node=emitter.machine)
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.status: str | None = None

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"req": self.req}
        if self.server is not None:
            fields["server"] = self.server
        if self.dep is not None:
            fields["dep"] = self.dep
        return fields

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.emitter.emit("request.queued", **self._fields())

    def tokens(self, prompt: int | None = None, completion: int | None = None) -> None:
        if prompt is not None:
            self.prompt_tokens = int(prompt)
        if completion is not None:
            self.completion_tokens = int(completion)

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        """Emit `request.done` (once); the `with` block calls it for you."""
        if self._ended:
            return
        self._ended = True
        fields = self._fields()
        fields["status"] = status or self.status or _status_of(error)
        if fields["status"] == "timeout":  # not a request status in the contract
            fields["status"] = "error"
        if self.prompt_tokens is not None:
            fields["prompt_tokens"] = self.prompt_tokens
        if self.completion_tokens is not None:
            fields["completion_tokens"] = self.completion_tokens
        fields["duration_s"] = time.monotonic() - self._t0
        self.emitter.emit("request.done", **fields)


class Call(_Block):
    """A call to a service that the fleet pause may hold (`runwatch.emitters.hold`): entering
    waits while the service is held, then -- in a trajectory -- emits the phase; the way the
    block ends (`ok`, or an exception's `timeout` / `aborted` / `error`) is what a canary
    tells. The exception is never swallowed."""

    def __init__(
        self,
        emitter: Emitter,
        dep: str,
        *,
        phase: str | None = None,
        traj: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.emitter, self.dep, self.phase, self.traj = emitter, dep, phase, traj
        self.timeout = timeout
        self.passed: Pass | None = None

    def _held(self) -> None:
        """The call waits: its trajectory is in phase `held`, waiting on the service."""
        if self.traj is not None:
            self.emitter.emit("trajectory.phase", traj=self.traj, phase="held", dep=self.dep)

    def _began(self) -> None:
        self._t0 = time.monotonic()
        if self.traj is not None and self.phase is not None:
            self.emitter.emit("trajectory.phase", traj=self.traj, phase=self.phase, dep=self.dep)

    def start(self) -> None:
        self.passed = self.emitter.holds.enter(self.dep, self.timeout, self._held)
        self._began()

    async def __aenter__(self) -> Any:
        self.passed = await self.emitter.holds.aenter(self.dep, self.timeout, self._held)
        self._began()
        return self

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        if self.passed is not None:
            outcome = status or _status_of(error)
            self.emitter.holds.leave(self.passed, outcome)  # type: ignore[arg-type]

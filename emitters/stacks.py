"""Where each thread of this process is, when runwatch asks: the evidence of a hang.

When an incident opens on a hang (`ranks_stalled`, `stuck_progress`, ...), the run view
(`runwatch.emitters.runview`, read where the events go: `GET /v1/breaker/RUN` of serve, or
the compacted `runwatch.breaker` topic) carries a request, `"stacks": {"request": ID}`. The
emitter's one follower of the run view reads it every `interval` seconds (or more often,
when a guard asks), and the responder answers each request once with a `process.stacks`
event: every thread's stack as file, line and function (`sys._current_frames`; no local
variable, no source line), the innermost frames kept when a stack is deep, and the whole
within `MAX_BYTES`. It runs on the follower's daemon thread and never touches the training
loop: a process whose interpreter cannot run it (a C call holding the GIL) simply does not
answer, which the incident reports. A service that cannot be reached costs one failed look
per interval.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runwatch.emitters import env
from runwatch.emitters.events import MAX_STACK_FRAMES, MAX_STACK_THREADS

if TYPE_CHECKING:
    from runwatch.emitters.follower import RunViewFollower
    from runwatch.emitters.runview import RunView

log = logging.getLogger("runwatch.emitters")

#: Budget of one answer's threads, in bytes of JSON (an event is at most 64 KiB).
MAX_BYTES = 40_000
#: Seconds between two looks at the run view, for the stacks alone.
DEFAULT_INTERVAL = 10.0


def capture(skip: frozenset[int] = frozenset()) -> tuple[list[dict[str, Any]], bool]:
    """Every thread's stack but those in `skip` (thread idents), main thread first: a list
    of {name, frames: [{file, line, function}], outermost first}, and whether anything was
    left out to stay within the bounds."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    frames = sys._current_frames()
    order = sorted(frames, key=lambda ident: (ident != main, names.get(ident, ""), ident))
    threads: list[dict[str, Any]] = []
    truncated = False
    size = 0
    for ident in order:
        if ident in skip:
            continue
        if len(threads) == MAX_STACK_THREADS:
            truncated = True
            break
        stack = []
        frame: Any = frames[ident]
        while frame is not None:  # innermost first; only the innermost ones are kept
            code = frame.f_code
            stack.append({"file": code.co_filename[-200:], "line": frame.f_lineno or 0,
                          "function": code.co_name[:200]})  # fmt: skip
            frame = frame.f_back
            if len(stack) == MAX_STACK_FRAMES:
                truncated = truncated or frame is not None
                break
        stack.reverse()
        cost = 40 + sum(len(f["file"]) + len(f["function"]) + 40 for f in stack)
        if size + cost > MAX_BYTES:
            truncated = True
            break
        size += cost
        threads.append({"name": names.get(ident, f"thread-{ident}")[:200], "frames": stack})
    return threads, truncated


@dataclass(frozen=True)
class Taken:
    """Stacks taken for an answer: how, the threads, whether some were left out, and why
    none could be taken."""

    how: str
    threads: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None


def own_stacks() -> Taken:
    """This process's threads but the one asking."""
    threads, truncated = capture(frozenset({threading.get_ident()}))
    return Taken("emitter", threads, truncated)


#: Where `py-spy` is, when not on PATH or beside this Python (`runwatch watch` uses it).


def py_spy_path() -> str | None:
    """The py-spy binary: $RUNWATCH_PY_SPY, else on PATH, else beside this interpreter."""
    chosen = env.get(env.PY_SPY)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


def py_spy(pid: int, timeout: float = 20.0) -> Taken:
    """Another process's stacks, from outside (`py-spy dump --json`): what `runwatch watch`
    answers for the command it runs. py-spy reads the process's memory, which needs ptrace
    permission over it (the same user and `kernel.yama.ptrace_scope` 0 or 1 for a child,
    else CAP_SYS_PTRACE); without py-spy or the permission the answer says why."""
    exe = py_spy_path()
    if exe is None:
        return Taken("py-spy", error="py-spy is not installed (pip install py-spy)")
    try:
        done = subprocess.run([exe, "dump", "--pid", str(pid), "--json"], capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as err:
        return Taken("py-spy", error=f"py-spy failed: {err}"[:2000])
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Taken("py-spy", error=f"py-spy could not read process {pid}: {why}"[:2000])
    try:
        dumped = json.loads(done.stdout)
    except ValueError:
        return Taken("py-spy", error="py-spy said something that is not JSON")
    threads: list[dict[str, Any]] = []
    truncated = False
    for t in dumped if isinstance(dumped, list) else []:
        if len(threads) == MAX_STACK_THREADS:
            truncated = True
            break
        frames = [{"file": str(f.get("filename", "?"))[-200:], "line": int(f.get("line") or 0),
                   "function": str(f.get("name", "?"))[:200]}
                  for f in (t.get("frames") or [])[:MAX_STACK_FRAMES]]  # fmt: skip
        truncated = truncated or len(t.get("frames") or []) > MAX_STACK_FRAMES
        frames.reverse()  # py-spy: innermost first; the event: outermost first
        name = t.get("thread_name") or (
            "MainThread" if t.get("os_thread_id") == pid else f"thread-{t.get('thread_id')}"
        )  # (py-spy names a thread only when it finds the name)
        threads.append({"name": str(name)[:200], "frames": frames})
    return Taken("py-spy", threads, truncated)


class StackResponder:
    """Answers the run's stack requests, each once, from the run views a follower reads."""

    def __init__(
        self,
        answer: Callable[[str, Taken], None],
        follower: RunViewFollower | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.answer = answer
        #: what is asked is answered with: this process's stacks, or a watched command's
        self.take: Callable[[], Taken] = own_stacks
        self.answered: set[str] = set()
        self.failures = 0
        self.follower = follower
        if follower is not None:
            follower.follow(self, interval)

    def see(self, view: RunView | None) -> None:
        """A view the follower read: answer its request, if it is new."""
        request = view.stacks.request if view is not None and view.stacks is not None else None
        if not request or request in self.answered:
            return
        self.answered.add(request)
        try:
            self.answer(request, self.take())
        except Exception:
            log.warning("runwatch: could not send the stacks asked for", exc_info=True)

    def missed(self, err: Exception) -> None:
        self.failures += 1  # fails quietly: the guard, if any, says when it is down

    def close(self) -> None:
        if self.follower is not None:
            self.follower.drop(self)

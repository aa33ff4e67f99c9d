"""Watch a job from its output (`runwatch watch -- CMD ARGS...`, runwatch/commands/watch.py).

Runs the command with its standard output and error on pipes, copies every byte through to
ours unchanged, and emits the events `runwatch.emitters.logparse` reads from the lines: tqdm bars,
verl step lines, vLLM and SGLang engine stats. Heartbeats while the command lives,
`run.started` before it and `run.finished` with its exit status after (`--no-run-events`
when several processes of one run are watched). The exit status is the command's (128+N
for a command killed by signal N). SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1/2 are passed
on; SIGINT/SIGQUIT typed at a terminal already reach the command, so they are not sent twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

from runwatch.emitters import Emitter
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.env import last_word
from runwatch.emitters.logparse import Found
from runwatch.emitters.stacks import Taken, py_spy

log = logging.getLogger("runwatch.emitters")

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
#: After the command exits, keep copying output its children may still write, this long.
DRAIN_S = 5.0
#: A stream quiet this long has its unfinished line read (a tqdm refresh waiting for the
#: next one): a bar's progress is reported when it is written, not one refresh late.
PAUSE_S = 0.2
#: A command's output quiet this long after its last line, the command still running, has
#: what the quiet decides read (`LineParser.quiet`): a traceback it printed last was its
#: process's last word -- a hung job, one rank dead and the others waiting in a collective.
#: Long beside a step's silence (an RL step can be quiet for minutes; a traceback the program
#: caught and printed, then such a step, must not page as a death), short beside a
#: collective's timeout (10-30 minutes); ranks_stalled's 300 s too. RUNWATCH_LAST_WORD sets it.
LAST_WORD_S = 300.0
#: Signals that end a command because it failed (the others stop it: a person, a scheduler).
FAILURE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS,
                             signal.SIGFPE, signal.SIGILL})  # fmt: skip
_CHUNK = 1 << 16


def run_id_for(command: list[str]) -> str:
    """<script or program>-<UTC time>-<pid>: `python train.py` gives train-..."""
    name = os.path.basename(command[0])
    if name.startswith(("python", "torchrun", "uv", "accelerate")):
        args = [a for a in command[1:] if not a.startswith("-")]
        if args and args[0] not in ("run", "launch"):
            name = os.path.splitext(os.path.basename(args[0]))[0]
        elif len(args) > 1:
            name = os.path.splitext(os.path.basename(args[1]))[0]
    base = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("-")[:60] or "run"
    return f"{base}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"


class ProgressGate:
    """At most one `progress` event per bar per `every` seconds; a bar that completes or
    starts over is sent at once, and one held back goes out on the next `due()`."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # bar -> (sent at, n sent)
        self._held: dict[tuple[str, str], dict[str, Any]] = {}

    def offer(self, fields: dict[str, Any]) -> dict[str, Any] | None:
        # a bar is its name, per forwarding process (Ray workers' bars of one name differ)
        name, n, now = (fields["name"], repr(fields.get("src"))), fields["n"], self.clock()
        sent = self._last.get(name)
        if sent is not None and n == sent[1]:
            self._held.pop(name, None)
            return None
        total = fields.get("total")
        if sent is None or n < sent[1] or (total is not None and n >= total):
            urgent = True
        else:
            urgent = now - sent[0] >= self.every
        if urgent:
            self._last[name] = (now, n)
            self._held.pop(name, None)
            return fields
        self._held[name] = fields
        return None

    def due(self) -> list[dict[str, Any]]:
        now, out = self.clock(), []
        for name, fields in list(self._held.items()):
            if now - self._last[name][0] >= self.every:
                self._last[name] = (now, fields["n"])
                del self._held[name]
                out.append(fields)
        return out

    def drain(self) -> list[dict[str, Any]]:
        out = list(self._held.values())
        self._held.clear()
        return out


class Watcher:
    """Copies the command's output through and turns what it reads into events."""

    def __init__(
        self,
        emitter: Emitter,
        parser: LineParser,
        progress_every: float,
        last_word: float = LAST_WORD_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.emitter = emitter
        self.parser = parser
        self.gate = ProgressGate(progress_every)
        self.last_word = last_word
        self.clock = clock  # when a line is read: a wait it shows began its `waited` before
        self.stop = threading.Event()
        self.emitted = 0
        self.read_failed = 0  # reads that raised (their bytes were copied, not read)

    def _read(self, what: Callable[[], list[Found]]) -> None:
        """Emit what a read finds. Reading never stops the copying: a reader that fails is
        logged once and its bytes are simply not read."""
        try:
            found = what()
        except Exception:
            if not self.read_failed:
                log.exception("runwatch watch: reading the output failed; it is still copied")
            self.read_failed += 1
            return
        self._emit(found)

    def _emit(self, found: list[Found]) -> None:
        for kind, fields in found:
            if kind == "progress":
                passed = self.gate.offer(fields)
                if passed is None:
                    continue
                fields = passed
            self._send(kind, fields)

    def _send(self, kind: str, fields: dict[str, Any]) -> None:
        try:
            fields.pop("component", None)  # a reader's hint; the emitter says the component
            src = fields.pop("src", None)
            if "waited" in fields:  # the wait a line shows, from when it is read
                fields = self.parser.waits.since(fields, self.clock())
            if src is None:
                self.emitter.emit(kind, **fields)
            else:  # a line Ray forwarded: the event is that worker's
                self.emitter.emit_from(src, kind, **fields)
            self.emitted += 1
        except (ValueError, TypeError):
            pass  # a line we misread must never stop the job's output

    def pump(self, sources: dict[int, int]) -> None:
        """Copy each source fd to its target fd until EOF on all (or `stop` after drain)."""
        sel = selectors.DefaultSelector()
        scanners = {}
        for src, dst in sources.items():
            sel.register(src, selectors.EVENT_READ, dst)
            scanners[src] = LineScanner(self.parser)
        open_fds = set(sources)
        last_data = {fd: time.monotonic() for fd in sources}
        heard = time.monotonic()  # the output's last bytes, on any stream
        quiet = False  # what its quiet since then decides was read
        try:
            while open_fds:
                ready = sel.select(timeout=PAUSE_S / 2)
                now = time.monotonic()
                for key, _ in ready:
                    fd = int(key.fd)
                    try:
                        data = os.read(fd, _CHUNK)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(fd)
                        open_fds.discard(fd)
                        self._read(scanners[fd].finish)
                        continue
                    _write_all(key.data, data)
                    last_data[fd] = heard = now
                    quiet = False
                    self._read(partial(scanners[fd].feed, data))
                for fd in open_fds:  # a stream that paused: its unfinished refresh, once
                    if now - last_data[fd] >= PAUSE_S:
                        self._read(scanners[fd].peek)
                if not quiet and now - heard >= self.last_word and open_fds:
                    quiet = True  # the command runs on, silent: what it said last stands
                    self._read(self.parser.quiet)
                for fields in self.gate.due():
                    self._send("progress", fields)
                if not ready and self.stop.is_set():
                    break
            self._read(self.parser.finish)  # the output ended: what that decides
        finally:
            sel.close()
            for fields in self.gate.drain():
                self._send("progress", fields)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            time.sleep(0.001)
        except BrokenPipeError:
            return  # nobody reads our output any more; the command's own output goes on


def _at_terminal_foreground() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def watch(
    command: list[str],
    emitter: Emitter,
    *,
    server: str | None = None,
    progress_every: float = 1.0,
    run_events: bool = True,
) -> int:
    """Run `command`, copy its output through, emit what it shows; return its exit status
    (128+N when a signal N killed it). With `run_events`, `run.started` before it and
    `run.finished` with its status after."""
    if run_events:
        emitter.emit("run.started", labels={"command": shlex.join(command)[:1000]})
    env = dict(os.environ)
    # a Python child writes its stdout in 8 KB blocks to a pipe: its lines would reach us
    # minutes late on a slow run (the user's own setting stands)
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as err:
        print(f"runwatch watch: cannot run {command[0]}: {err}", file=sys.stderr)
        if run_events:
            emitter.emit("run.finished", status="failed", exit_code=127)
        return 127
    assert proc.stdout is not None
    assert proc.stderr is not None
    # runwatch's requests for stacks (a hang) are answered with the command's, from outside
    emitter.stacks_from(_stacks_of(proc.pid))
    watcher = Watcher(emitter, LineParser(server=server), progress_every,
                      last_word(LAST_WORD_S))  # fmt: skip
    sources = {
        proc.stdout.fileno(): sys.stdout.fileno(),
        proc.stderr.fileno(): sys.stderr.fileno(),
    }
    with contextlib.suppress(ValueError, OSError):
        sys.stdout.flush()
    pump = threading.Thread(target=watcher.pump, args=(sources,), name="runwatch-watch-pump")
    pump.start()

    def forward(signum: int, frame: FrameType | None) -> None:
        if signum in (signal.SIGINT, signal.SIGQUIT) and _at_terminal_foreground():
            return  # the terminal sent it to the command's process group already
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover - only if SIGINT beat the handler
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        pump.join(DRAIN_S)
        watcher.stop.set()
        pump.join()
        proc.stdout.close()
        proc.stderr.close()
    status = "ok" if rc == 0 else ("killed" if rc < 0 else "failed")
    if failure := exit_failure(rc):
        emitter.emit("component.failed", error=failure, how="exit", exit_code=rc)
    if run_events:
        emitter.emit("run.finished", status=status, exit_code=rc)
    return 128 - rc if rc < 0 else rc


def _stacks_of(pid: int) -> Callable[[], Taken]:
    """py-spy's dump of the command; without py-spy (or ptrace permission), one line says
    so, once, and the answer carries the reason."""
    said: list[str] = []

    def take() -> Taken:
        taken = py_spy(pid)
        if taken.error and not said:
            said.append(taken.error)
            print(f"runwatch watch: no stacks of the command: {taken.error}", file=sys.stderr)
        return taken

    return take


def exit_failure(rc: int) -> str | None:
    """What a command's exit status says of its failure: a non-zero status, or a signal a
    failure sends (SIGKILL by the OOM killer, SIGSEGV, SIGABRT, ...); None for a clean exit
    or a stop (SIGTERM, SIGINT, SIGHUP: someone ended it)."""
    if rc > 0:
        return f"exited with status {rc}"
    if rc < 0 and -rc in FAILURE_SIGNALS:
        return f"killed by {signal.Signals(-rc).name}"
    return None

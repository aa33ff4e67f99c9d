"""Watch a job from its output (`runwatch watch -- CMD ARGS...`, runwatch/commands/watch.py).

Runs the command with its standard output and error on pipes, copies every byte through to
ours unchanged, and emits the events `runwatch.emitters.logparse` reads from the lines: tqdm bars,
verl step lines, vLLM and SGLang engine stats. Heartbeats while the command lives,
`run.started` before it and `run.finished` with its exit status after (`--no-run-events`
when several processes of one run are watched) -- unless it exited 0 and its output, older
than it (`cat` of a saved console), ended in its hang: the run is left open for the
service's rules to decide (`Watcher.left_open`). The exit status is the command's (128+N
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
from dataclasses import dataclass
from functools import partial
from types import FrameType
from typing import Any, NamedTuple

from runwatch.emitters import Emitter
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.encodings import AsUtf8
from runwatch.emitters.env import last_word
from runwatch.emitters.hangs import at_end, ended_in_hang
from runwatch.emitters.logparse import Found
from runwatch.emitters.stacks import Taken, py_spy
from runwatch.emitters.stalls import Waits
from runwatch.emitters.wraps import OutputMargin, OutputUnwrapper

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
#: the waits whose shown duration `ReadWaits` keeps (the latest: the open one is among them)
SHOWN_MAX = 1024
#: Less time than this between a wait's repeated lines, on average, is no wait being written
#: but one being replayed: the quickest repeat the waits' sources write is srun's first retry,
#: 0.1 s after its refusal (waits.toml); a `cat` of a saved console gives every line at once.
REPEAT_MIN_S = 0.05


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


@dataclass(frozen=True)
class LeftOpen:
    """A run `watch` left open, not finished: the output of its command, which exited 0,
    ended inside a wait it declared that nothing ended, with no failure read -- the job it
    shows was still waiting when its output ended (`Watcher.left_open`). The service's
    ranks_stalled (inference_stalled) decides it, on its clock, from `ranks_since`
    (`engine_since`)."""

    #: rank -> the phase it waits in, for the ranks whose wait is open
    ranks: dict[int, str]
    ranks_since: float | None
    #: the engines whose stall is open, and when it began
    servers: tuple[str, ...]
    engine_since: float | None

    def describe(self) -> str:
        """What is left open, in words (the rules' limits are the service's to say)."""
        out = []
        if self.ranks_since is not None:
            by_phase: dict[str, list[int]] = {}
            for rank, phase in sorted(self.ranks.items()):
                by_phase.setdefault(phase, []).append(rank)
            waits = ", ".join(
                f"{'ranks' if len(rs) > 1 else 'rank'} {','.join(map(str, rs))} "
                f"{'wait' if len(rs) > 1 else 'waits'} in {phase}"
                for phase, rs in by_phase.items()
            )
            out.append(f"{waits or 'its ranks wait'} since {utc(self.ranks_since)}")
        if self.engine_since is not None:
            who = ", ".join(self.servers) or "an engine"
            out.append(f"{who} holds requests and makes no tokens since {utc(self.engine_since)}")
        return "; ".join(out)


def utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


class Shown(NamedTuple):
    """What a wait's lines showed, as they were read: the longest wait any of them said, when
    the first and the latest were read, how many, and whether they counted lines of it this
    reader never read (`Waits.said_before_read`)."""

    waited: float
    first: float
    last: float
    lines: int
    before: bool = False


class ReadWaits(Waits):
    """`Waits` whose waits are dated as their lines are read (`since`, on the watcher's
    clock), not as their events go out: a chunk of output is read whole before its events
    are sent, and a wait that a later line of the chunk ended must not be reopened by its
    start being dated after that end (`hung_since`). Keeps what each wait's lines showed, by
    its start (`Shown`: a wait declared with no duration shows 0)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self.shown: dict[float, Shown] = {}  # a wait's `since` -> what its lines showed

    def read(self, line: str, rank: int | None = None, lead: str = "") -> list[Found]:
        return self._dated(super().read(line, rank, lead))

    def stalled_engines(self) -> list[Found]:
        return self._dated(super().stalled_engines())

    def _dated(self, found: list[Found]) -> list[Found]:
        """The waits found, dated now (`since`), and what each showed kept."""
        for _, fields in found:
            waited = fields.get("waited")
            if waited is not None:
                now = self.clock()
                self.since(fields, now)
                since = fields.get("since")
                if since is not None:
                    was = self.shown.get(since)
                    before = "rank" in fields and self.said_before_read(fields["rank"])
                    self.shown[since] = (
                        Shown(waited, now, now, 1, before) if was is None
                        else Shown(max(was.waited, waited), was.first, now, was.lines + 1,
                                   was.before or before)
                    )  # fmt: skip
                    if len(self.shown) > SHOWN_MAX:  # a job of many waits: the latest count
                        del self.shown[min(self.shown)]
        return found

    def undated(self, since: float) -> bool:
        """Whether the wait begun at `since` showed no duration in any of its lines."""
        shown = self.shown.get(since)
        return shown is not None and shown.waited == 0.0

    def replayed(self, since: float) -> bool:
        """Whether the wait begun at `since` repeated its line faster than any wait writes
        it (`REPEAT_MIN_S`), or counted repeats of it never read (a retry's attempt 60 read
        first): its lines were written before they were read -- the output of a command
        replaying a saved console (`cat`), older than the command."""
        shown = self.shown.get(since)
        return shown is not None and (
            shown.before
            or (shown.lines >= 2 and shown.last - shown.first < (shown.lines - 1) * REPEAT_MIN_S)
        )


class OutputReader:
    """One stream of the command's output read: a paste's margin taken off and its hard wraps
    joined first (`wraps.OutputMargin`, `wraps.OutputUnwrapper`, as `runwatch diagnose` does
    a file's), then scanned."""

    def __init__(self, parser: LineParser) -> None:
        self.text = AsUtf8()  # (a UTF-16 file `cat` writes, as diagnose reads it)
        self.margin = OutputMargin()
        self.wraps = OutputUnwrapper()
        self.scanner = LineScanner(parser)

    def feed(self, data: bytes) -> list[Found]:
        return self._scan(self.wraps.feed(self.margin.feed(self.text.feed(data))))

    def paused(self) -> list[Found]:
        """The stream paused: what the margin and the unwrapper held, then the unfinished
        refresh, once."""
        held = self.wraps.feed(self.margin.pause())
        return self._scan(held + self.wraps.pause()) + self.scanner.peek()

    def finish(self) -> list[Found]:
        held = self.wraps.feed(self.margin.feed(self.text.feed(b"", final=True)))
        held += self.wraps.feed(self.margin.finish())
        return self._scan(held + self.wraps.finish()) + self.scanner.finish()

    def _scan(self, data: bytes) -> list[Found]:
        return self.scanner.feed(data) if data else []


class Watcher:
    """Copies the command's output through and turns what it reads into events. The parser's
    waits are dated as their lines are read (`ReadWaits`)."""

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
        self.waits = parser.waits = ReadWaits(clock)
        self.gate = ProgressGate(progress_every)
        self.last_word = last_word
        self.clock = clock  # when a line is read: a wait it shows began its `waited` before
        self.stop = threading.Event()
        self.emitted = 0
        self.read_failed = 0  # reads that raised (their bytes were copied, not read)
        self.kinds: set[str] = set()  # the kinds of the events sent (a failure read?)
        self.phases: dict[int, str] = {}  # rank -> the phase its latest rank.status said
        #: server -> its latest snapshot (and the source Ray named), while it says stalled
        self.stalled: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {}

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

    def _last_words(self, decided: Callable[[], list[Found]]) -> list[Found]:
        """What the output's end or its going quiet decides (`decided`: the parser's), and
        the hangs it ended inside (`hangs.at_end`), as `runwatch diagnose` reads a file's end."""
        found = decided()
        return found + at_end(self.parser, [*self.kinds, *(kind for kind, _ in found)])

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
            if src is None:
                self.emitter.emit(kind, **fields)
            else:  # a line Ray forwarded: the event is that worker's
                self.emitter.emit_from(src, kind, **fields)
            self.emitted += 1
            self._saw(kind, fields, src)
        except (ValueError, TypeError):
            pass  # a line we misread must never stop the job's output

    def _saw(self, kind: str, fields: dict[str, Any], src: dict[str, Any] | None) -> None:
        """Keep what `left_open` says of a sent event."""
        self.kinds.add(kind)
        if kind == "rank.status":
            self.phases[fields["rank"]] = fields["phase"]
        elif kind == "inference.stats":
            server = str(fields.get("server") or "inference")
            if fields.get("stalled_since") is None:
                self.stalled.pop(server, None)
            else:
                self.stalled[server] = (src, dict(fields))

    def left_open(self, started: float) -> LeftOpen | None:
        """What the run should be left open for, the command having exited 0 (`started`:
        when it was started, on `clock`): the output ended inside a wait it declared that
        nothing ended, and no failure was read (`hangs.ended_in_hang`), and the wait is not
        the command's own -- it began before the command did (the output is older than the
        command: a saved console, replayed: its lines say so by their clocks, or, undated,
        by repeating faster than a wait writes them), or a framework declared it with no
        duration (two processes claiming one rank, a stack dump of a rank in a collective:
        nothing says when it began). A job that lived through a wait it printed and then
        exited 0 ended it, whatever its output says last: None, the run finishes."""
        hung = ended_in_hang(self.waits, self.kinds)
        ranks = hung.ranks_since
        # a framework's wait declared with no duration is undated; one by the console's
        # grammar is dated by what its lines show (five untimed lines: none, a job's own --
        # unless they came faster than a wait repeats them: a saved console, replayed)
        if ranks is not None and ranks >= started:
            undated = self.waits.undated(ranks)
            if (self.waits.generic_only or not undated) and not (
                undated and self.waits.replayed(ranks)
            ):
                ranks = None
        engine = hung.engine_since
        if engine is not None and engine >= started:
            engine = None
        waiting = {r: p for r, p in self.phases.items() if p != "exited"}
        if ranks is not None and not waiting:
            ranks = None  # (every rank the console named has left its wait)
        if ranks is None and engine is None:
            return None
        servers = () if engine is None else tuple(
            sorted(s for s, (_, f) in self.stalled.items() if f["stalled_since"] >= engine)
        )  # fmt: skip
        return LeftOpen(waiting if ranks is not None else {}, ranks, servers, engine)

    def leave_engines(self, left: LeftOpen) -> None:
        """Send the stalled snapshots of the engines left open again, as the engine's own
        (component `inference`, instance its server; no heartbeats) where they were the
        watching process's: its final heartbeat takes the servers it vouches for out of the
        picture -- a clean exit -- while the console says they still held their requests.
        (An engine Ray named is its actor's already.)"""
        for server in left.servers:
            src, fields = self.stalled[server]
            if src is None:
                self._send("inference.stats", {**fields, "src": {"component": "inference",
                                                                  "instance": server}})  # fmt: skip

    def pump(self, sources: dict[int, int]) -> None:
        """Copy each source fd to its target fd until EOF on all (or `stop` after drain)."""
        sel = selectors.DefaultSelector()
        readers = {}
        for src, dst in sources.items():
            sel.register(src, selectors.EVENT_READ, dst)
            readers[src] = OutputReader(self.parser)
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
                        self._read(readers[fd].finish)
                        continue
                    _write_all(key.data, data)
                    last_data[fd] = heard = now
                    quiet = False
                    self._read(partial(readers[fd].feed, data))
                for fd in open_fds:  # a stream that paused: its unfinished refresh, once
                    if now - last_data[fd] >= PAUSE_S:
                        self._read(readers[fd].paused)
                if not quiet and now - heard >= self.last_word and open_fds:
                    quiet = True  # the command runs on, silent: what it said last stands
                    self._read(partial(self._last_words, self.parser.quiet))
                for fields in self.gate.due():
                    self._send("progress", fields)
                if not ready and self.stop.is_set():
                    break
            self._read(partial(self._last_words, self.parser.finish))  # what the end decides
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
    left_open: Callable[[LeftOpen], None] | None = None,
) -> int:
    """Run `command`, copy its output through, emit what it shows; return its exit status
    (128+N when a signal N killed it). With `run_events`, `run.started` before it and
    `run.finished` with its status after -- unless the command exited 0 and its output
    ended in its hang (`Watcher.left_open`): then the run is left open for the service's
    rules to decide, and `left_open` (else the log) is told what was left."""
    if run_events:
        emitter.emit("run.started", labels={"command": shlex.join(command)[:1000]})
    env = dict(os.environ)
    # a Python child writes its stdout in 8 KB blocks to a pipe: its lines would reach us
    # minutes late on a slow run (the user's own setting stands)
    env.setdefault("PYTHONUNBUFFERED", "1")
    watcher = Watcher(emitter, LineParser(server=server), progress_every,
                      last_word(LAST_WORD_S))  # fmt: skip
    started = watcher.clock()
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
    left = watcher.left_open(started) if run_events and rc == 0 else None
    if left is not None:  # the rules decide on the service's clock; its final beat is no loss
        watcher.leave_engines(left)
        (left_open or _log_left_open)(left)
    elif run_events:
        emitter.emit("run.finished", status=status, exit_code=rc)
    return 128 - rc if rc < 0 else rc


def _log_left_open(left: LeftOpen) -> None:
    log.warning("runwatch watch: the run is left open: its output ended inside a wait it "
                "declared that nothing ended (%s)", left.describe())  # fmt: skip


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

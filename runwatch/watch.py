"""`runwatch watch [--run RUN] [--component NAME] -- CMD ARGS...`: watch a job from its output.

Runs the command with its standard output and error on pipes, copies every byte through to
ours unchanged, and emits the events `runwatch.logparse` reads from the lines: tqdm bars,
verl step lines, vLLM and SGLang engine stats. Heartbeats while the command lives,
`run.started` before it and `run.finished` with its exit status after (`--no-run-events`
when several processes of one run are watched). The exit status is the command's (128+N
for a command killed by signal N). SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1/2 are passed
on; SIGINT/SIGQUIT typed at a terminal already reach the command, so they are not sent twice.
"""

from __future__ import annotations

import argparse
import contextlib
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
from types import FrameType
from typing import Any

from runwatch.emitters import Emitter
from runwatch.emitters.kafka_security import KafkaSecurityError
from runwatch.kafka_cli import add_kafka_security_args, security_from_args
from runwatch.logparse import Found, LineParser, LineScanner

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
_CHUNK = 1 << 16


def register(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="run a command and emit events read from its output (tqdm, verl, vLLM, SGLang)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--run", help="run id (default $RUNWATCH_RUN, else made from the command)")
    p.add_argument("--component", default="trainer", help="component name (default trainer)")
    p.add_argument("--instance", help="instance name of this process (e.g. vllm-0)")
    p.add_argument("--server", help="server name for vLLM/SGLang stats (default vllm / sglang)")
    add_destination(p)
    p.add_argument(
        "--progress-every",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="at most one progress event per bar this often (default 1)",
    )
    p.add_argument("--heartbeat-interval", type=float, default=10.0, metavar="SECONDS")
    p.add_argument(
        "--no-run-events", action="store_true", help="emit no run.started / run.finished"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    p.set_defaults(func=run)


def add_destination(p: argparse.ArgumentParser) -> None:
    """--kafka / --url / --spool; without one, the environment decides (as for Emitter)."""
    dest = p.add_mutually_exclusive_group()
    dest.add_argument("--kafka", metavar="SERVERS", help="Kafka bootstrap servers")
    dest.add_argument("--url", metavar="URL", help="a `runwatch serve` service")
    dest.add_argument("--spool", metavar="DIR", help="write events to this directory")
    add_kafka_security_args(p)


def make_emitter(args: argparse.Namespace, run: str | None, **settings: Any) -> Emitter | str:
    """The Emitter the flags ask for, or a one-line reason for the user."""
    try:
        kafka = args.kafka or (None if args.url or args.spool else os.environ.get("RUNWATCH_KAFKA"))
        security = security_from_args(args) if kafka else None
        return Emitter(run=run, kafka=args.kafka, url=args.url, path=args.spool,
                       kafka_security=security, **settings)  # fmt: skip
    except KafkaSecurityError as err:
        return f"Kafka security: {err}"
    except ValueError as err:
        if str(err).startswith("no destination"):
            return (
                "no destination for events: pass --kafka HOST:PORT, --url URL or --spool DIR, "
                "or set RUNWATCH_KAFKA, RUNWATCH_URL or RUNWATCH_SPOOL"
            )
        if str(err).startswith("no run id"):
            return "no run id: pass --run RUN or set RUNWATCH_RUN"
        return str(err)


def _run_id(command: list[str]) -> str:
    """<script or program>-<UTC time>-<pid>: `python train.py` gives train-..."""
    name = os.path.basename(command[0])
    if name.startswith(("python", "torchrun", "uv", "accelerate")):
        args = [a for a in command[1:] if not a.startswith("-")]
        if args and args[0] not in ("run", "launch"):
            name = os.path.splitext(os.path.basename(args[0]))[0]
        elif len(args) > 1:
            name = os.path.splitext(os.path.basename(args[1]))[0]
    base = re.sub(r"[^A-Za-z0-9._-]", "-", name)[:60] or "run"
    return f"{base}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"


class ProgressGate:
    """At most one `progress` event per bar per `every` seconds; a bar that completes or
    starts over is sent at once, and one held back goes out on the next `due()`."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self._last: dict[str, tuple[float, int]] = {}  # name -> (sent at, n sent)
        self._held: dict[str, dict[str, Any]] = {}

    def offer(self, fields: dict[str, Any]) -> dict[str, Any] | None:
        name, n, now = fields["name"], fields["n"], self.clock()
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

    def __init__(self, emitter: Emitter, parser: LineParser, progress_every: float) -> None:
        self.emitter = emitter
        self.parser = parser
        self.gate = ProgressGate(progress_every)
        self.stop = threading.Event()
        self.emitted = 0

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
            self.emitter.emit(kind, **fields)
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
        try:
            while open_fds:
                ready = sel.select(timeout=0.25)
                for key, _ in ready:
                    fd = int(key.fd)
                    try:
                        data = os.read(fd, _CHUNK)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(fd)
                        open_fds.discard(fd)
                        self._emit(scanners[fd].finish())
                        continue
                    _write_all(key.data, data)
                    self._emit(scanners[fd].feed(data))
                for fields in self.gate.due():
                    self._send("progress", fields)
                if not ready and self.stop.is_set():
                    break
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


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("runwatch watch: no command given (runwatch watch -- CMD ARGS...)", file=sys.stderr)
        return 2
    run_id = args.run or os.environ.get("RUNWATCH_RUN")
    if not run_id:
        run_id = _run_id(command)
        print(f"runwatch watch: run id {run_id} (set --run or RUNWATCH_RUN to choose)",
              file=sys.stderr)  # fmt: skip
    emitter = make_emitter(
        args,
        run_id,
        component=args.component,
        instance=args.instance,
        heartbeat_interval=args.heartbeat_interval,
    )
    if isinstance(emitter, str):
        print(f"runwatch watch: {emitter}", file=sys.stderr)
        return 2
    with emitter:
        return _watch(command, emitter, args)


def _watch(command: list[str], emitter: Emitter, args: argparse.Namespace) -> int:
    if not args.no_run_events:
        emitter.emit("run.started", labels={"command": shlex.join(command)[:1000]})
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        print(f"runwatch watch: cannot run {command[0]}: {err}", file=sys.stderr)
        if not args.no_run_events:
            emitter.emit("run.finished", status="failed", exit_code=127)
        return 127
    assert proc.stdout is not None
    assert proc.stderr is not None
    watcher = Watcher(emitter, LineParser(server=args.server), args.progress_every)
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
    if not args.no_run_events:
        emitter.emit("run.finished", status=status, exit_code=rc)
    return 128 - rc if rc < 0 else rc

"""`Emitter`: what trainers, rollout workers and inference servers call (contract §5).

`emit()` is on the caller's hot path, so it does only cheap work: check the kind and the
fields (`runwatch.emitters.checks`; pydantic only for shapes those checks are unsure of),
stamp id/ts/src and encode once (`runwatch.emitters.wire`), and append to the sender's bounded
queue. It never waits on the network and never raises for transport trouble; bad arguments
raise at once.

One job: the `Emitter` object (its settings, `emit`, heartbeats, fork and exit handling).
Where its events go is chosen in `runwatch.emitters.where`; what it reads of its run's view
(guard, holds, stacks) is `runwatch.emitters.view_readers`; the queue, transports and spool
are modules of their own.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runwatch.emitters import env
from runwatch.emitters.checks import (
    FIELD_CHECKS,
    GOOD_KINDS,
    check_settings,
    learn_kind,
    validate_slowly,
)
from runwatch.emitters.events import MAX_EVENT_BYTES
from runwatch.emitters.http import HttpDestination
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.emitters.once import say_once
from runwatch.emitters.sender import Sender
from runwatch.emitters.spool import Priority, Spool
from runwatch.emitters.topics import Topics
from runwatch.emitters.transport import Destination, KafkaDestination, SpoolDestination
from runwatch.emitters.view_readers import ViewReaders
from runwatch.emitters.where import choose
from runwatch.emitters.wire import check_head, event_line, head_of

if TYPE_CHECKING:
    from runwatch.emitters.rollout import Call, Request, Trajectory

log = logging.getLogger("runwatch.emitters")

DEFAULT_TOPIC = Topics().events


class Emitter(ViewReaders):
    """Sends one process's events to Kafka (`kafka=`) or a spool directory (`path=`).

    `url=` sends to `runwatch serve` over HTTP (token: `token=` or `RUNWATCH_TOKEN`).
    Without any, `RUNWATCH_KAFKA` (bootstrap servers) picks Kafka, else `RUNWATCH_URL`
    the service, else `RUNWATCH_SPOOL`
    a directory; `RUNWATCH_RUN` gives the run id when `run` is not passed. With Kafka, events
    the broker cannot take wait in `spool` (default `RUNWATCH_SPOOL`, else
    ~/.cache/runwatch/spool), up to `max_spool_bytes`, and are sent in order when it is back.
    A secured Kafka (TLS, SASL): `kafka_security=KafkaSecurity(...)`, else the
    `RUNWATCH_KAFKA_SECURITY_PROTOCOL`, `RUNWATCH_KAFKA_SASL_*` and `RUNWATCH_KAFKA_SSL_*`
    variables (`runwatch.emitters.kafka_security`); a bad setting raises ValueError here, a
    refused password later is an outage like any other (spooled, retried, logged once).
    With a service or Kafka behind it, one daemon thread follows the run view
    (`runwatch.emitters.runview`) every `stacks_interval` seconds and answers runwatch's
    request for this process's stacks (an incident opened on a hang) once
    (`runwatch.emitters.stacks`); `stacks=False` turns that off. A guard (`guard()`) reads
    the same view on the same thread. `src.host` is `host=`, else the node it runs on
    (`RUNWATCH_NODE`, else the host name: contract section 8).
    """

    def __init__(
        self,
        run: str | None = None,
        component: str = "",
        *,
        kafka: str | None = None,
        path: str | os.PathLike[str] | None = None,
        url: str | None = None,
        token: str | None = None,
        topic: str = DEFAULT_TOPIC,
        rank: int | None = None,
        instance: str | None = None,
        host: str | None = None,
        heartbeat: bool = True,
        heartbeat_interval: float = 10.0,
        spool: str | os.PathLike[str] | None = None,
        max_spool_bytes: int = 1 << 30,
        segment_bytes: int = 16 << 20,
        max_queue: int = 10_000,
        close_timeout: float = 5.0,
        kafka_options: Mapping[str, Any] | None = None,
        kafka_security: KafkaSecurity | None = None,
        strict: bool | None = None,
        stacks: bool = True,
        stacks_interval: float = 10.0,
    ) -> None:
        self._strict = strict if strict is not None else env.strict()
        self.refused = 0  # events emit() dropped for what they were (not strict)
        run = run if run is not None else env.get(env.RUN)
        if run is None:
            raise ValueError("no run id: pass run=... or set RUNWATCH_RUN")
        check_settings(
            run=run, component=component, rank=rank, instance=instance, topic=topic,
            heartbeat_interval=heartbeat_interval, close_timeout=close_timeout,
            counts={"max_spool_bytes": max_spool_bytes, "segment_bytes": segment_bytes,
                    "max_queue": max_queue},
        )  # fmt: skip
        where = choose(
            kafka=kafka, url=url, path=path, spool=spool, topic=topic,
            kafka_options=kafka_options or {}, kafka_security=kafka_security,
        )  # fmt: skip
        self.run = run
        self.component = component
        self.topic = topic
        self.kafka, self.url, self.path = where.kafka, where.url, where.path
        self._token = token if token is not None else env.get(env.TOKEN)
        self._host = host if host is not None else env.node()
        self._machine = host if host is not None else env.machine()
        self._rank, self._instance = rank, instance
        self._heartbeat, self._interval = heartbeat, float(heartbeat_interval)
        #: where this destination's events wait: its own directory, so leftovers are only
        #: ever sent where they were going (`spool.destination_dir`)
        self._destination, self._spool_dir = where.identity, where.spool_dir
        self._max_spool_bytes, self._segment_bytes = max_spool_bytes, segment_bytes
        self._max_queue_wanted = max_queue
        self._close_timeout = float(close_timeout)
        self._kafka_options = dict(kafka_options or {})
        self._kafka_security = where.security
        self._start_lock = threading.Lock()
        self._closed = False
        self._forked = False
        self._before_close: list[Callable[[], None]] = []
        self._init_readers(stacks, stacks_interval)
        self._heads: dict[tuple[Any, ...], str] = {}  # emit_from's envelopes, by source
        self._setup_process()
        check_head(self._head, "these emitter settings make")
        _track(self)
        atexit.register(self.close)
        self._start()

    # --- per-process state: built at construction and again in a forked child -----------

    def _setup_process(self) -> None:
        self._pid = os.getpid()
        src: dict[str, Any] = {"component": self.component, "host": self._host, "pid": self._pid}
        if self._rank is not None:
            src["rank"] = self._rank
        if self._instance is not None:
            src["instance"] = self._instance
        self._head = head_of(self.run, src)
        self._spool = Spool(
            self._spool_dir, max_bytes=self._max_spool_bytes, segment_bytes=self._segment_bytes,
            destination=None if self.path is not None else self._destination,
            max_age=None if self.path is not None else env.spool_max_age(),
        )  # fmt: skip
        destination: Destination
        if self.url is not None:
            destination = HttpDestination(self.url, self._spool, token=self._token)
        elif self.kafka is None:
            destination = SpoolDestination(self._spool)
        else:
            destination = KafkaDestination(
                self.kafka, self.topic, self.run, self._spool,
                options=self._kafka_options, security=self._kafka_security,
                on_connect=self._stay_first_at_exit,
            )  # fmt: skip
        self._sender = Sender(
            destination, max_queue=self._max_queue_wanted, name=f"runwatch-sender-{self.component}"
        )
        self._queue, self._wake = self._sender.queue, self._sender.wake
        self._stop_beating = threading.Event()
        self._beater: threading.Thread | None = None
        self._started = False
        # Both 0 until started: the first emit() takes the slow path, which starts the threads.
        self._wake_at = self._max_queue = 0

    def _start(self) -> None:
        with self._start_lock:
            if self._started or self._closed:
                return
            self._started = True
            self._sender.start()
            # the queue opens before the threads that fill it start: a heartbeat (or a
            # reader's event) that found it shut would go to the spool, and make its
            # directory, however reachable the destination
            self._max_queue = self._max_queue_wanted
            self._wake_at = self._sender.wake_at
            self._start_readers()
            if self._heartbeat:
                self._beater = threading.Thread(
                    target=self._beat, name=f"runwatch-heartbeat-{self.component}", daemon=True
                )
                self._beater.start()
            # A multiprocessing worker leaves through os._exit, past atexit, but it runs
            # multiprocessing's finalizers first (registered now: the fork clears them).
            if self._forked and (mp_util := sys.modules.get("multiprocessing.util")):
                mp_util.Finalize(None, self.close, exitpriority=10)

    def _after_fork_in_child(self) -> None:
        """The parent's threads are gone, its locks may be held and its producer's sockets
        are shared: start over with fresh state under the child's pid, and leave the
        parent's connections and files untouched. Threads start on the child's first emit."""
        self._sender.destination.orphan()
        self._forget_readers()
        self._start_lock = threading.Lock()
        self._setup_process()
        self._forked = True

    def _stay_first_at_exit(self) -> None:
        """kafka-python registers an atexit close for each producer; atexit runs last-in
        first-out, so re-register ours to flush before the producer is closed under us."""
        atexit.unregister(self.close)
        if not self._closed:
            atexit.register(self.close)

    # --- the hot path --------------------------------------------------------------------

    def _head_for(self, src: Mapping[str, Any]) -> str:
        """The envelope's start for events of another process (`emit_from`), checked in full
        once per distinct source; ValueError when it would make invalid events."""
        key = tuple(sorted(src.items()))
        head = self._heads.get(key)
        if head is None:
            head = head_of(self.run, {"component": self.component, "host": self._host, **src})
            check_head(head, f"source {dict(src)!r} makes")
            if len(self._heads) >= 1024:  # bounded: a flood of pids must not grow it
                self._heads.clear()
            self._heads[key] = head
        return head

    def emit_from(self, src: Mapping[str, Any], kind: str, /, **fields: Any) -> None:
        """`emit`, stamped as another process's event: `src` (component, host, pid, ...; the
        rest from this emitter) names the process a line was read from -- an actor whose
        output Ray forwarded to the driver `runwatch watch` reads. Refused like `emit`."""
        try:
            head = self._head_for(src)
        except ValueError:
            if self._strict:
                raise
            self.refused += 1
            say_once(f"runwatch: dropped events of a source that makes invalid events: "
                     f"{dict(src)!r}")  # fmt: skip
            return
        self._emit(kind, fields, head)

    def emit(self, kind: str, /, **fields: Any) -> None:
        """Send one event; never blocks on the network, never raises for transport errors.

        A bad kind, bad or unserialisable fields, or an event over 64 KiB: the event is
        dropped, counted (`refused`, and in heartbeats' `dropped_events`) and said once per
        kind and fields -- a typo must not kill a training job. With `strict=True` (or
        RUNWATCH_STRICT=1, as in runwatch's own tests) it raises ValueError / TypeError.
        """
        self._emit(kind, fields, None)

    def _emit(self, kind: str, fields: dict[str, Any], head: str | None) -> None:
        try:
            if kind not in GOOD_KINDS:
                learn_kind(kind)
            line = event_line(self._head if head is None else head, kind, fields)
            if len(line) > MAX_EVENT_BYTES:
                raise ValueError(
                    f"{kind}: event is {len(line)} bytes; the limit is {MAX_EVENT_BYTES}"
                )
            check = FIELD_CHECKS.get(kind)
            if check is not None and not check(fields):
                validate_slowly(kind, line)
        except (ValueError, TypeError) as err:
            if self._strict:
                raise
            self.refused += 1
            say_once(f"runwatch: dropped a {kind!r} event with fields {sorted(fields)}: {err} "
                     "(said once; counted in heartbeats' dropped_events)")  # fmt: skip
            return
        queued = len(self._queue)
        if queued < self._wake_at:
            self._queue.append(line)
        elif queued < self._max_queue:
            self._queue.append(line)
            if not self._wake.is_set():
                self._wake.set()
        else:
            self._spill(line)

    def _spill(self, line: str) -> None:
        """The slow path: start threads in a new (forked) process, or spool a full queue."""
        if not self._started and not self._closed:
            self._start()
            self._queue.append(line)
            self._wake.set()
        else:
            self._sender.spill(line)

    # --- helpers (runwatch.emitters.rollout) ---------------------------------------------

    def trajectory(
        self, traj: str, step: int | None = None, group: str | None = None
    ) -> Trajectory:
        """`with em.trajectory(id, step=s) as t: t.phase("sandbox")`: started/phase/done.
        `group`: the prompt group (GRPO) it belongs to (degenerate_groups judges them)."""
        from runwatch.emitters.rollout import Trajectory

        return Trajectory(self, traj, step=step, group=group)

    def request(
        self,
        req: str,
        server: str | None = None,
        *,
        dep: str | None = None,
        endpoint: str | None = None,
    ) -> Request:
        """`with em.request(id, server="vllm-0") as r: ...`: request.queued/done; `dep` or
        `endpoint`: the service the request waits on (`runwatch.emitters.deps`)."""
        from runwatch.emitters.rollout import Request

        return Request(self, req, server=server, dep=dep, endpoint=endpoint)

    def hold(
        self, dep: str | None = None, endpoint: str | None = None, *, timeout: float | None = None
    ) -> Call:
        """`with em.hold(dep="sandbox@pool-a:443"): ...`: a call outside a trajectory that the
        fleet pause may hold (`runwatch.emitters.hold`; in a trajectory, `t.call`)."""
        from runwatch.emitters.deps import dep_of
        from runwatch.emitters.rollout import Call

        waits_on = dep_of(dep, endpoint, None, node=self.machine)
        if waits_on is None:
            raise ValueError("a call names the service it waits on: give dep or endpoint")
        return Call(self, waits_on, timeout=timeout)

    # --- heartbeats and shutdown ---------------------------------------------------------

    @property
    def host(self) -> str:
        """The node this emitter's events name in `src.host` (`host=`, else `env.node()`)."""
        return self._host

    @property
    def machine(self) -> str:
        """The machine whose loopback its endpoints reach, which names the services it
        reaches there (`runwatch.emitters.deps`): `host=`, else the host name (a pod's on
        Kubernetes, whatever RUNWATCH_NODE says: `env.machine()`)."""
        return self._machine

    @property
    def spool_directory(self) -> Path:
        """Where this emitter's events wait while its destination is away (its own
        directory per destination; the destination itself for a spool)."""
        return self._spool_dir

    @property
    def dropped(self) -> int:
        """Events this process dropped (spool at its hard limit, a disk error, or refused by
        emit() for what they were)."""
        return self._spool.dropped + self.refused

    def _heartbeat_line(self, final: bool) -> Priority:
        fields: dict[str, Any] = {"final": True} if final else {}
        if dropped := self.dropped:
            fields["dropped_events"] = dropped
        return Priority(event_line(self._head, "heartbeat", fields))

    def _beat(self) -> None:
        stop = self._stop_beating
        while True:
            line = self._heartbeat_line(final=False)
            if len(self._queue) < self._max_queue:
                self._queue.append(line)
                self._wake.set()
            else:
                self._sender.spill(line)
            if stop.wait(self._interval):
                return

    def before_close(self, hook: Callable[[], None]) -> None:
        """Call `hook` when this emitter closes, before its last events are delivered (a
        helper's final report: the rank that exits)."""
        self._before_close.append(hook)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until what was emitted so far is delivered or spooled; False on timeout."""
        if not self._started or self._closed:
            return True
        done = threading.Event()
        self._queue.append(done)
        self._wake.set()
        return done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Send `heartbeat` with `final: true` (if heartbeats are on), deliver what is queued
        within `timeout` (default `close_timeout`), stop the threads. Later emits spool."""
        with self._start_lock:
            if self._closed:
                return
            hooks, self._before_close = self._before_close, []
        for hook in hooks:  # their last words go out with ours, not to the spool after
            try:
                hook()
            except Exception:
                log.exception("runwatch: a close hook failed")
        with self._start_lock:
            self._closed = True
        atexit.unregister(self.close)
        self._close_readers(self._close_timeout if timeout is None else timeout)
        if not self._started:
            return
        self._stop_beating.set()
        if self._beater is not None and self._beater is not threading.current_thread():
            self._beater.join()
        self._wake_at = self._max_queue = 0  # from now on emit() spools: the sender stops
        if self._heartbeat:
            self._queue.append(self._heartbeat_line(final=True))
        self._sender.stop(self._close_timeout if timeout is None else timeout)
        if self._queue:  # appended by another thread while the sender was stopping
            self._sender.spill(None)

    def __enter__(self) -> Emitter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"kafka={self.kafka!r}" if self.kafka else f"path={str(self.path)!r}"
        where = f"url={self.url!r}" if self.url else where
        return f"Emitter(run={self.run!r}, component={self.component!r}, {where})"


# --- fork safety ---------------------------------------------------------------------------

_LIVE: weakref.WeakSet[Emitter] = weakref.WeakSet()
_FORK_HOOK = False


#: the senders and run view readers a fork under way holds between two pieces of work
_QUIETED: list[Any] = []
#: how long a fork waits for a sender to finish what it is doing (a reconnect is bounded)
FORK_WAIT_S = 2.0


def _track(emitter: Emitter) -> None:
    global _FORK_HOOK
    _LIVE.add(emitter)
    if not _FORK_HOOK:
        _FORK_HOOK = True
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)  # fmt: skip


def _before_fork() -> None:
    """Hold each sender and run view reader between two pieces of work while the process
    forks: a child inherits every lock as it was, and one such a thread held mid-write (a
    log handler's stream, a buffer) would be held in the child for good. Bounded: a thread
    busy longer than FORK_WAIT_S is forked as it is."""
    for emitter in list(_LIVE):
        sender, follower = getattr(emitter, "_sender", None), getattr(emitter, "_follower", None)
        for worker in (sender, follower):
            if worker is not None and worker.quiet(FORK_WAIT_S):
                _QUIETED.append(worker)


def _after_fork_in_parent() -> None:
    while _QUIETED:
        _QUIETED.pop().release_quiet()


def _after_fork_in_child() -> None:
    _QUIETED.clear()  # the parent's: the child builds its own
    for emitter in list(_LIVE):
        try:
            emitter._after_fork_in_child()
        except Exception:
            print("runwatch: resetting an emitter after fork failed", file=sys.stderr)

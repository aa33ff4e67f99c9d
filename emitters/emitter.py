"""`Emitter`: what trainers, rollout workers and inference servers call (contract §5).

`emit()` is on the caller's hot path, so it does only cheap work: check the kind and the
fields (`runwatch.emitters.checks`; pydantic only for shapes those checks are unsure of),
stamp id/ts/src, encode once, and append to the sender's bounded queue. It never waits on the
network and never raises for transport trouble; bad arguments raise at once.

One job, a little over 400 lines: the `Emitter` object (its settings, `emit`, heartbeats,
fork and exit handling); the queue, transports and spool are modules of their own.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import random
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from runwatch.emitters import env
from runwatch.emitters.checks import (
    FIELD_CHECKS,
    GOOD_KINDS,
    check_settings,
    learn_kind,
    validate_slowly,
)
from runwatch.emitters.events import MAX_EVENT_BYTES, validate
from runwatch.emitters.http import HttpDestination
from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.sender import Sender
from runwatch.emitters.spool import Priority, Spool, default_base, destination_dir
from runwatch.emitters.stacks import StackResponder, Taken
from runwatch.emitters.topics import Topics
from runwatch.emitters.transport import Destination, KafkaDestination, SpoolDestination

if TYPE_CHECKING:
    from runwatch.emitters.follower import HttpSource, KafkaSource, RunViewFollower
    from runwatch.emitters.guard import Decision, Guard
    from runwatch.emitters.hold import Holds
    from runwatch.emitters.rollout import Call, Request, Trajectory

log = logging.getLogger("runwatch.emitters")

DEFAULT_TOPIC = Topics().events
_ENVELOPE = frozenset(("v", "id", "ts", "run", "kind", "src"))
# uuid4 layout: version nibble 4, variant bits 10 (what uuid.UUID(version=4) sets).
_UUID4_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_BITS = (0x4000 << 64) | (0x8000 << 48)
#: Our own generator: a user's `random.seed(0)` must not make two processes' ids collide.
_RNG = random.Random()
# nor may a fork: a child would draw the very ids its parent draws next (the consumers'
# dedup would then drop one of each pair)
os.register_at_fork(after_in_child=_RNG.seed)


def _plain(value: Any) -> Any:
    """numpy / torch scalars and arrays, which trainers hand over all the time, as JSON."""
    for method in ("item", "tolist"):
        convert = getattr(value, method, None)
        if callable(convert):
            try:
                return convert()
            except (TypeError, ValueError, RuntimeError):
                continue
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_encode = json.JSONEncoder(separators=(",", ":"), default=_plain).encode


_SAID: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        log.warning("%s", message)


def _identity(
    kafka: str | None, topic: str, security: KafkaSecurity, url: str | None
) -> dict[str, str]:
    """What makes two destinations the same: for Kafka the brokers, the topic and who we are
    to them; for a service its URL."""
    if url is not None:
        return {"kind": "http", "url": url.rstrip("/")}
    if kafka is None:
        return {"kind": "file"}
    brokers = ",".join(sorted(b.strip() for b in kafka.split(",") if b.strip()))
    who = security.protocol + (f":{security.username}" if security.username else "")
    return {"kind": "kafka", "bootstrap": brokers, "topic": topic, "security": who}


class Emitter:
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
        fallback = False  # no destination was given: the events wait on disk
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
        if kafka is not None and path is not None:
            raise ValueError("pass kafka= or path=, not both")
        if url is not None and (kafka is not None or path is not None):
            raise ValueError("pass one of kafka=, url= or path=")
        if kafka is None and path is None and url is None:
            kafka, url, path = env.destination()
            path = None if kafka or url else spool or path
            if kafka is None and path is None and url is None:
                # a missing variable must not stop a training job: keep the events on disk
                path, fallback = default_base() / "unsent", True
                _say_once(
                    f"runwatch: no destination for events (RUNWATCH_KAFKA, RUNWATCH_URL or "
                    f"RUNWATCH_SPOOL, or kafka=/url=/path=): keeping them in {path}; send "
                    "them later with `runwatch spool flush --dir "
                    f"{path} --url URL` (or --kafka HOST:PORT)"
                )
        if kafka is not None and not (isinstance(kafka, str) and kafka.strip()):
            raise ValueError(f"kafka must be 'host:port[,host:port...]', not {kafka!r}")
        if kafka is not None and kafka_options:
            from kafka import KafkaProducer  # only now: a file destination never needs it

            if unknown := sorted(set(kafka_options) - set(KafkaProducer.DEFAULT_CONFIG)):
                raise ValueError(f"kafka_options has settings KafkaProducer lacks: {unknown}")
        if kafka is not None and kafka_security is None:
            kafka_security = KafkaSecurity.from_env()  # raises KafkaSecurityError (ValueError)

        self.run = run
        self.component = component
        self.topic = topic
        self.kafka = kafka
        self.url = url
        self._token = token if token is not None else env.get(env.TOKEN)
        self.path = Path(path) if path is not None else None
        self._host = host if host is not None else env.node()
        self._rank, self._instance = rank, instance
        self._heartbeat, self._interval = heartbeat, float(heartbeat_interval)
        #: where this destination's events wait: its own directory, so leftovers are only
        #: ever sent where they were going (`spool.destination_dir`)
        self._destination = _identity(kafka, topic, kafka_security or PLAINTEXT, url)
        self._spool_dir = self.path or destination_dir(
            Path(spool or env.get(env.SPOOL) or default_base()), self._destination
        )
        self._max_spool_bytes, self._segment_bytes = max_spool_bytes, segment_bytes
        self._max_queue_wanted = max_queue
        self._close_timeout = float(close_timeout)
        self._kafka_options = dict(kafka_options or {})
        self._kafka_security = kafka_security or PLAINTEXT
        if self.path is not None:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                if not fallback:
                    why = f"cannot use {self.path} as the spool directory: {err}"
                    raise ValueError(why) from None
                # the fallback cannot be written either: events are dropped and counted
        self._start_lock = threading.Lock()
        self._closed = False
        self._forked = False
        self._before_close: list[Callable[[], None]] = []
        self._guard: Guard | None = None
        self._holds: Holds | None = None  # the fleet pause (`runwatch.emitters.hold`)
        #: answers runwatch's requests for this process's stacks (`runwatch.emitters.stacks`)
        self._stacks_wanted = stacks and (url is not None or kafka is not None)
        self._stacks_interval = float(stacks_interval)
        self._responder: StackResponder | None = None
        #: the one reader of the run's view, feeding the responder and the guard
        self._follower: RunViewFollower | None = None
        self._follower_topic: str | None = None
        self._heads: dict[tuple[Any, ...], str] = {}  # emit_from's envelopes, by source
        self._setup_process()
        self._check_envelope()
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
        self._head = self._head_of(src)
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

    def _head_of(self, src: Mapping[str, Any]) -> str:
        """The envelope's start (up to the id) of this run's events from `src`."""
        return f'{{"v":1,"run":{_encode(self.run)},"src":{_encode(src)},"id":"'

    def _check_head(self, head: str, what: str) -> None:
        """Validate a stamp once, in full, so that emit() never has to; ValueError saying
        `what` ("... make") invalid events."""
        try:
            validate(json.loads(self._line("heartbeat", {}, head)))
        except ValidationError as err:
            raise ValueError(f"{what} invalid events: {err}") from None

    def _check_envelope(self) -> None:
        self._check_head(self._head, "these emitter settings make")

    def _start(self) -> None:
        with self._start_lock:
            if self._started or self._closed:
                return
            self._started = True
            self._sender.start()
            follower = None
            if self._stacks_wanted:
                try:
                    follower = self._run_view()
                except ValueError:  # an events topic of another name: no breaker topic known
                    log.debug("runwatch: no breaker topic beside %s: stacks are not answered",
                              self.topic)  # fmt: skip
            if follower is not None:
                self._responder = StackResponder(
                    self._answer_stacks, follower, interval=self._stacks_interval
                )
            if self._heartbeat:
                self._beater = threading.Thread(
                    target=self._beat, name=f"runwatch-heartbeat-{self.component}", daemon=True
                )
                self._beater.start()
            self._max_queue = self._max_queue_wanted
            self._wake_at = self._sender.wake_at
            # A multiprocessing worker leaves through os._exit, past atexit, but it runs
            # multiprocessing's finalizers first (registered now: the fork clears them).
            if self._forked and (mp_util := sys.modules.get("multiprocessing.util")):
                mp_util.Finalize(None, self.close, exitpriority=10)

    def _after_fork_in_child(self) -> None:
        """The parent's threads are gone, its locks may be held and its producer's sockets
        are shared: start over with fresh state under the child's pid, and leave the
        parent's connections and files untouched. Threads start on the child's first emit."""
        self._sender.destination.orphan()
        # the follower's thread stayed with the parent; the first emit starts the child's
        self._guard = self._responder = self._follower = self._holds = None
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

    def _line(self, kind: str, fields: Mapping[str, Any], head: str | None = None) -> str:
        ident = "%032x" % ((_RNG.getrandbits(128) & _UUID4_MASK) | _UUID4_BITS)
        head = self._head if head is None else head
        if not fields:
            return f'{head}{ident}","ts":{time.time()!r},"kind":"{kind}"}}'
        if not _ENVELOPE.isdisjoint(fields):
            taken = sorted(_ENVELOPE.intersection(fields))
            raise ValueError(f"{kind}: fields {taken} are the envelope's; the emitter sets them")
        try:
            body = _encode(fields)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{kind}: fields are not JSON serialisable: {err}") from None
        return f'{head}{ident}","ts":{time.time()!r},"kind":"{kind}",{body[1:]}'

    def _head_for(self, src: Mapping[str, Any]) -> str:
        """The envelope's start for events of another process (`emit_from`), checked in full
        once per distinct source; ValueError when it would make invalid events."""
        key = tuple(sorted(src.items()))
        head = self._heads.get(key)
        if head is None:
            head = self._head_of({"component": self.component, "host": self._host, **src})
            self._check_head(head, f"source {dict(src)!r} makes")
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
            _say_once(f"runwatch: dropped events of a source that makes invalid events: "
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
            line = self._line(kind, fields, head)
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
            _say_once(f"runwatch: dropped a {kind!r} event with fields {sorted(fields)}: {err} "
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

        waits_on = dep_of(dep, endpoint, None)
        if waits_on is None:
            raise ValueError("a call names the service it waits on: give dep or endpoint")
        return Call(self, waits_on, timeout=timeout)

    # --- the fleet pause (runwatch.emitters.hold) ---------------------------------------

    @property
    def holds(self) -> Holds:
        """The fleet pause of this emitter's calls: made by the first held call with the
        defaults of `holding()`."""
        holds = self._holds
        return holds if holds is not None else self.holding()

    def holding(
        self,
        *,
        poll_interval: float = 5.0,
        max_wait: float | None = None,
        relapse_after: int = 3,
        topic: str | None = None,
    ) -> Holds:
        """Let runwatch hold this process's calls (`t.call`, `em.hold`) to a service while
        the service's fleet incident is open, for a run that opted in
        (`runwatch.emitters.hold`): the run view is read every `poll_interval` seconds; one
        call waits `max_wait` at most (None: while the service is held). Fails open. One
        per emitter: a second call replaces the first (whose holds are released)."""
        from runwatch.emitters.hold import Holds

        with self._start_lock:
            follower = self._run_view(topic)
        holds = Holds(self, follower, poll_interval=poll_interval, max_wait=max_wait,
                      relapse_after=relapse_after)  # fmt: skip
        old, self._holds = self._holds, holds
        if old is None:
            self.before_close(lambda: self._holds.close() if self._holds is not None else None)
        else:
            old.close()
        return holds

    # --- the circuit breaker (runwatch.emitters.guard) ----------------------------------

    def guard(
        self,
        rules: Iterable[str] | Mapping[str, str] | None = None,
        *,
        poll_interval: float = 5.0,
        on_change: Callable[[Decision], None] | None = None,
        topic: str | None = None,
    ) -> Guard:
        """Let this run's alerts pause the training loop: `if em.should_pause(): ...`.

        `rules`: the rules to obey when the service's config sets no `action` for them (a set
        pauses on them; a mapping gives "pause" or "stop" per rule). The alerts are read where
        the events go (serve over HTTP, or the `runwatch.breaker` topic on Kafka: `topic`
        names it when the events topic is not `[prefix]runwatch.events`); a spool directory
        has no service behind it, so that guard never pauses (said once). Unreachable: fails
        open. One guard per emitter: a second call replaces the first."""
        from runwatch.emitters.guard import Guard

        with self._start_lock:
            follower = self._run_view(topic)
        if follower is None:
            _say_once("runwatch guard: events go to a directory, where no service raises "
                      "alerts: this training loop will not be paused")  # fmt: skip
        guard = Guard(follower, self.run, rules, poll_interval=poll_interval, on_change=on_change)
        old, self._guard = self._guard, guard
        if old is not None:
            old.close()
        return guard

    def _run_view(self, topic: str | None = None) -> RunViewFollower | None:
        """The emitter's one follower of its run's view, made for its first reader (the
        responder, or a guard); None where no service is behind the events. A guard that
        names another breaker `topic` moves it there. The caller holds `_start_lock`."""
        from runwatch.emitters.follower import RunViewFollower

        if self._closed:
            return None
        if self._follower is not None and topic in (None, self._follower_topic):
            return self._follower
        source = self._view_source(topic)
        if source is None:
            return None
        if self._follower is None:
            self._follower = RunViewFollower(source, name=f"runwatch-view-{self.component}")
            self._follower.start()
        else:
            self._follower.switch(source)
        self._follower_topic = topic
        return self._follower

    def _view_source(self, topic: str | None = None) -> HttpSource | KafkaSource | None:
        """Where this run's view is read: serve over HTTP, or the breaker topic."""
        from runwatch.emitters.follower import HttpSource, KafkaSource

        if self.url is not None:
            return HttpSource(self.url, self.run, self._token)
        if self.kafka is not None:
            return KafkaSource(
                self.kafka, self.run, topic or Topics.of_events(self.topic).breaker,
                security=self._kafka_security.kafka_python(), options=self._kafka_options,
            )  # fmt: skip
        return None

    def _answer_stacks(self, request: str, taken: Taken) -> None:
        fields: dict[str, Any] = {"threads": taken.threads, "truncated": taken.truncated}
        if taken.error is not None:
            fields = {"error": taken.error}
        self.emit("process.stacks", request=request, how=taken.how, **fields)

    def stacks_from(self, take: Callable[[], Taken]) -> bool:
        """Answer runwatch's requests for stacks with `take()` instead of this process's own
        (`runwatch watch`: the command's, through py-spy); False without a responder."""
        if self._responder is None:
            return False
        self._responder.take = take
        return True

    def should_pause(self) -> bool:
        """True while this run's guard (`guard()`) says pause or stop; False without one."""
        guard = self._guard
        return guard is not None and guard.should_pause()

    # --- heartbeats and shutdown ---------------------------------------------------------

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
        return Priority(self._line("heartbeat", fields))

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
        for reader in (self._guard, self._responder, self._follower):
            if reader is not None:
                reader.close()
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


def _track(emitter: Emitter) -> None:
    global _FORK_HOOK
    _LIVE.add(emitter)
    if not _FORK_HOOK:
        _FORK_HOOK = True
        os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    _RNG.seed()
    for emitter in list(_LIVE):
        try:
            emitter._after_fork_in_child()
        except Exception:
            print("runwatch: resetting an emitter after fork failed", file=sys.stderr)

"""The one thread of a training process that reads its run's view, and where it reads it.

`RunViewFollower` reads the run view (`runwatch.emitters.runview`) where the emitter sends its
events -- `GET /v1/breaker/RUN` of `runwatch serve` (`HttpSource`), or the run's record on the
compacted `runwatch.breaker` topic (`KafkaSource`) -- parses each new record once, and hands
the view to its readers: the circuit breaker's guard (`runwatch.emitters.guard`) and the
stack responder (`runwatch.emitters.stacks`). One per `Emitter`. A look that fails --
nothing reachable, or a record that is not a run view -- is each reader's `missed`, and the
thread goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

from runwatch.emitters.events import FLEET_RUN
from runwatch.emitters.http import ServiceClient
from runwatch.emitters.runview import FleetView, RunView

log = logging.getLogger("runwatch.emitters")

#: The fleet's record on the breaker topic (the reserved run id: no run has it).
FLEET_KEY = FLEET_RUN.encode()


class ViewSource(Protocol):
    """Where a run's view is read: its latest record (None: runwatch knows no such run)."""

    name: str

    def fetch(self) -> bytes | None: ...

    def close(self) -> None: ...


class ViewReader(Protocol):
    """What a follower feeds: each view it read, or the reason a look failed."""

    def see(self, view: RunView | None) -> None: ...

    def missed(self, err: Exception) -> None: ...


class HttpSource:
    """`GET /v1/breaker/RUN` of `runwatch serve` (standard library only)."""

    def __init__(self, url: str, run: str, token: str | None, timeout: float = 5.0) -> None:
        self.service = ServiceClient(url, token, timeout)
        self.name = f"runwatch at {url}"
        self._path = f"/v1/breaker/{quote(run, safe='/')}"

    def fetch(self) -> bytes | None:
        status, body = self.service.request("GET", self._path)
        if status == 404:
            return None  # the service has not heard of the run (yet): nothing fires for it
        if status != 200:
            raise OSError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
        return body

    def close(self) -> None:
        pass


class KafkaSource:
    """The run's latest record on the compacted breaker topic, and the fleet's (key `@fleet`:
    the services whose fleet incident is open, `runwatch.emitters.runview.FleetView`, which
    the Kafka fleet stage publishes there): their partitions (the producers' partitioner on
    each key), read from the start once and then followed. The run's view comes back with
    the fleet's held services merged in as `serve` merges them (`RunView.holding`), so every
    reader sees one view whatever the driver."""

    def __init__(
        self,
        bootstrap: str,
        run: str,
        topic: str,
        *,
        security: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.name = f"Kafka at {bootstrap}"
        self.bootstrap, self.topic, self.key = bootstrap, topic, run.encode()
        self._security, self._options = dict(security or {}), dict(options or {})
        self.timeout = timeout
        self._consumer: Any = None
        self._tps: list[Any] = []
        self._latest: dict[bytes, bytes] = {}
        self._merged: tuple[bytes | None, bytes | None, bytes | None] = (None, None, None)

    def _connect(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.partitioner import murmur2

        from runwatch.emitters.producer import built, reachable

        if not reachable(self.bootstrap, self._options, min(self.timeout, 1.0)):
            raise OSError("no bootstrap server accepts connections")
        ms = int(self.timeout * 1000)
        consumer = built(KafkaConsumer, dict(
            bootstrap_servers=self.bootstrap.split(","), group_id=None,
            enable_auto_commit=False, request_timeout_ms=max(ms, 1000) + 500,
            # workers publish run views in transactions: a fenced one's end aborted
            isolation_level="read_committed",
            bootstrap_timeout_ms=ms, reconnect_backoff_max_ms=1000,
            **self._security,
            # the emitter's options are a producer's: pass on those a consumer has too
            **{k: v for k, v in self._options.items() if k in KafkaConsumer.DEFAULT_CONFIG},
        ))  # fmt: skip
        try:
            partitions = consumer.partitions_for_topic(self.topic)
            if not partitions:
                raise OSError(f"no topic {self.topic} (has a worker run against this broker?)")
            ordered = sorted(partitions)  # the producers' default partitioner, as in Java
            tps = {
                TopicPartition(self.topic, ordered[(murmur2(key) & 0x7FFFFFFF) % len(ordered)])
                for key in (self.key, FLEET_KEY)
            }
            consumer.assign(list(tps))
            consumer.seek_to_beginning(*tps)
        except BaseException:
            consumer.close()
            raise
        self._consumer, self._tps = consumer, list(tps)

    def fetch(self) -> bytes | None:
        if self._consumer is None:
            self._connect()
        consumer, tps, latest = self._consumer, self._tps, self._latest
        try:
            # asking for the end is also the probe that the broker is still there
            ends = consumer.end_offsets(tps)
            deadline = time.monotonic() + self.timeout
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                if time.monotonic() > deadline:
                    raise OSError(f"could not read {self.topic} up to its end in time")
                for records in consumer.poll(timeout_ms=200).values():
                    for record in records:
                        if record.key in (self.key, FLEET_KEY) and record.value is not None:
                            latest[record.key] = record.value
        except Exception:
            self.close()  # start over next time: a new connection, read from the start
            raise
        return self._with_fleet(latest.get(self.key), latest.get(FLEET_KEY))

    def _with_fleet(self, run: bytes | None, fleet: bytes | None) -> bytes | None:
        """The run's record with the fleet's held services in it (computed once per pair)."""
        if run is None or fleet is None:
            return run
        if self._merged[:2] != (run, fleet):
            try:
                view = RunView.parse(run).holding(FleetView.model_validate_json(fleet))
                merged: bytes | None = view.to_json()
            except ValueError:  # not a view: the follower says so of the run's own
                merged = run
            self._merged = (run, fleet, merged)
        return self._merged[2]

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


class RunViewFollower:
    """One daemon thread that reads a run's view from `source` and feeds it to its readers.

    It looks as often as its most eager reader asks (`follow(reader, every)`), parses each
    new record once, and survives whatever a look or a reader raises. `look()` takes one look
    now, on the caller's thread."""

    def __init__(self, source: ViewSource, *, name: str = "runwatch-view") -> None:
        self.source = source
        self.looks = 0  # looks that gave a view (or no run yet)
        self.failures = 0  # looks that failed: unreachable, or not a run view
        self._readers: dict[ViewReader, float] = {}
        self._raw: bytes | None = None
        self._view: RunView | None = None
        self._lock = threading.Lock()  # one look at a time (the thread's, or a caller's)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def interval(self) -> float:
        """Seconds between two looks: what the most eager reader asked for."""
        return min(self._readers.values(), default=60.0)

    def start(self) -> None:
        """Start the thread: a look at once, then one every `interval`."""
        self._thread.start()

    def follow(self, reader: ViewReader, every: float) -> None:
        """Feed `reader` from now on, looking at least every `every` seconds (the next look
        comes at once)."""
        self._readers[reader] = every
        self._wake.set()

    def drop(self, reader: ViewReader) -> None:
        self._readers.pop(reader, None)

    def switch(self, source: ViewSource) -> None:
        """Read from `source` from now on (closing the one before)."""
        with self._lock:
            old, self.source = self.source, source
            self._raw = self._view = None
        old.close()

    def quiet(self, timeout: float) -> bool:
        """Wait until no look is under way and hold off the next (True), or give up after
        `timeout` (False); `release_quiet` lets looks go on. For a fork, as the sender's."""
        return self._lock.acquire(timeout=timeout)

    def release_quiet(self) -> None:
        self._lock.release()

    def look(self) -> RunView | None:
        """Read the view once and feed every reader: the view (None: no such run yet, or
        the look failed, which `missed` told each reader)."""
        with self._lock:
            try:
                raw = self.source.fetch()
                view = self._parsed(raw)
            except Exception as err:
                self.failures += 1
                for reader in list(self._readers):
                    _call(reader.missed, err)
                return None
            self.looks += 1
            for reader in list(self._readers):
                _call(reader.see, view)
            return view

    def _parsed(self, raw: bytes | None) -> RunView | None:
        if raw is None:
            return None
        if raw != self._raw:  # each record parsed once
            self._view, self._raw = RunView.parse(raw), raw
        return self._view

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.clear()
                if self._readers:
                    self.look()
                self._wake.wait(self.interval)
        finally:  # the source is the thread's while it runs, so it lets go of it
            self._release()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread, which releases the source as it ends (or release it here, if the
        thread never ran). Waits at most `timeout` for a look under way: a thread that
        cannot end (a lock a forked child inherited held) stays behind as a daemon, and the
        caller's close goes on."""
        self._stop.set()
        self._wake.set()
        if self._thread.ident is None:
            self._release()
        elif self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("runwatch: the run view's reader did not stop in %.1fs", timeout)

    def _release(self) -> None:
        try:
            self.source.close()
        except Exception:  # a broker gone already: nothing to release
            log.debug("runwatch: closing the run view's source failed", exc_info=True)


def _call(hook: Any, arg: Any) -> None:
    try:
        hook(arg)
    except Exception:
        log.exception("runwatch: a reader of the run view failed")

"""Where the sender thread puts events: a spool directory, or Kafka with the spool behind it.

Only the sender thread calls these, so none of them may hold up `emit()`: the worst they do
is keep the sender busy while the bounded queue in front of it absorbs (or spills) new events.

Kafka delivery is stop-and-wait per batch (send, then `flush` with a timeout): the sender
knows each batch's fate before it takes the next, which keeps one process's events in order
through an outage. A batch the broker did not confirm goes to the spool ahead of anything
spilled meanwhile (`Spool.reserve`), the producer is dropped, and reconnection is retried
with backoff; once connected, spooled segments are replayed oldest first and removed.
A batch cut short by an outage may reach the broker twice: consumers apply an id once.
On Kafka, a batch's consecutive events of one run travel as one record (contract section 8:
JSON Lines under the header `topics.BATCH_HEADER`; a lone event as a plain record), so the
worker pays its per-record costs once for them.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from runwatch.emitters.backlog import WARN_AFTER_S, age_text
from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.producer import (
    abandon_producer,
    close_producer,
    make_producer,
    partitioner,
    reachable,
)
from runwatch.emitters.spool import Spool
from runwatch.emitters.topics import BATCH_HEADER

log = logging.getLogger("runwatch.emitters")

#: Records the broker refuses for what they are, not for its own state: retrying cannot help.
_POISON = ("MessageSizeTooLargeError", "InvalidRecordError", "CorruptRecordError")
_RUN_OF_LINE = re.compile(r'\{"v":1,"run":"([A-Za-z0-9._:/@+-]{1,200})"')
REPLAY_CHUNK = 2000
#: Bytes of events one record carries at most, as a batch of one run's events (contract
#: section 8): a quarter of the 1 MiB a broker and kafka-python take by default.
BATCH_BYTES = 256 * 1024
ADOPT_EVERY_S = 60.0


class Destination(Protocol):
    """What the sender thread drives."""

    spool: Spool

    def live(self) -> bool:
        """Whether the next batch should go straight out (else: to the spool). Lock held."""

    def send_live(self, lines: Sequence[str], reserved: int) -> None:
        """Deliver a batch taken in live mode; what fails goes to segment `reserved`."""

    def tick(self) -> None:
        """Housekeeping between batches: reconnect, replay. Bounded in time."""

    def wait_s(self) -> float:
        """How long the sender may sleep when no event comes."""

    def close(self, deadline: float) -> None:
        """Deliver what can be delivered before `deadline` (time.monotonic), then let go."""

    def orphan(self) -> None:
        """In a forked child: drop the parent's connections without using them."""


class SpoolDestination:
    """The file destination: the spool directory is where events end up."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool

    def live(self) -> bool:
        return False

    def send_live(self, lines: Sequence[str], reserved: int) -> None:  # pragma: no cover
        raise AssertionError("a spool destination is never live")

    def tick(self) -> None:
        pass

    def wait_s(self) -> float:
        return 5.0

    def close(self, deadline: float) -> None:
        self.spool.close()

    def orphan(self) -> None:
        self.spool.forget()


class SpooledDestination:
    """A network destination with the spool behind it (Kafka, `runwatch serve` over HTTP).

    What they share: a live batch that fails goes to its reserved spool segment, ahead of
    anything spilled meanwhile; spooled segments are replayed oldest first, in chunks, each
    segment read once; outages are logged once and reconnection backs off. Subclasses send
    (`_send`: how many leading lines settled) and say when they are down and back.
    """

    #: how the destination is named in log lines, e.g. "Kafka at host:9092"
    name = "destination"

    def __init__(self, spool: Spool, max_backoff: float) -> None:
        self.spool = spool
        self.max_backoff = max_backoff
        self.sent = 0
        self._retry_at = 0.0
        self._backoff = 0.25
        self._down_since: float | None = None
        #: The segment being replayed: its name, its lines, how many are confirmed.
        self._replaying: tuple[str, list[str], int] = ("", [], 0)
        self._adopted_at = float("-inf")
        self._warned = False  # of a backlog older than WARN_AFTER_S, once per outage

    def _adopt_now_and_then(self) -> None:
        """Take over what exited processes on this host left for this destination (when it
        is reachable, then once a minute: a worker may die while it is away and we are not)."""
        if time.monotonic() - self._adopted_at < ADOPT_EVERY_S:
            return
        self._adopted_at = time.monotonic()
        with self.spool.lock:
            self.spool.expire()
            adopted = self.spool.adopt_orphans()
        if adopted:
            log.warning("runwatch: sending %d segments left by exited processes to %s",
                        adopted, self.name)  # fmt: skip

    def _send(self, lines: Sequence[str], live: bool) -> int:
        """Send and wait; return how many leading lines are settled (confirmed or poison)."""
        raise NotImplementedError

    def _went_down(self, why: str) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning(
                "runwatch: %s unavailable (%s); spooling events to %s",
                self.name,
                why,
                self.spool.directory,
            )
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.max_backoff)
        self._warn_of_backlog()
        if time.monotonic() - self._adopted_at >= ADOPT_EVERY_S:  # while it stays away
            self._adopted_at = time.monotonic()
            with self.spool.lock:
                self.spool.expire()

    def _warn_of_backlog(self) -> None:
        """Say once per outage, when it has lasted WARN_AFTER_S with events waiting, where
        they wait and how to give them up (nothing is dropped unasked)."""
        if self._warned or self._down_since is None or self.spool.size == 0:
            return
        waited = time.monotonic() - self._down_since
        if waited < WARN_AFTER_S:
            return
        self._warned = True
        log.warning("runwatch: %s has not answered for %s; %d bytes of events wait in %s: "
                    "they are sent when it answers; to give them up: runwatch spool drop %s",
                    self.name, age_text(waited), self.spool.size, self.spool.directory,
                    self.spool.directory.name)  # fmt: skip

    def _came_back(self) -> None:
        if self._down_since is not None:
            log.warning(
                "runwatch: %s is back after %.0fs; sending spooled events",
                self.name,
                time.monotonic() - self._down_since,
            )
        self._down_since = None
        self._warned = False
        self._backoff = 0.25

    def send_live(self, lines: Sequence[str], reserved: int) -> None:
        settled = self._send(lines, live=True)
        if settled < len(lines):
            with self.spool.lock:
                self.spool.write_reserved(reserved, lines[settled:])

    def _replay_some(self) -> None:
        """Send the next chunk of the oldest spooled segment; remove segments once sent."""
        with self.spool.lock:
            backlog = self.spool.backlog()
            if not backlog:
                self.spool.recount()  # our sums drifted: nothing is left to replay
                return
        path = backlog[0]
        name, lines, done = self._replaying
        if name != path.name:  # read each segment once, however many chunks it takes
            name, lines, done = path.name, Spool.read(path), 0
        chunk = lines[done : done + REPLAY_CHUNK]
        done += self._send(chunk, live=False) if chunk else 0
        if done >= len(lines):
            with self.spool.lock:
                self.spool.remove(path)
            name, lines, done = "", [], 0
        self._replaying = (name, lines, done)


#: Producers inherited from a parent, kept from collection for good (see abandon_producer).
_ORPHANED: list[Any] = []


class KafkaDestination(SpooledDestination):
    """kafka-python behind a stop-and-wait sender, with the spool for outages."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        key: str,
        spool: Spool,
        *,
        options: Mapping[str, Any] | None = None,
        security: KafkaSecurity = PLAINTEXT,
        connect_timeout: float = 2.0,
        send_timeout: float = 5.0,
        max_backoff: float = 5.0,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(spool, max_backoff)
        self.name = f"Kafka at {bootstrap}"
        self.bootstrap = bootstrap
        self.topic = topic
        self.key = key.encode()
        self.options = dict(options or {})
        self.security = security
        self.connect_timeout = connect_timeout
        self.send_timeout = send_timeout
        self.on_connect = on_connect
        #: kafka-python names its threads after it, which is how its logs are told apart.
        self.client_id = f"runwatch-{os.getpid()}"
        self.producer: Any = None
        #: the most bytes of events one record carries (a quarter of a broker's default
        #: message size); cut to a quarter whenever the broker refuses a batch as too large
        self.batch_bytes = BATCH_BYTES

    # --- connection --------------------------------------------------------------------

    def _connect(self) -> bool:
        if not reachable(self.bootstrap, self.options, min(self.connect_timeout, 1.0)):
            self._down("no bootstrap server accepts connections")
            return False
        config: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap.split(","),
            "client_id": self.client_id,
            "acks": "all",
            "enable_idempotence": True,
            # uncompressed: a send is a few events of one process, which gzip shrinks little
            # while inflating it costs the worker more than the rest of an event's path
            # (bench/live_path.py); `kafka_options` can ask for compression again
            "compression_type": None,
            "linger_ms": 5,
            "max_block_ms": int(self.send_timeout * 1000),
            "request_timeout_ms": int(self.send_timeout * 1000),
            "delivery_timeout_ms": int(self.send_timeout * 2000) + 5,
            "bootstrap_timeout_ms": int(self.connect_timeout * 1000),
            "reconnect_backoff_max_ms": 1000,
        }
        try:
            # a refused password or TLS handshake is an outage like any other: spool, retry
            config.update(self.security.kafka_python())
            self.producer = make_producer({**config, **self.options})
        except Exception as err:
            self._down(f"cannot connect: {err!r}")
            return False
        self._adopted_at = float("-inf")  # connected: look for leftovers now
        self._adopt_now_and_then()
        self._came_back()
        if self.on_connect is not None:
            self.on_connect()
        return True

    def _down(self, why: str) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            close_producer(producer, 0.0)  # unconfirmed records are in the spool already
        self._went_down(self.security.scrub(why))

    # --- sending -----------------------------------------------------------------------

    def _key_of(self, line: str) -> bytes:
        """The run id: ours for our own events, read off the line for older leftovers."""
        m = _RUN_OF_LINE.match(line)
        return m.group(1).encode() if m is not None else self.key

    def _records(self, lines: Sequence[str], live: bool) -> Iterator[tuple[bytes, list[str]]]:
        """The records to send `lines` in, in order: consecutive lines of one run (the key)
        in one record, up to `batch_bytes`, as the contract's batches (section 8)."""
        group: list[str] = []
        size, key, limit = 0, b"", self.batch_bytes
        for line in lines:
            line_key = self.key if live else self._key_of(line)
            if group and (line_key != key or size + len(line) > limit):
                yield key, group
                group, size = [], 0
            group.append(line)
            key, size = line_key, size + len(line) + 1
        if group:
            yield key, group

    def _send(self, lines: Sequence[str], live: bool) -> int:
        """Send and wait; return how many leading lines are settled (confirmed or poison)."""
        producer, futures, topic = self.producer, [], self.topic
        try:
            partition_of = partitioner(producer, topic, self.options)
            for key, group in self._records(lines, live):
                # one event: a plain record, as any reader of the topic takes it
                value, headers = ((group[0].encode(), None) if len(group) == 1 else
                                  ("\n".join(group).encode(), [BATCH_HEADER]))  # fmt: skip
                future = producer.send(topic, value, key, headers=headers,
                                       partition=partition_of[key])  # fmt: skip
                futures.append((future, len(group)))
            producer.flush(timeout=self.send_timeout)
        except Exception as err:
            why = repr(err)
        else:
            why = ""
        settled = 0
        for future, count in futures:
            if future.succeeded():
                self.sent += count
            elif future.failed() and type(future.exception).__name__ in _POISON:
                if count > 1:  # a batch the broker takes for too large: smaller ones, again
                    self.batch_bytes = max(1, self.batch_bytes // 4)
                    why = why or repr(future.exception)
                    break
                with self.spool.lock:
                    self.spool.dropped += 1
                log.error("runwatch: the broker refused an event for good: %r", future.exception)
            else:
                why = why or repr(future.exception)
                break
            settled += count
        if settled < len(lines):
            self._down(why or "not confirmed in time")
        return settled

    def live(self) -> bool:
        return self.producer is not None and self.spool.size == 0

    def tick(self) -> None:
        if self.producer is None and (time.monotonic() < self._retry_at or not self._connect()):
            return
        self._adopt_now_and_then()
        if self.spool.size > 0:
            self._replay_some()

    def wait_s(self) -> float:
        if self.producer is None:
            return max(0.0, self._retry_at - time.monotonic())
        return 0.0 if self.spool.size > 0 else 5.0

    def close(self, deadline: float) -> None:
        # One more try if the broker is away: the probe costs nothing when it refuses, and
        # what is still spooled afterwards waits for the next emitter on this host.
        while self.spool.size > 0 and time.monotonic() < deadline:
            if self.producer is None and not self._connect():
                break
            self._replay_some()
        if self.producer is not None:
            producer, self.producer = self.producer, None
            close_producer(producer, max(0.0, deadline - time.monotonic()))
        with self.spool.lock:
            self.spool.close()

    def orphan(self) -> None:
        if self.producer is not None:
            abandon_producer(self.producer, _ORPHANED)
            self.producer = None
        self.spool.forget()

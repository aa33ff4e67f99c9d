"""What an `Emitter` reads of its run's view, and the one follower that feeds it.

The run view (`runwatch.emitters.runview`) is what runwatch tells a run's own processes: the
alerts that pause it, a request for stacks, the fleet pause's held services. An emitter with
a service or Kafka behind it reads it with one daemon thread (`runwatch.emitters.follower`),
made for its first reader and shared by all of them: the stack responder
(`runwatch.emitters.stacks`, unless `stacks=False`), the circuit breaker's guard (`guard()`,
`runwatch.emitters.guard`) and the fleet pause (`holding()`, `runwatch.emitters.hold`).
`Emitter` takes these methods from `ViewReaders`; the rest of it is in
`runwatch.emitters.emitter`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.emitters.once import say_once
from runwatch.emitters.stacks import StackResponder, Taken
from runwatch.emitters.topics import Topics

if TYPE_CHECKING:
    from runwatch.emitters.emitter import Emitter
    from runwatch.emitters.follower import HttpSource, KafkaSource, RunViewFollower
    from runwatch.emitters.guard import Decision, Guard
    from runwatch.emitters.hold import Holds

log = logging.getLogger("runwatch.emitters")


class ViewReaders:
    """The run view's readers of an `Emitter` (its only subclass), which sets the settings
    declared here and calls `_init_readers`, `_start_readers`, `_forget_readers` (in a
    forked child) and `_close_readers`."""

    run: str
    component: str
    topic: str
    url: str | None
    kafka: str | None
    _token: str | None
    _kafka_security: KafkaSecurity
    _kafka_options: dict[str, Any]
    _start_lock: threading.Lock
    _closed: bool

    if TYPE_CHECKING:

        def emit(self, kind: str, /, **fields: Any) -> None: ...

        def before_close(self, hook: Callable[[], None]) -> None: ...

    def _init_readers(self, stacks: bool, stacks_interval: float) -> None:
        self._guard: Guard | None = None
        self._holds: Holds | None = None  # the fleet pause (`runwatch.emitters.hold`)
        #: answers runwatch's requests for this process's stacks (`runwatch.emitters.stacks`)
        self._stacks_wanted = stacks and (self.url is not None or self.kafka is not None)
        self._stacks_interval = float(stacks_interval)
        self._responder: StackResponder | None = None
        #: the one reader of the run's view, feeding the responder and the guard
        self._follower: RunViewFollower | None = None
        self._follower_topic: str | None = None

    def _start_readers(self) -> None:
        """The stack responder, on the follower it makes; the caller holds `_start_lock`."""
        if not self._stacks_wanted:
            return
        try:
            follower = self._run_view()
        except ValueError:  # an events topic of another name: no breaker topic known
            log.debug("runwatch: no breaker topic beside %s: stacks are not answered",
                      self.topic)  # fmt: skip
            return
        if follower is not None:
            self._responder = StackResponder(
                self._answer_stacks, follower, interval=self._stacks_interval
            )

    def _forget_readers(self) -> None:
        """In a forked child: the follower's thread stayed with the parent; the first emit
        starts the child's."""
        self._guard = self._responder = self._follower = self._holds = None

    def _close_readers(self, timeout: float) -> None:
        for reader in (self._guard, self._responder):
            if reader is not None:
                reader.close()
        if self._follower is not None:
            self._follower.close(timeout)

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
        emitter = cast("Emitter", self)  # the one class that takes these methods
        holds = Holds(emitter, follower, poll_interval=poll_interval, max_wait=max_wait,
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
            say_once("runwatch guard: events go to a directory, where no service raises "
                     "alerts: this training loop will not be paused")  # fmt: skip
        guard = Guard(follower, self.run, rules, poll_interval=poll_interval, on_change=on_change)
        old, self._guard = self._guard, guard
        if old is not None:
            old.close()
        return guard

    def should_pause(self) -> bool:
        """True while this run's guard (`guard()`) says pause or stop; False without one."""
        guard = self._guard
        return guard is not None and guard.should_pause()

    # --- the follower, and the stacks it asks for ---------------------------------------

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

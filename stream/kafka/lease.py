"""The group lease: whether the consumer group still counts this member in, as far as it knows.

A member the group expelled while it was paused (a long GC, SIGSTOP, a frozen node) learns
so only at its next heartbeat; until then it holds partitions that are another member's now.
So a member holds a lease of one session timeout, renewed by each heartbeat the group
coordinator answers and by each assignment; while it has lapsed, output made from those
partitions is held back (`publish.PartitionPublisher`), and a revoke promises nothing.

aiokafka keeps its last good heartbeat to itself: its coordinator's heartbeat call is wrapped
(`watch`, private API). Where that call is missing (another client, the in-memory double
without a coordinator), the lease is always held.

The consuming loop owns the lease of its group membership (`consume.ConsumingLoop`): it
renews it on each assignment and watches its consumer's coordinator after each poll, as it
handles assignment itself; a role only asks `held()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class GroupLease:
    """A consumer group member's lease of `session_timeout` seconds."""

    def __init__(self, session_timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.session_timeout = session_timeout
        self.clock = clock
        self._until = 0.0  # held until then (the clock's time)
        #: the coordinator whose heartbeats renew the lease; False: none can be watched
        self._watched: Any = None

    def held(self) -> bool:
        """Whether the group confirmed this member within the session timeout (a heartbeat
        it answered, or an assignment). Always, where the coordinator cannot be watched."""
        return self._watched is False or self.clock() < self._until

    def renew(self) -> None:
        """The group has just confirmed this member."""
        self._until = self.clock() + self.session_timeout

    def watch(self, consumer: Any) -> None:
        """Renew the lease on each heartbeat `consumer`'s group coordinator answers (a new
        coordinator, after a reconnect, is wrapped in turn). An expelled member gets no such
        answer (the coordinator says it does not know it): its lease lapses, and stays so
        until it has joined again."""
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or coordinator is self._watched:
            return
        beat = getattr(coordinator, "_do_heartbeat", None)
        if beat is None:
            self._watched = False
            return

        async def heartbeat() -> Any:
            answered = await beat()
            if answered:
                self.renew()
            return answered

        coordinator._do_heartbeat = heartbeat
        self._watched = coordinator
        self.renew()

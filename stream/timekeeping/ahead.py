"""Event time that one event cannot hijack, when replaying a stream (`runwatch replay`,
`ingest`, `backtest`).

"Now" in a replay is the largest `ts` seen (contract §2). One event stamped far in the
future -- a wrong clock, a `ts` in the wrong unit that still looks like seconds, a hostile
line -- would move now for every run of the stream, and every run still live would get false
`heartbeat_lost` and `stuck_progress` alerts. So an event more than `jump` seconds ahead of
the stream waits: if others come near it -- from another source (run, component, host), or
`confirm` of them -- the whole stream has moved there (a gap in a multi-day file), and they
are all passed on; if nothing does, it is refused at the end with the reason. `confirm`
events of one source confirm nothing while another source goes on at the stream's time: that
is one source gone wrong (three lines of a hostile or broken emitter), not a stream that
moved. Pure; the
caller passes events in input order and gets them back, or their refusal, in the same order
as they become certain.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from runwatch.stream.timekeeping.timebounds import span

T = TypeVar("T")

#: An event further ahead of the stream than this waits for company.
DEFAULT_JUMP = 3600.0
#: Events from one source that, near each other, show the stream really moved.
DEFAULT_CONFIRM = 3
#: Events held at most; past this the earliest held is refused.
DEFAULT_HOLD = 1000


class FarAhead(Generic[T]):
    """Holds events far ahead of the stream until others confirm the stream moved there."""

    __slots__ = ("_contradicted", "_held", "confirm", "high", "hold", "jump")

    def __init__(
        self,
        jump: float = DEFAULT_JUMP,
        confirm: int = DEFAULT_CONFIRM,
        hold: int = DEFAULT_HOLD,
    ) -> None:
        self.jump, self.confirm, self.hold = jump, confirm, hold
        self.high = float("-inf")  # the stream's time: the largest ts passed on
        self._held: list[tuple[float, Hashable, T]] = []
        #: since the first held event, another source went on at the stream's time
        self._contradicted = False

    def __len__(self) -> int:
        return len(self._held)

    def passes(self, ts: float) -> bool:
        """The common case, decided without building anything: nothing is held and `ts` is
        not far ahead. Then the event passes (the caller applies it) and the stream's time
        moves to `ts`; otherwise the caller `offer`s it."""
        high = self.high
        if ts <= high:  # (most events: at or behind the stream's time)
            return not self._held
        if self._held or (ts > high + self.jump and high != float("-inf")):
            return False
        self.high = ts
        return True

    def passes_all(self, stamps: list[float]) -> bool:
        """`passes` for each ts of a batch in turn, in one step, when every one would pass:
        nothing is held and none is far ahead of the stream's time as it stood before the
        batch (or of the first ts, on a stream's first batch) -- so none is ahead of it as it
        moves. Then the stream's time moves to the largest; otherwise nothing changes and the
        caller takes them one by one."""
        if self._held:
            return False
        if not stamps:
            return True
        high = self.high if self.high != float("-inf") else stamps[0]
        top = max(stamps)
        if top > high + self.jump:
            return False
        if top > self.high:
            self.high = top
        return True

    def offer(self, ts: float, source: Hashable, item: T) -> tuple[list[T], list[tuple[T, str]]]:
        """Take one event; return the events to pass on now (in the order to apply them)
        and those refused, each with its reason."""
        if self.high == float("-inf") or ts <= self.high + self.jump:
            self.high = max(self.high, ts)
            held = self._held
            if held and not self._contradicted and all(source != h[1] for h in held):
                self._contradicted = True
            return [item, *self._caught_up()], []
        held = self._held
        held.append((ts, source, item))
        refused: list[tuple[T, str]] = []
        if len(held) > self.hold:
            first = held.pop(0)
            refused.append((first[2], self._why(first[0])))
        return self._confirmed(), refused

    def finish(self) -> list[tuple[T, str]]:
        """The end of the input: what is still held never found company."""
        out = [(item, self._why(ts)) for ts, _, item in self._held]
        self._held = []
        self._contradicted = False
        return out

    def _why(self, ts: float) -> str:
        return (
            f"ts is {span(ts - self.high)} ahead of the rest of the stream and nothing else "
            "came near it: not applied (a clock or unit error?)"
        )

    def _caught_up(self) -> list[T]:
        """Held events the stream has come within `jump` of by itself."""
        if not self._held:
            return []
        limit = self.high + self.jump
        ready = sorted((h for h in self._held if h[0] <= limit), key=lambda h: h[0])
        if ready:
            self._held = [h for h in self._held if h[0] > limit]
            self.high = max(self.high, ready[-1][0])
            if not self._held:
                self._contradicted = False
        return [h[2] for h in ready]

    def _confirmed(self) -> list[T]:
        """If the newest held event has company within `jump` of it -- another source, or
        `confirm` events in all -- the stream moved: pass on those and every held event
        before them. (Before it came nothing was confirmed, so only its company can be.)"""
        held = self._held
        ts = held[-1][0]
        near = [h for h in held if abs(h[0] - ts) <= self.jump]
        sources = len({h[1] for h in near})
        if sources < 2 and (len(near) < self.confirm or self._contradicted):
            return []
        until = max(h[0] for h in near)
        released = sorted((h for h in held if h[0] <= until), key=lambda h: h[0])
        self._held = [h for h in held if h[0] > until]
        self.high = max(self.high, until)
        if not self._held:
            self._contradicted = False
        return [h[2] for h in released] + self._caught_up()

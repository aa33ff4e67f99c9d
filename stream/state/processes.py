"""Which processes of a run are alive: the heartbeat ledger."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, overload

from runwatch.stream.state.compact import Compact

if TYPE_CHECKING:
    from runwatch.emitters.events import Source


@overload
def shared(text: str) -> str: ...
@overload
def shared(text: None) -> None: ...
@overload
def shared(text: str | None) -> str | None: ...
def shared(text: str | None) -> str | None:
    """`text` as the one object of its value the run states hold (`sys.intern`): each event
    decodes its source's names (component, host, instance) anew, and a state that keeps
    them per process would hold a copy per process otherwise. Interned strings go when
    nothing holds them. What is interned is a copy, never the event's own string, which
    other parts of a state may hold: so which objects a state shares -- and its
    checkpoint's bytes -- do not depend on which state interned a name first."""
    return None if text is None else sys.intern(text.encode().decode())


def process_id(src: Source) -> str:
    """A stable, readable name for the emitting process: component@host/pid (or /instance)."""
    where = src.host or "?"
    who = (
        src.instance if src.instance is not None else (str(src.pid) if src.pid is not None else "")
    )
    return f"{src.component}@{where}/{who}" if who else f"{src.component}@{where}"


class Process(Compact):
    """One emitting process as seen through its heartbeats."""

    __slots__ = ("component", "dropped", "dropped_at", "final", "host", "last_beat", "name")

    def __init__(self, name: str, component: str, host: str | None = None) -> None:
        self.name = name
        self.component = component
        self.host = host  # the node it runs on (`src.host`), what its alerts name
        self.last_beat: float | None = None  # None: it never sent a heartbeat
        self.final = False  # said `final: true`: a clean exit, not a loss
        self.dropped = 0  # events it said it dropped (`dropped_events`, its latest beat)
        self.dropped_at: float | None = None  # the beat that last showed that count rise

    def lost_at(self, timeout: float) -> float | None:
        """When this process counts as lost if it stays silent; None if it cannot be lost."""
        if self.last_beat is None or self.final:
            return None
        return self.last_beat + timeout

    def beat(self, ts: float, final: bool, dropped: int | None = None) -> None:
        if self.last_beat is None or ts >= self.last_beat:
            self.last_beat = ts
            # a beat after a clean exit means the process (or a new one in its place) is back
            self.final = bool(final)
            if dropped is not None:
                dropped = max(0, dropped)
                if dropped > self.dropped:
                    self.dropped_at = ts
                self.dropped = dropped

    def alive(self, now: float, timeout: float) -> bool:
        """Alive unless its heartbeats stopped (a process that never beat is presumed alive)."""
        if self.final:
            return False
        lost = self.lost_at(timeout)
        return lost is None or now < lost


class Processes(Compact):
    """The run's processes by `process_id`."""

    __slots__ = ("_by_src", "by_id", "dropping")

    def __init__(self) -> None:
        self.by_id: dict[str, Process] = {}
        #: a process said it dropped events (`Process.dropped_at`): until one does,
        #: emitter_dropping has nothing to look at
        self.dropping = False
        # (component, host, pid, instance) -> process: spares formatting the name per event
        self._by_src: dict[tuple[str, str | None, int | None, str | None], Process] = {}

    def get(self, src: Source) -> Process:
        key = (src.component, src.host, src.pid, src.instance)
        proc = self._by_src.get(key)
        if proc is None:
            key = (shared(src.component), shared(src.host), src.pid, shared(src.instance))
            proc = self._by_src[key] = self.named(src)
        return proc

    def named(self, src: Source) -> Process:
        """`src`'s process, found (or made) by its name: for a caller that keeps what it
        found itself (the run's heartbeat ledger), so that it is not kept twice."""
        name = process_id(src)
        proc = self.by_id.get(name)
        if proc is None:
            proc = self.by_id[name] = Process(name, shared(src.component), shared(src.host))
        return proc

    def dropped(self) -> dict[str, int]:
        """Events the processes said they dropped (`dropped_events`), by component."""
        out: dict[str, int] = {}
        for proc in list(self.by_id.values()):
            if proc.dropped:
                out[proc.component] = out.get(proc.component, 0) + proc.dropped
        return out

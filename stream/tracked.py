"""What the engine keeps beside the run states: each run's alert bookkeeping (`TrackedRun`),
the ids of the events applied lately (`id_window`: `RecentIds`, or its native form), which
drop duplicates, and the count of events applied by kind a counter may ask it to keep
(`KindCounts`)."""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Protocol

from runwatch.stream.native import native
from runwatch.stream.rules import Condition, Params
from runwatch.stream.state.compact import EMPTY
from runwatch.stream.state.incidents import RunIncidents
from runwatch.stream.state.run import RunState


class RecentIds(set[str]):
    """The ids of the last `capacity` events applied: duplicates are dropped in bounded memory.

    A set for membership (the set itself: `in` costs no Python call on the per-event path)
    plus a deque for age. (A dict used as an ordered set, evicting with
    `del d[next(iter(d))]`, degrades once full: CPython scans the dead slots at the front of
    the dict on every eviction, a cost per event that grows with the window until it resizes.)
    """

    __slots__ = ("_order", "capacity")

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self._order: deque[str] = deque()

    def add(self, event_id: str) -> None:
        if event_id in self:
            return
        super().add(event_id)
        order = self._order
        order.append(event_id)
        if len(order) > self.capacity:
            self.discard(order.popleft())

    def state(self) -> str | list[str]:
        """What a checkpoint keeps: the ids oldest first, joined by newlines (one string
        pickles ~6x faster than 100,000), or a list where an id holds a newline."""
        ids = list(self._order)
        joined = "\n".join(ids)
        return joined if joined.count("\n") == len(ids) - 1 else ids


class IdsHeld(Protocol):
    """The duplicate-id window as the engine and the live driver use it: `RecentIds`, or
    `_ids.IdWindow` (the same answers, as keyed digests; `_ids.c` says why)."""

    @property
    def capacity(self) -> int: ...

    def __contains__(self, event_id: object, /) -> bool: ...

    def __len__(self) -> int: ...

    def add(self, event_id: str, /) -> None: ...

    def state(self) -> str | list[str] | bytes: ...


#: the native window (`_ids.c`), where the install built it
IdWindow: Any = native("runwatch.stream._ids", "IdWindow")
#: the digests' key of the windows this process starts, drawn once (as Python's own str
#: hashes are): unknown to whoever writes the events, so none can choose ids that collide in
#: the table, and one per process, so two engines fed alike dump alike. A restored window
#: keeps the key its checkpoint holds.
_KEY = os.urandom(16)


def id_window(
    capacity: int, state: str | list[str] | bytes | None = None, *, native: bool = True
) -> IdsHeld:
    """A duplicate-id window of `capacity`, empty or from what `state()` gave: the native
    one where built (`native=False`: `RecentIds`, the reference). A native window's state
    (digests) cannot give back the ids: a build without the native part refuses it
    (ValueError), and the checkpoint that holds it with it -- its caller rebuilds from the
    input, as from any checkpoint it cannot use."""
    if state is not None and not isinstance(state, str | list | bytes):
        raise TypeError(f"a duplicate-id window's state is not a {type(state).__name__}")
    if native and IdWindow is not None:
        if isinstance(state, bytes):
            return IdWindow(capacity, state)  # type: ignore[no-any-return]
        window = IdWindow(capacity, _KEY)
    elif isinstance(state, bytes):
        raise ValueError(
            "the duplicate-id window was kept as the native part's digests, which this "
            "install did not build (no C compiler): it cannot be taken up"
        )
    else:
        window = RecentIds(capacity)
    if isinstance(state, str):
        state = state.split("\n") if state else []
    for event_id in state if isinstance(state, list) else ():
        window.add(event_id)
    return window  # type: ignore[no-any-return]


class KindCounts(dict[str, int]):
    """Events applied by kind, counted by the engines given it (`Engine.count_into`: the
    exporter's `runwatch_events_total`), bounded: past `cap` kinds, a new one counts under
    `other`. The engine adds to a known kind itself (a dict look-up, no call per event)."""

    __slots__ = ("cap", "other")

    def __init__(self, cap: int, other: str) -> None:
        super().__init__()
        self.cap = cap
        self.other = other

    def add(self, kind: str) -> None:
        """One event of `kind` (the engine's short path writes this out)."""
        n = self.get(kind)
        if n is None:
            self.first(kind)
        else:
            self[kind] = n + 1

    def first(self, kind: str) -> None:
        """The first event of `kind`."""
        if len(self) < self.cap:
            self[kind] = 1
        else:
            self[self.other] = self.get(self.other, 0) + 1


#: what a run that no person resumed has lifted (most runs): one empty set for all of them
NOT_LIFTED: set[str] = frozenset()  # type: ignore[assignment]


class TrackedRun:
    """A run's state plus what the engine needs to drive its alerts."""

    __slots__ = (
        "by_kind", "firing", "incidents", "lifted", "overrides", "resumed", "state", "timers",
        "transitions",
    )  # fmt: skip

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.overrides: dict[str, Params] = EMPTY  # per-run rule parameters (`EMPTY`: none)
        #: kind -> the rules to evaluate, when the run's overrides turn rules on or off
        #: (None: the engine's)
        self.by_kind: dict[str, list[int]] | None = None
        #: rule index -> key -> condition (a dict of its own, never `EMPTY`: every event
        #: reads it, and a dict subclass there costs ~90 instructions an event)
        self.firing: dict[int, dict[str, Condition]] = {}
        self.timers: dict[int, float] = {}  # rule index -> next scheduled check
        self.transitions: dict[str, int] = {}  # alert key -> transitions so far
        #: firing transitions (ids) a person lifted with `run.resumed`: they no longer pause
        #: the run's guard; a new firing (another id) does
        self.lifted = NOT_LIFTED
        #: the latest run.resumed (ts, by, rule): `Resumed`'s fields, as a checkpoint keeps them
        self.resumed: dict[str, Any] | None = None
        self.incidents = RunIncidents()  # which of its alerts belong to one fault

    def lift(self, transition: str) -> None:
        """A person lifted this firing transition (`run.resumed`)."""
        if self.lifted:
            self.lifted.add(transition)
        else:  # (`NOT_LIFTED`, or a set emptied since)
            self.lifted = {transition}

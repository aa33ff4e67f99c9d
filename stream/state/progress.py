"""Progress counters (tqdm bars) and the pace at which each one advances."""

from __future__ import annotations

from collections import deque

from runwatch.stream.state.compact import Compact, blank


class Counter(Compact):
    """One progress counter; restarts (a new bar under the same name) reset its pace."""

    __slots__ = ("advances", "intervals", "last_advance", "last_update", "n", "name", "total")

    def __init__(self, name: str, n: int, total: int | None, ts: float, window: int) -> None:
        self.name = name
        self.intervals: deque[float] = deque(maxlen=window)
        self._restart(n, total, ts)

    def _restart(self, n: int, total: int | None, ts: float) -> None:
        self.n = n
        self.total = total
        self.last_update = ts
        self.last_advance = ts  # when `n` last grew (or the bar (re)started)
        self.advances = 0
        self.intervals.clear()

    @property
    def complete(self) -> bool:
        return self.total is not None and self.n >= self.total

    def pace(self) -> float | None:
        """Median seconds between recent advances, once two advances have been seen."""
        if self.advances < 2 or not self.intervals:
            return None
        from statistics import median  # (when a pace is asked: not at every start)

        return float(median(self.intervals))

    def update(self, n: int, total: int | None, ts: float) -> None:
        if n > self.n:  # an advance
            self.intervals.append(max(0.0, ts - self.last_advance))
            self.advances += 1
            self.n = n
            self.last_advance = max(self.last_advance, ts)
            self.last_update = max(self.last_update, ts)
            if total is not None:
                self.total = total
        elif n < self.n:
            if ts > self.last_update:  # a new bar under the same name: learn afresh
                self._restart(n, total, ts)
            # else: a late arrival, which changes nothing
        else:
            self.last_update = max(self.last_update, ts)
            if total is not None:
                self.total = total


class ProgressCounters(Compact):
    """Counters by (component, name)."""

    __slots__ = ("by_key", "window")

    def __init__(self, window: int) -> None:
        self.by_key: dict[tuple[str, str], Counter] = {}
        self.window = window

    def update(self, component: str, name: str, n: int, total: int | None, ts: float) -> None:
        key = (component, name)
        counter = self.by_key.get(key)
        if counter is None:
            self.by_key[key] = Counter(name, n, total, ts, self.window)
        else:
            counter.update(n, total, ts)


#: every run's until it writes its own (`compact.blank`)
NO_PROGRESS = blank(ProgressCounters(0), "NO_PROGRESS")

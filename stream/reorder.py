"""A small reorder window: events that arrive a little out of order are applied in order.

Emitters on many hosts feed one stream; batching and retries shuffle events by a few
seconds. Holding events until the largest `ts` seen is `window` seconds past them means such
shuffles (and duplicates) change no alert. Events later than the window are released at once
and applied as late events.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ReorderWindow(Generic[T]):
    """Holds items (events, with whatever the driver tracks beside them) keyed by event ts."""

    __slots__ = ("_heap", "_seq", "high", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self.high = float("-inf")  # largest ts pushed
        self._heap: list[tuple[float, int, T]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, ts: float, item: T) -> list[T]:
        """Add an item; returns, in ts order (ties: arrival order), every item past the window."""
        self._seq += 1
        heap = self._heap
        heapq.heappush(heap, (ts, self._seq, item))
        if ts > self.high:
            self.high = ts
        watermark = self.high - self.window
        if heap[0][0] > watermark:
            return []
        out = []
        while heap and heap[0][0] <= watermark:
            out.append(heapq.heappop(heap)[2])
        return out

    def drain(self) -> Iterator[T]:
        """Everything still held, in ts order (end of input)."""
        heap = self._heap
        while heap:
            yield heapq.heappop(heap)[2]

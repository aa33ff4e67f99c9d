"""A small reorder window: events that arrive a little out of order are applied in order.

Emitters on many hosts feed one stream; batching and retries shuffle events by a few
seconds. Holding events until the largest `ts` seen is `window` seconds past them means such
shuffles (and duplicates) change no alert. Events later than the window are released at once
and applied as late events.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ReorderWindow(Generic[T]):
    """Holds items (events, with whatever the driver tracks beside them) keyed by event ts.

    Most items come in ts order: those (a ts at or past every one before) wait in a queue in
    arrival order, the others in a heap by (ts, arrival), and release takes the earlier of
    the two heads -- the order one heap of everything would give, without a heap operation
    or a tuple per item. (On a tie the queue's head goes first: a late item with the same
    ts as a queued one came after it, else that one would have been late too.)
    """

    __slots__ = ("_heap", "_items", "_seq", "_times", "high", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self.high = float("-inf")  # largest ts pushed
        self._times: deque[float] = deque()  # the queue: ts of each item, in arrival order
        self._items: deque[T] = deque()
        self._heap: list[tuple[float, int, T]] = []  # those that came out of order
        self._seq = 0

    def __len__(self) -> int:
        return len(self._times) + len(self._heap)

    def push(self, ts: float, item: T) -> list[T]:
        """Add an item; returns, in ts order (ties: arrival order), every item past the window."""
        times, high = self._times, self.high
        if ts >= high:
            self.high = high = ts
            times.append(ts)
            self._items.append(item)
        else:
            self._seq += 1
            heapq.heappush(self._heap, (ts, self._seq, item))
        watermark = high - self.window
        if self._heap:
            return self._merged(watermark)
        # the usual case: only the queue holds items, this one among them
        if times[0] > watermark:
            return []
        items = self._items
        times.popleft()
        out = [items.popleft()]
        while times and times[0] <= watermark:
            times.popleft()
            out.append(items.popleft())
        return out

    def _merged(self, watermark: float) -> list[T]:
        times, items, heap = self._times, self._items, self._heap
        out: list[T] = []
        while True:
            if heap and (not times or heap[0][0] < times[0]):
                if heap[0][0] > watermark:
                    return out
                out.append(heapq.heappop(heap)[2])
            elif times and times[0] <= watermark:
                times.popleft()
                out.append(items.popleft())
            else:
                return out

    def drain(self) -> Iterator[T]:
        """Everything still held, in ts order (end of input)."""
        times, items, heap = self._times, self._items, self._heap
        while times or heap:
            if heap and (not times or heap[0][0] < times[0]):
                yield heapq.heappop(heap)[2]
            else:
                times.popleft()
                yield items.popleft()

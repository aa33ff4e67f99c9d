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
    arrival order, the others in a heap, and release takes the earlier of the two heads --
    the order one heap of everything would give, without a heap operation per item.
    """

    __slots__ = ("_heap", "_queue", "_seq", "high", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self.high = float("-inf")  # largest ts pushed
        self._queue: deque[tuple[float, int, T]] = deque()  # in (ts, arrival) order
        self._heap: list[tuple[float, int, T]] = []  # those that came out of order
        self._seq = 0

    def __len__(self) -> int:
        return len(self._queue) + len(self._heap)

    def push(self, ts: float, item: T) -> list[T]:
        """Add an item; returns, in ts order (ties: arrival order), every item past the window."""
        self._seq += 1
        queue = self._queue
        if ts >= self.high:
            self.high = ts
            queue.append((ts, self._seq, item))
        else:
            heapq.heappush(self._heap, (ts, self._seq, item))
        watermark = self.high - self.window
        heap = self._heap
        if not heap:  # the usual case
            if queue[0][0] > watermark:
                return []
            out = []
            while queue and queue[0][0] <= watermark:
                out.append(queue.popleft()[2])
            return out
        out = []
        while True:
            head = queue[0] if queue else None
            if heap and (head is None or heap[0] < head):
                head = heap[0]
                if head[0] > watermark:
                    return out
                out.append(heapq.heappop(heap)[2])
            elif head is not None and head[0] <= watermark:
                out.append(queue.popleft()[2])
            else:
                return out

    def drain(self) -> Iterator[T]:
        """Everything still held, in ts order (end of input)."""
        queue, heap = self._queue, self._heap
        while queue or heap:
            if heap and (not queue or heap[0] < queue[0]):
                yield heapq.heappop(heap)[2]
            else:
                yield queue.popleft()[2]

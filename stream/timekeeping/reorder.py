"""A small reorder window: events that arrive a little out of order are applied in order.

Emitters on many hosts feed one stream; batching and retries shuffle events by a few
seconds. Holding events until the largest `ts` seen is `window` seconds past them means such
shuffles (and duplicates) change no alert. Events later than the window are released at once
and applied as late events.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def in_order(items: Iterable[tuple[float, T]], window: float) -> Iterator[T]:
    """The items of (event ts, item) pairs, in ts order (ties: arrival order), each as soon as
    the largest ts taken is `window` past it -- before the next pair is taken -- and at the
    end of `items` every one still held.

    Most items come in ts order: those (a ts at or past every one before) wait in a queue in
    arrival order, the others in a heap by (ts, arrival), and release takes the earlier of
    the two heads -- the order one heap of everything would give, without a heap operation
    or a tuple per item. (On a tie the queue's head goes first: a late item with the same
    ts as a queued one came after it, else that one would have been late too.) One loop
    with its state in locals: a replay runs it once per event.
    """
    times: deque[float] = deque()  # the queue: ts of each item, in arrival order
    queue: deque[T] = deque()
    late: list[tuple[float, int, T]] = []  # those that came out of order
    high, seq = float("-inf"), 0  # the largest ts taken; items put in the heap
    for ts, item in items:
        if ts >= high:
            high = ts
            times.append(ts)
            queue.append(item)
        else:
            seq += 1
            heapq.heappush(late, (ts, seq, item))
        watermark = high - window
        if not late:  # the usual case: only the queue holds items
            while times and times[0] <= watermark:
                times.popleft()
                yield queue.popleft()
            continue
        while True:
            if late and (not times or late[0][0] < times[0]):
                if late[0][0] > watermark:
                    break
                yield heapq.heappop(late)[2]
            elif times and times[0] <= watermark:
                times.popleft()
                yield queue.popleft()
            else:
                break
    while times or late:  # the end: what is still held, in ts order
        if late and (not times or late[0][0] < times[0]):
            yield heapq.heappop(late)[2]
        else:
            times.popleft()
            yield queue.popleft()

"""A small reorder window: events that arrive a little out of order are applied in order.

Emitters on many hosts feed one stream; batching and retries shuffle events by a few
seconds. Holding events until the largest `ts` seen is `window` seconds past them means such
shuffles (and duplicates) change no alert. Events later than the window are released at once
and applied as late events.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

#: released items the queue keeps before it drops them from its front, at least (and at
#: least as many as it holds): a slice deletion now and then, not a pop per item
_COMPACT = 4096


def in_order(
    batches: Iterable[tuple[list[float], Sequence[T]]], window: float
) -> Iterator[list[T]]:
    """For each batch of items taken, as (their event ts, them), the items it released, in
    ts order (ties: arrival order); after the last batch, every one still held.

    An item is released once the largest ts taken is `window` past it. The pairs of a batch
    are taken one by one, so the items come out in the order -- and after the same pair --
    as they would one pair at a time; only the moment they are handed on is the batch's end.

    Most items come in ts order: those (a ts at or past every one before) wait in a queue in
    arrival order, the others in a heap by (ts, arrival), and release takes the earlier of
    the two heads -- the order one heap of everything would give. While the heap is empty
    the queue alone is released, and releasing it can wait until the batch's end or the next
    late item (the watermark only rises): one bisection a batch, not a step per item.
    """
    times: list[float] = []  # the queue: ts of each item, in arrival order, from `head` on
    queue: list[T] = []
    head = 0
    late: list[tuple[float, int, T]] = []  # those that came out of order
    high, seq = float("-inf"), 0  # the largest ts taken; items put in the heap
    for stamps, items in batches:
        out: list[T] = []
        if not late and stamps and stamps[0] >= high and stamps == sorted(stamps):
            times += stamps  # in order, behind none held: the queue takes them as they are
            queue += items
            high = stamps[-1]
        else:
            for ts, item in zip(stamps, items, strict=True):
                if ts >= high:
                    high = ts
                    times.append(ts)
                    queue.append(item)
                    if not late:
                        continue  # (released at the batch's end, or before the next late item)
                else:
                    if not late:  # what the queue released before this one came
                        upto = bisect_right(times, high - window, head)
                        out += queue[head:upto]
                        head = upto
                    seq += 1
                    heapq.heappush(late, (ts, seq, item))
                watermark = high - window
                while True:  # both hold items: the earlier head first
                    if late and (head == len(times) or late[0][0] < times[head]):
                        if late[0][0] > watermark:
                            break
                        out.append(heapq.heappop(late)[2])
                    elif head < len(times) and times[head] <= watermark:
                        out.append(queue[head])
                        head += 1
                    else:
                        break
        if not late:
            upto = bisect_right(times, high - window, head)
            out += queue[head:upto]
            head = upto
        if head >= _COMPACT and head >= len(times) - head:
            del times[:head], queue[:head]
            head = 0
        yield out
    out = []
    while head < len(times) or late:  # the end: what is still held, in ts order
        if late and (head == len(times) or late[0][0] < times[head]):
            out.append(heapq.heappop(late)[2])
        else:
            out.append(queue[head])
            head += 1
    yield out

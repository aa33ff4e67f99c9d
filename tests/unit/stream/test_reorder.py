"""The reorder window releases what one heap of every item would, in the same order, at the
same moment."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from runwatch.stream.timekeeping.reorder import in_order


def one_heap(window: float, stamps: list[float]) -> list[list[int]]:
    """What each item taken releases, from a single heap keyed by (ts, arrival), and the
    end."""
    heap: list[tuple[float, int]] = []
    high = float("-inf")
    out = []
    for seq, ts in enumerate(stamps):
        heapq.heappush(heap, (ts, seq))
        high = max(high, ts)
        released = []
        while heap and heap[0][0] <= high - window:
            released.append(heapq.heappop(heap)[1])
        out.append(released)
    out.append([heapq.heappop(heap)[1] for _ in range(len(heap))])
    return out


def windowed(window: float, stamps: list[float]) -> list[list[int]]:
    """What the window releases after each item it takes (and at the end)."""
    out: list[list[int]] = [[] for _ in range(len(stamps) + 1)]
    taken = 0  # items the window has taken; one more once it has asked past the last

    def items() -> Iterator[tuple[float, int]]:
        nonlocal taken
        for seq, ts in enumerate(stamps):
            taken = seq + 1
            yield ts, seq
        taken = len(stamps) + 1

    for item in in_order(items(), window):
        out[taken - 1].append(item)
    return out


# mostly in order with some late and some tied stamps: both of the window's paths, and ties
stamps = st.lists(
    st.one_of(st.integers(0, 40).map(float), st.floats(0, 40, allow_nan=False)), max_size=60
).map(lambda xs: sorted(xs)[: len(xs) // 2] + xs[len(xs) // 2 :])


@given(stamps, st.sampled_from([0.0, 1.0, 5.0]))
def test_the_window_releases_as_one_heap_would(ts: list[float], window: float) -> None:
    assert windowed(window, ts) == one_heap(window, ts)


def test_in_order_items_wait_for_the_window_and_late_ones_pass() -> None:
    stamps = [10.0, 12.0, 11.0, 16.0, 1.0]  # "late": within the window; "very late": behind it
    assert windowed(5.0, stamps) == [[], [], [], [0, 2], [4], [1, 3]]

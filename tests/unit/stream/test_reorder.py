"""The reorder window releases what one heap of every item would, in the same order."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from runwatch.stream.timekeeping.reorder import ReorderWindow


def one_heap(window: float, stamps: list[float]) -> list[list[int]]:
    """What each push releases, from a single heap keyed by (ts, arrival), and the drain."""
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
    w: ReorderWindow[int] = ReorderWindow(window)
    out = [w.push(ts, seq) for seq, ts in enumerate(stamps)]
    out.append(list(w.drain()))
    assert len(w) == 0
    return out


# mostly in order with some late and some tied stamps: both of the window's paths, and ties
stamps = st.lists(
    st.one_of(st.integers(0, 40).map(float), st.floats(0, 40, allow_nan=False)), max_size=60
).map(lambda xs: sorted(xs)[: len(xs) // 2] + xs[len(xs) // 2 :])


@given(stamps, st.sampled_from([0.0, 1.0, 5.0]))
def test_the_window_releases_as_one_heap_would(ts: list[float], window: float) -> None:
    assert windowed(window, ts) == one_heap(window, ts)


def test_in_order_items_wait_for_the_window_and_late_ones_pass() -> None:
    w: ReorderWindow[str] = ReorderWindow(5.0)
    assert w.push(10.0, "a") == []
    assert w.push(12.0, "b") == []
    assert w.push(11.0, "late") == []  # within the window: held, released in ts order
    assert w.push(16.0, "c") == ["a", "late"]
    assert w.push(1.0, "very late") == ["very late"]  # behind the watermark: at once
    assert list(w.drain()) == ["b", "c"]

"""The reorder window releases what one heap of every item would, in the same order, at the
same moment."""

from __future__ import annotations

import heapq

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


def windowed(window: float, stamps: list[float], sizes: list[int] | None = None) -> list[list[int]]:
    """What the window releases after each batch it takes (one item each, or `sizes`
    items each, the last batch what is left), and at the end."""
    sizes = [1] * len(stamps) if sizes is None else list(sizes)
    pairs = [(ts, seq) for seq, ts in enumerate(stamps)]
    batches = []
    while pairs:
        k = max(1, sizes.pop(0)) if sizes else len(pairs)
        batches.append(([ts for ts, _ in pairs[:k]], [seq for _, seq in pairs[:k]]))
        pairs = pairs[k:]
    return list(in_order(batches, window))


def batched(per_item: list[list[int]], stamps: list[float], sizes: list[int]) -> list[list[int]]:
    """One heap's releases per item, gathered into the batches `windowed` makes of `sizes`."""
    out, at, sizes = [], 0, list(sizes)
    while at < len(stamps):
        k = min(max(1, sizes.pop(0)) if sizes else len(stamps), len(stamps) - at)
        out.append([i for released in per_item[at : at + k] for i in released])
        at += k
    return [*out, per_item[-1]]


# mostly in order with some late and some tied stamps: both of the window's paths, and ties
stamps = st.lists(
    st.one_of(st.integers(0, 40).map(float), st.floats(0, 40, allow_nan=False)), max_size=60
).map(lambda xs: sorted(xs)[: len(xs) // 2] + xs[len(xs) // 2 :])


@given(stamps, st.sampled_from([0.0, 1.0, 5.0]))
def test_the_window_releases_as_one_heap_would(ts: list[float], window: float) -> None:
    assert windowed(window, ts) == one_heap(window, ts)


@given(stamps, st.sampled_from([0.0, 1.0, 5.0]), st.lists(st.integers(0, 9), max_size=20))
def test_a_batch_releases_what_its_items_would_one_by_one(
    ts: list[float], window: float, sizes: list[int]
) -> None:
    assert windowed(window, ts, sizes) == batched(one_heap(window, ts), ts, sizes)


def test_in_order_items_wait_for_the_window_and_late_ones_pass() -> None:
    stamps = [10.0, 12.0, 11.0, 16.0, 1.0]  # "late": within the window; "very late": behind it
    assert windowed(5.0, stamps) == [[], [], [], [0, 2], [4], [1, 3]]

"""The consuming loops' garbage-collector tuning is undone on the way out, even on an error."""

from __future__ import annotations

import ctypes
import gc
import platform

import pytest

from runwatch.stream.collector import THRESHOLDS, large_blocks_returned, tuned_for_consuming


def test_tuned_within_and_restored_after() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with tuned_for_consuming():
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > frozen  # what existed at start is out of the walks
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_restored_when_the_loop_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), tuned_for_consuming():
        raise RuntimeError("broker gone")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_large_blocks_are_mapped_after_the_call() -> None:
    """Once glibc has freed a mapped block of 16 MiB, its threshold is 16 MiB: a block of 2
    MiB then grows the heap. After `large_blocks_returned`, one too large for the heap's free
    space is mapped on its own (and unmapped as it is freed)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def mapped_by(size: int) -> int:
        before = libc.mallinfo2().hblkhd
        block = libc.malloc(size)
        try:
            return int(libc.mallinfo2().hblkhd - before)
        finally:
            libc.free(block)

    libc.free(libc.malloc(16 << 20))  # glibc's dynamic threshold rises to 16 MiB
    assert mapped_by(2 << 20) == 0  # from the heap
    assert large_blocks_returned()
    assert mapped_by(4 << 20) >= 4 << 20  # a mapping of its own

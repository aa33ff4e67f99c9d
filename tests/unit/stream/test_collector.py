"""The consuming loops' garbage-collector tuning is undone on the way out, even on an error."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys

import pytest

from runwatch.stream.collector import THRESHOLDS, tuned_for_consuming


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


_PROBE = """
import ctypes
from runwatch.stream.collector import large_blocks_returned


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


def mapped_by(size):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    try:
        return libc.mallinfo2().hblkhd - before
    finally:
        libc.free(block)


def beyond_free():
    return libc.mallinfo2().fordblks + (2 << 20)  # more than the heap has free


libc.free(libc.malloc(16 << 20))  # glibc's dynamic threshold rises to 16 MiB
before = beyond_free()
print(mapped_by(before) >= before, large_blocks_returned(), mapped_by(after := beyond_free())
      >= after)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_large_blocks_are_mapped_after_the_call() -> None:
    """Once glibc has freed a mapped block of 16 MiB, its threshold is 16 MiB: a block of a
    few MiB more than the heap has free then grows the heap. After `large_blocks_returned`
    such a block is mapped on its own (and unmapped as it is freed). In a fresh
    interpreter: the call holds for the life of a process, and this one's heap is not
    known."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()  # fmt: skip
    assert out == ["False", "True", "True"]

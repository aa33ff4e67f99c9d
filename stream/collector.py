"""Python's cyclic garbage collector, tuned for a consuming loop; and the C allocator told to
give large blocks back (`large_blocks_returned`).

A Kafka consumer loop allocates millions of short-lived container objects (aiokafka's
ConsumerRecord per record, decoded events), none of them in reference cycles. With the default
thresholds (700, 10, 10) the collector runs a full collection every ~70,000 allocations and
walks every live object each time -- the whole batch in flight plus every module's objects.
Freezing what exists at start (imports, config) takes it out of those walks, and a larger
first threshold makes the walks rare. `bench/store.py` prints the sink path's CPU per event
with and without it. Reference counting frees the records either way; only cycles wait longer.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between young collections, and how many of each generation before the next.
THRESHOLDS = (100_000, 50, 100)


@contextmanager
def tuned_for_consuming() -> Iterator[None]:
    """Within: startup objects frozen, collections rare. Restored on exit."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


#: glibc's `M_MMAP_THRESHOLD` (malloc.h), and the value it is fixed at: its default
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024


def large_blocks_returned() -> bool:
    """Have glibc map every block of `MMAP_THRESHOLD` bytes or more on its own, so that it
    goes back to the system as it is freed; whether it could (glibc only: elsewhere nothing
    changes). For the life of the process.

    glibc raises that threshold each time a mapped block is freed, up to 32 MiB: once a
    worker freed a fetch or a checkpoint's bytes of a few MiB, blocks of that size come from
    the heap, and the holes they leave there stay resident -- about a fifth of a worker's
    memory at 1,250 runs (bench/RESULTS.md, "fleet"). Fixed, a large block costs a mapping
    of its own; the worker makes a few a second."""
    import ctypes  # (the worker's, at its start: not every command's)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))

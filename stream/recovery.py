"""Recovery, the same for the Kafka worker and `runwatch serve`: take a checkpoint's state
over when it fits the input it was made from, else start from nothing and say why.

Where checkpoints are kept differs -- a compacted topic for the worker
(`stream/kafka/checkpoints.py`), a file beside the event log for serve -- and so does what
is re-read after (a partition from an offset, the log from a byte). What is done with a
checkpoint does not: decode it into a fresh driver (`stream/checkpoint.py`: format, layout,
rules and CRC checked), ask the caller whether its position fits the input as it is now
(a topic made anew, a log rewritten), and on any doubt throw the half-loaded state away.
Pure: bytes in, a driver out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runwatch.stream import checkpoint
from runwatch.stream.exceptions import CheckpointError
from runwatch.stream.live import LiveDriver


@dataclass
class Restored:
    """A driver to go on with, and where in the input to re-read from."""

    driver: LiveDriver
    #: what the checkpoint covers (its caller's own keys); None: re-read all of the input
    position: Any = None
    #: why the checkpoint was not used (one line for the log); None when it was
    refused: str | None = None


def restore(data: bytes, fresh: Callable[[], LiveDriver], fits: Callable[[Any], None]) -> Restored:
    """The checkpoint `data` taken over by a driver from `fresh()`, if `fits(position)`
    accepts its position (it raises CheckpointError with the reason if not); else a fresh
    driver, from the start. (Finding none is the caller's: each says so its own way.)"""
    driver = fresh()
    try:
        position = checkpoint.load(data, driver)
        fits(position)
    except (CheckpointError, KeyError, TypeError) as err:
        why = err.reason if isinstance(err, CheckpointError) else f"unreadable ({err!r})"
        return Restored(fresh(), refused=why)
    return Restored(driver, position)

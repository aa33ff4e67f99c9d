"""The one checkpointer (`stream/checkpointer.py`): when a partition's state is checkpointed,
decided from the time it is given and what the driver applied -- the same for the Kafka
worker and `runwatch serve`."""

from __future__ import annotations

from runwatch.stream.checkpointer import Checkpointer


def test_a_partition_never_checkpointed_is_due_at_once() -> None:
    assert Checkpointer(30.0).due(0, 5, applied=5, now=1.0)


def test_due_again_once_the_interval_in_seconds_has_passed() -> None:
    c = Checkpointer(30.0)
    c.tried(0, applied=10, now=100.0)
    c.stored(0, 10)
    assert not c.due(0, 11, applied=11, now=129.9)
    assert c.due(0, 11, applied=11, now=130.0)


def test_due_again_once_enough_events_were_applied() -> None:
    c = Checkpointer(0.0, every_events=1000)
    c.tried(0, applied=10, now=100.0)
    c.stored(0, 10)
    assert not c.due(0, 1009, applied=1009, now=10_000.0)  # seconds do not count: 0 is off
    assert c.due(0, 1010, applied=1010, now=100.0)


def test_nothing_new_is_never_due_not_even_at_once() -> None:
    c = Checkpointer(30.0)
    c.restored(0, covers=(1, 4096), applied=0, now=0.0)
    assert not c.due(0, (1, 4096), applied=0, now=1e9)
    assert not c.due(0, (1, 4096), applied=0, now=1.0, at_once=True)
    assert c.due(0, (1, 4200), applied=3, now=1.0, at_once=True)  # a handover, a stop


def test_a_checkpoint_that_was_not_stored_waits_the_interval_but_a_handover_retries_it() -> None:
    """Tried and failed (a broker away, a full disk): the next is due an interval later, and
    what it would have covered is still new -- a handover or a stop tries again at once."""
    c = Checkpointer(30.0)
    c.tried(0, applied=10, now=100.0)
    assert not c.due(0, 10, applied=10, now=110.0)
    assert c.due(0, 10, applied=10, now=110.0, at_once=True)
    assert c.covers(0) is None


def test_partitions_are_scheduled_apart_and_forgotten() -> None:
    c = Checkpointer(30.0)
    c.restored(0, covers=7, applied=7, now=100.0)
    assert not c.due(0, 8, applied=8, now=101.0)
    assert c.due(1, 3, applied=3, now=101.0)  # another partition: never checkpointed
    c.forget(0)
    assert c.covers(0) is None
    assert c.due(0, 8, applied=8, now=101.0)


def test_zero_intervals_checkpoint_only_when_asked() -> None:
    c = Checkpointer(0.0, every_events=0)
    assert not c.due(0, 1, applied=1, now=1e9)
    assert c.due(0, 1, applied=1, now=1e9, at_once=True)

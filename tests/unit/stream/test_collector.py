"""The consuming loops' garbage-collector tuning is undone on the way out, even on an error."""

from __future__ import annotations

import gc

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

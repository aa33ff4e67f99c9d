"""Where a takeover reads the output topics from, given its partitions' checkpoints
(`read.earliest`): never past a record one of them needs."""

from __future__ import annotations

from runwatch.stream.kafka.read import earliest

A, D = "runwatch.alerts", "runwatch.events.dlq"


def test_the_earliest_end_of_each_partition_covers_every_checkpoint() -> None:
    older = {A: {0: 5, 1: 9}, D: {0: 100}}
    newer = {A: {0: 7, 1: 8}, D: {0: 120}}
    assert earliest([newer, older]) == {A: {0: 5, 1: 8}, D: {0: 100}}


def test_a_partition_without_a_checkpoint_means_the_whole_topics() -> None:
    assert earliest([{A: {0: 5}, D: {}}, None]) is None


def test_a_partition_that_never_had_a_record_needs_nothing() -> None:
    assert earliest([{A: {0: 5}, D: {0: 3}}, {}]) == {A: {0: 5}, D: {0: 3}}
    assert earliest([{}]) == {}


def test_a_partition_added_after_a_checkpoint_was_made_is_read_from_0() -> None:
    """The older checkpoint's runs may have published into it since it was added."""
    older = {A: {0: 5}, D: {0: 3}}
    newer = {A: {0: 7, 1: 4}, D: {0: 3}}
    assert earliest([older, newer]) == {A: {0: 5, 1: 0}, D: {0: 3}}

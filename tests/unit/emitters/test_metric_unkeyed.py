"""Rows of numbers that name nothing (issue 41): a count, then values alone, one row a step.
A series of them, the count rising, is a step's metrics, read as `column N`; one row alone,
or rows whose count does not rise or whose width changes, may be any numbers, and is none.
`runwatch diagnose`'s reading and `runwatch watch`'s scanner alike."""

from __future__ import annotations

from helpers import non_finite as bad
from helpers import read_all, scanned

#: https://github.com/prajdabre/yanmtt/issues/7 (YANMTT BART pre-training with fp16, its
#: bare `step loss` lines as posted; corpus16/dev)
YANMTT = [
    "76950 2.596339",
    "76960 2.735384",
    "76970 2.6265104",
    "76980 nan",
    "76990 nan",
    "Saving the model",
    "Loading from checkpoint",
    "Loading from checkpoint",
    "77000 nan",
    "77010 nan",
]

#: https://github.com/isl-org/PhotorealismEnhancement/issues/30 (EPE's iterations after its
#: logging record's time, a value not logged as `----`; corpus30/dev), cut to six columns
EPE = [
    "2022-05-08 16:27:05,927 17940 0.00 nan 0.00 nan ---- ----",
    "2022-05-08 16:27:06,367 17941 ---- ---- ---- ---- nan nan",
    "2022-05-08 16:27:07,162 17942 0.00 nan 0.00 nan ---- ----",
]


def test_a_series_of_unkeyed_rows_is_a_step_s_metrics() -> None:
    got = bad(read_all(YANMTT))
    assert got[0] == (76980, ["column 2"])
    assert [s for s, _ in got] == [76980, 76990, 77000, 77010]
    assert bad(scanned(YANMTT)) == got


def test_a_logging_record_s_time_and_dashes_for_values_not_logged() -> None:
    got = bad(read_all(EPE))
    assert got == [
        (17940, ["column 3", "column 5"]),
        (17941, ["column 6", "column 7"]),
        (17942, ["column 3", "column 5"]),
    ]
    assert bad(scanned(EPE)) == got


def test_one_row_alone_or_rows_that_do_not_count_on_are_no_metrics() -> None:
    for lines in (
        ["12 nan"],  # alone
        ["12 nan", "12 nan"],  # the count does not rise
        ["12 nan", "7 nan"],  # ... it goes back
        ["12 nan", "13 nan 0.5"],  # another width: another kind of row
        ["12 nan x", "13 nan x"],  # a word among the numbers
        ["-12 nan", "-11 nan"],  # a sign: no count
    ):
        assert bad(read_all(lines)) == [], lines
        assert bad(scanned(lines)) == [], lines

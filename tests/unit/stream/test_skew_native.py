"""The native clock shift (`_skew.c`) against the Python it mirrors (`skew.py`): built, the
same doubles written for every event, and wrong arguments refused."""

from __future__ import annotations

import importlib
import math
import pickle
import random
from array import array

import pytest

from runwatch.stream.timekeeping import skew
from runwatch.stream.timekeeping.skew import ClockOffsets
from tests.unit.stream.test_skew import records


def test_the_native_shift_is_built() -> None:
    """The install builds `_skew.c` wherever a C compiler is at hand (this machine, CI): a
    build that failed would go unnoticed (the extension is optional) but for this."""
    native = importlib.import_module("runwatch.stream.timekeeping._skew")
    assert native.Shifter(10.0, 20.0, 10.0)(skew._Host(5.0), None, 4.0, 5.0, 0.5) == 1.0


@pytest.mark.parametrize("seed", range(60))
def test_the_native_shift_writes_what_the_python_one_writes(seed: int) -> None:
    """Both ways side by side on hosts shared by runs, with pickled hosts (a checkpoint)
    taken up half way: the same shift for every event, the same doubles, runs and others
    held after it -- appends, a second's two smallest, the window's forgetting, rescans."""
    rng = random.Random(seed)
    native, python = ClockOffsets(window=20, gap=10, outlier=10), ClockOffsets(20, 10, 10)
    feeds = {h: records(seed * 5 + k, 500) for k, h in enumerate("ab")}
    runs = [f"run-{k}" for k in range(4)]
    fast, slow = native.shifter(), python.shifter(native=False)
    assert type(fast).__name__ == "Shifter"
    for step in range(700):
        host = rng.choice("ab")
        ts, arrival = next(feeds[host])
        run = rng.choice([*runs, None]) if step % 13 else None
        deadband = rng.choice([1.0, 0.0, -math.inf])
        for _ in range(rng.choice([1, 1, 2, 3])):  # a batch record's lines: one arrival
            got = fast(native.held(host, arrival), run, ts, arrival, deadband)
            assert got == slow(python.held(host, arrival), run, ts, arrival, deadband)
            ts += rng.choice([0.0, 0.1])
        a, b = native._hosts[host], python._hosts[host]
        assert (list(a), a.run, a.others) == (list(b), b.run, b.others)
        if step == 350:
            native._hosts = pickle.loads(pickle.dumps(native._hosts))
        if step % 89 == 0:
            gone = rng.sample(runs, 2)
            native.forget(gone)
            python.forget(gone)


def test_a_native_shift_refuses_what_is_not_a_host() -> None:
    """A wrong argument is a TypeError, not a crash or a write into the wrong memory."""
    shift = ClockOffsets().shifter()
    with pytest.raises(TypeError):
        shift(bytearray(48), None, 1.0, 2.0, 1.0)  # (bytes, not doubles)
    with pytest.raises(TypeError):
        shift(skew._Host(1.0), 7, 1.0, 2.0, 1.0)
    with pytest.raises(TypeError):
        shift(skew._Host(1.0), None, 1.0, 2.0)
    with pytest.raises(ValueError, match="scalars"):
        shift(array("d", [1.0]), None, 1.0, 2.0, 1.0)

"""The clock-offset estimate kept incrementally equals the one read off every sample held.

`ClockOffsets` keeps the two smallest samples per second of arrival and the two smallest
overall, rescanning only when a forgotten second held one of those; the reference here
keeps every sample and sorts them all on every call. Every test runs on both ways of a
shift: the native one the install builds (`_skew.c`) and the Python it mirrors.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from runwatch.stream.timekeeping import skew
from runwatch.stream.timekeeping.skew import ClockOffsets


@pytest.fixture(autouse=True, params=["native", "python"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once with the native shift, once with the Python one."""
    if request.param == "python":
        monkeypatch.setattr(skew, "_NativeShifter", None)
    return str(request.param)


class Reference:
    """One host's estimate the slow way: every sample, by second of arrival."""

    def __init__(self, window: float, gap: float, outlier: float) -> None:
        self.window, self.gap, self.outlier = window, gap, outlier
        self.buckets: list[tuple[float, list[float]]] = []
        self.start = self.last = -math.inf

    def observe(self, ts: float, arrival: float) -> float:
        if not self.buckets:
            self.start = self.last = arrival
        elif arrival - self.last > self.gap:
            self.start = arrival
        self.last = max(self.last, arrival)
        second = math.floor(arrival)
        if not self.buckets or second > self.buckets[-1][0]:
            self.buckets.append((second, [arrival - ts]))
        else:
            self.buckets[-1][1].append(arrival - ts)
        if arrival - self.start >= self.window:
            while len(self.buckets) > 1 and self.buckets[0][0] < arrival - self.window:
                self.buckets.pop(0)
        low1, low2 = self.lows()
        return low2 if low2 != math.inf and low1 < low2 - self.outlier else low1

    def lows(self) -> tuple[float, float]:
        low1, low2 = [*sorted(v for _, samples in self.buckets for v in samples), math.inf][:2]
        return low1, low2


def records(seed: int, n: int = 300) -> Iterator[tuple[float, float]]:
    """(ts, arrival) of one host: steady delivery with a gap one time in twelve, records in
    the same second or a little out of order, delivery delays that tie, and a clock that
    is off now and then (a lone outlier below or above the others)."""
    rng = random.Random(seed)
    arrival = 1000.0
    for _ in range(n):
        arrival += rng.uniform(-0.5, 2.0) if rng.random() < 0.92 else rng.uniform(20.0, 90.0)
        delay = rng.choice([0.0, 0.25, 0.5, 1.0, rng.uniform(0.0, 5.0)])
        error = rng.choice([0.0, 0.0, 0.0, 0.0, -12.0, -30.0, 30.0, 400.0])
        yield arrival - delay - error, arrival


@pytest.mark.parametrize("seed", range(200))
def test_the_estimate_equals_the_smallest_samples_held(seed: int) -> None:
    clocks, ref = ClockOffsets(window=20, gap=10, outlier=10), Reference(20, 10, 10)
    for ts, arrival in records(seed):
        assert clocks.observe("h", ts, arrival) == ref.observe(ts, arrival)
        # the second smallest shows in the estimate only past an outlier: check it held
        held = clocks._hosts["h"]
        assert (held.low1, held.low2) == ref.lows()


class ReferenceShifts:
    """`ClockOffsets.shift` the plain way: each host's estimate from `Reference`, and per run
    per host the shift its latest event got and the latest time one was put at, in a dict."""

    def __init__(self) -> None:
        self.hosts: dict[str, Reference] = {}
        self.runs: dict[str, dict[str, tuple[float, float]]] = {}

    def shift(self, host: str, run: str, ts: float, arrival: float, deadband: float) -> float:
        estimate = self.hosts.setdefault(host, Reference(20, 10, 10)).observe(ts, arrival)
        want = estimate if estimate > deadband or estimate < 0.0 else 0.0
        last = self.runs.setdefault(run, {}).get(host)
        if last is not None:
            held, latest = last
            if held > want and ts + want < latest:
                want = max(want, min(held, arrival - ts))
            self.runs[run][host] = (want, max(ts + want, latest))
        else:
            self.runs[run][host] = (want, ts + want)
        return want

    def forget(self, runs: list[str]) -> None:
        for run in runs:
            self.runs.pop(run, None)


@pytest.mark.parametrize("seed", range(40))
def test_shifts_of_runs_sharing_hosts_equal_the_plain_ones(seed: int) -> None:
    """Hosts that serve several runs (a node's rollout workers of four jobs), runs that
    leave (`forget`) and come back: the shifts kept per host give what a dict per run gives."""
    rng = random.Random(seed)
    clocks, ref = ClockOffsets(window=20, gap=10, outlier=10), ReferenceShifts()
    feeds = {h: records(seed * 7 + k, 400) for k, h in enumerate("abc")}
    runs = [f"run-{k}" for k in range(5)]
    for step in range(900):
        host = rng.choice("abc")
        ts, arrival = next(feeds[host])
        ts -= rng.choice([0.0, 0.0, 0.3, 2.0])  # each run's emitters deliver a little apart
        run = rng.choice(runs)
        assert clocks.shift(host, run, ts, arrival, 1.0) == ref.shift(host, run, ts, arrival, 1.0)
        if step % 97 == 0:
            gone = rng.sample(runs, 2)
            clocks.forget(gone)
            ref.forget(gone)

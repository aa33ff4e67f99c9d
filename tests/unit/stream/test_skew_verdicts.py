"""What a host's clock, and other runs' deliveries from that host, must not change in a run's
verdict (contract section 2: a clock off by up to a few minutes causes neither false nor
missed alerts; many runs from one host do not disturb each other).

The live driver puts each event on the broker's clock (`runwatch.stream.timekeeping.skew`)
and applies it at that time, never later than its arrival. These are the ways that went
wrong: events of one delivery collapsed onto one instant, a clock a little ahead left an
event's own alert to ripen after its run had ended (`runwatch watch` sends a crashed
command's failure and its run's end together), and a faster delivery of another run moved
a run's later event before its earlier one.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import encode, make_event

from runwatch.stream.alerts import Alert
from runwatch.stream.live import LiveDriver

T0 = 1_800_000_000.0


class Host:
    """One emitting host whose clock is `ahead` seconds ahead of the broker's (negative:
    behind); `deliver` puts a batch of its events (stamped at true times) on the broker at
    `arrival`, in order, as one sender's batch."""

    def __init__(self, driver: LiveDriver, ahead: float, name: str = "node-0") -> None:
        self.driver, self.ahead, self.name = driver, ahead, name
        self.offset = 0

    def event(self, kind: str, at: float, run: str = "r1", **fields: Any) -> dict[str, Any]:
        return make_event(kind, at + self.ahead, run=run, host=self.name, **fields)

    def deliver(self, arrival: float, *events: dict[str, Any]) -> list[Alert]:
        records = []
        for event in events:
            records.append((encode(event), arrival, self.offset))
            self.offset += 1
        alerts, dead = self.driver.feed(records)
        assert dead == []
        return alerts


def fired(alerts: list[Alert]) -> list[tuple[str, str]]:
    return [(a.rule, a.state) for a in alerts]


def crash(host: Host, at: float, delay: float) -> list[Alert]:
    """A watched command that exits 1: its run started a minute before; `runwatch watch`
    sends the failure and the run's end in one batch, `delay` seconds after it stamped
    them."""
    out = host.deliver(at - 60 + delay, host.event("run.started", at - 60))
    failed = host.event(
        "component.failed", at, error="exited with status 1", how="exit", exit_code=1
    )
    out += host.deliver(at + delay, failed, host.event("run.finished", at, status="failed"))
    return out + host.driver.tick(at + 5)


@pytest.mark.parametrize("ahead", [0.0005, 0.3, 0.9, 1.5, -0.3, -30.0])
def test_a_crash_fires_before_its_run_ends_whichever_way_the_clock_is_off(ahead: float) -> None:
    """A host a little ahead (less than the driver corrects, or than the broker's
    milliseconds) stamps the failure after the moment it arrives: it must still fire, at
    once, before the run's end in the same batch closes it."""
    out = crash(Host(LiveDriver(), ahead), T0, delay=0.0002)
    assert fired(out) == [("component_failed", "firing"), ("component_failed", "resolved")]


@pytest.mark.parametrize("ahead", [0.3, -120.0])
def test_a_nan_step_and_the_end_of_its_run_in_one_batch_fire(ahead: float) -> None:
    host = Host(LiveDriver(), ahead)
    host.deliver(T0 + 0.01, host.event("run.started", T0))
    nan = host.event("step.metrics", T0 + 5, step=3, metrics={"loss": float("nan")})
    out = host.deliver(T0 + 5.0001, nan, host.event("run.finished", T0 + 5.001, status="ok"))
    assert fired(out) == [("non_finite_metric", "firing"), ("non_finite_metric", "resolved")]


@pytest.mark.parametrize("delay", [0.05, 1.5, 4.0])
def test_a_failure_just_after_a_step_in_one_batch_stands(delay: float) -> None:
    """A host two minutes behind; the batch holding a step's end and, a millisecond later,
    a failure arrives `delay` s after they were stamped -- the fastest delivery of the host
    so far, so both are put at its arrival. The failure came after the step: it stands."""
    host = Host(LiveDriver(), -120.0)
    host.deliver(T0 + 10, host.event("run.started", T0))  # a slow first delivery
    step = host.event("step.done", T0 + 30, step=7)
    failed = host.event("component.failed", T0 + 30.001, error="RuntimeError: CUDA error",
                        how="exception")  # fmt: skip
    out = host.deliver(T0 + 30.001 + delay, step, failed)
    assert fired(out) == [("component_failed", "firing")]


def run_a_failing_after_its_step(driver: LiveDriver, neighbour: bool) -> list[Alert]:
    """Run a's sender is slow (a loaded process: each batch 3 s on its way), on a host two
    minutes behind that runwatch has not heard before; its step ends, then half a second
    later a process fails. With `neighbour`, run b on the same host delivers at once in
    between: the host's estimate falls to b's quicker delivery."""
    host = Host(driver, -120.0)
    out = host.deliver(T0 + 3, host.event("run.started", T0, run="a"))
    out += host.deliver(T0 + 6.5, host.event("step.done", T0 + 3.5, run="a", step=1))
    if neighbour:
        out += host.deliver(T0 + 7.05, host.event("run.started", T0 + 7, run="b"))
    failed = host.event("component.failed", T0 + 4, run="a", error="RuntimeError: CUDA error",
                        how="exception")  # fmt: skip
    return out + host.deliver(T0 + 7.5, failed)


def test_a_neighbours_quicker_delivery_does_not_put_a_runs_failure_before_its_step() -> None:
    alone = run_a_failing_after_its_step(LiveDriver(), neighbour=False)
    assert fired(alone) == [("component_failed", "firing")]
    shared = run_a_failing_after_its_step(LiveDriver(), neighbour=True)
    assert fired(shared) == fired(alone)

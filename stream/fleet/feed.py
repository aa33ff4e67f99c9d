"""What one input partition's worker tells the fleet stage (`wire.py`), made beside its
driver: pure, fed the transitions it publishes and its engine.

- every run transition it publishes (the stage reads incidents opening and closing from
  them, as the in-process stage does from the engine's);
- each run's usage (`population.usage`) when what it uses changes, and every `REFRESH_S`
  of its time while it is active -- the stage's population lags the engine's by at most
  that much (a run's use of a service counts for an hour, `users_within`);
- a mark: the partition's time (the smaller of the engine's two clocks), before which
  nothing it sends later will be stamped -- but events spooled through an outage, which
  the stage takes as they come.
"""

from __future__ import annotations

from runwatch.emitters.events import FLEET_RUN
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.population import usage
from runwatch.stream.fleet.wire import FleetRecord, Mark, Transition, Uses

#: A run's usage is told again after this much of its time, changed or not.
REFRESH_S = 60.0
#: Runs are looked over for changed usage at most this often (the partition's time).
SCAN_S = 5.0
#: A mark goes out when the partition's time moved this much since the last.
MARK_S = 1.0


class FleetFeed:
    """The fleet records of one input partition (module docstring)."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        #: per run: its clock when its usage was last told, and the shape then
        self.told: dict[str, tuple[float, tuple[int, int, int]]] = {}
        self.scanned = float("-inf")
        self.marked = float("-inf")

    def records(self, alerts: list[Alert], engine: Engine) -> list[FleetRecord]:
        """What goes out with `alerts` (the driver's transitions, as published)."""
        p = self.partition
        now = min(engine.now, engine.heard)
        out: list[FleetRecord] = []
        if now >= self.scanned + SCAN_S:
            self.scanned = now
            out += self._usage(engine)
        out += [Transition(p, a) for a in alerts if a.run != FLEET_RUN]
        if now >= self.marked + MARK_S:
            self.marked = now
            out.append(Mark(p, now))
        return out

    def _usage(self, engine: Engine) -> list[FleetRecord]:
        told = self.told
        out: list[FleetRecord] = []
        for run, tracked in engine.runs.items():
            state = tracked.state
            shape = (len(state.deps), len(state.processes.by_id), len(state.inference.servers))
            last = told.get(run)
            if last is not None and last[1] == shape and state.clock < last[0] + REFRESH_S:
                continue
            told[run] = (state.clock, shape)
            out.append(Uses(self.partition, run, usage(state)))
        if len(told) > len(engine.runs):  # runs the driver let go
            for run in [r for r in told if r not in engine.runs]:
                del told[run]
        return out

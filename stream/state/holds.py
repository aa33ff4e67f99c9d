"""Which of a run's processes hold their work to a service, and since when: the fleet pause
as the run's own emitters report it (`dep.held`, `dep.released`; `runwatch.emitters.hold`).

Per service (`dep`) and process, the latest hold: when it began, the fleet incident it was
for, and when it ended (None while it holds). A release stamped before the hold it would
end (a late arrival) changes nothing; a process's clean exit (`final` heartbeat) and the
run's end let go of its holds. Bounded: `MAX_HOLDS` services, the oldest let go first.
"""

from __future__ import annotations

from runwatch.stream.state.compact import Compact, blank

#: services a run's holds are kept for (a run holds a handful; a runaway emitter, the oldest go)
MAX_HOLDS = 64


class Hold(Compact):
    """One process's latest hold of one service."""

    __slots__ = ("fleet", "since", "until")

    def __init__(self, since: float, fleet: str | None) -> None:
        self.since = since
        self.fleet = fleet
        self.until: float | None = None  # when it was released; None: it holds


class Holds(Compact):
    """The run's holds: dep -> process name -> its latest `Hold` (module docstring)."""

    __slots__ = ("by_dep",)

    def __init__(self) -> None:
        self.by_dep: dict[str, dict[str, Hold]] = {}

    def held(self, dep: str, process: str, ts: float, fleet: str | None) -> None:
        holders = self.by_dep.get(dep)
        if holders is None:
            holders = self.by_dep[dep] = {}
            if len(self.by_dep) > MAX_HOLDS:
                del self.by_dep[next(iter(self.by_dep))]
        hold = holders.get(process)
        if hold is not None and (hold.until is None or hold.until >= ts):
            return  # holding already, or a late `held` of a hold that has ended
        holders[process] = Hold(ts, fleet)

    def released(self, dep: str, process: str, ts: float) -> None:
        hold = self.by_dep.get(dep, {}).get(process)
        if hold is not None and hold.until is None and ts >= hold.since:
            hold.until = ts

    def exited(self, process: str, ts: float) -> None:
        """A process said it is shutting down: its holds end."""
        for holders in self.by_dep.values():
            hold = holders.get(process)
            if hold is not None and hold.until is None:
                hold.until = max(ts, hold.since)

    def ended(self, ts: float) -> None:
        """The run finished: every hold ends."""
        for holders in self.by_dep.values():
            for hold in holders.values():
                if hold.until is None:
                    hold.until = max(ts, hold.since)

    def holding(self) -> dict[str, dict[str, Hold]]:
        """The services held now, each with the processes that hold it."""
        out: dict[str, dict[str, Hold]] = {}
        for dep, holders in self.by_dep.items():
            now = {proc: h for proc, h in holders.items() if h.until is None}
            if now:
                out[dep] = now
        return out

    def __bool__(self) -> bool:
        return bool(self.by_dep)


#: every run's until it writes its own (`compact.blank`)
NO_HOLDS = blank(Holds(), "NO_HOLDS")

"""Who uses what, for the fleet decision (`decide.Population`): read from the engine's run
states where one process sees every run (replay, `serve`), or from the usage records the
workers publish on the Kafka path (`RecordedPopulation`) -- one meaning for both, `uses`.

A run uses a service it waited on within `since` (`RunState.deps`), a node one of its
processes runs on, an inference server it shows (`server@host`: "vllm-0" alone names one
in every run); a run is active if it was heard from since `since`.
"""

from __future__ import annotations

from runwatch.stream.engine import Engine
from runwatch.stream.state.fleet import RunUsage, Thing
from runwatch.stream.state.run import RunState


def usage(state: RunState) -> RunUsage:
    """`state`'s usage as the workers report it."""
    hosts = frozenset(p.host for p in state.processes.by_id.values() if p.host)
    servers = frozenset(
        f"{name}@{srv.process.host}"
        for name, srv in state.inference.servers.items()
        if srv.process is not None and srv.process.host
    )
    return RunUsage(state.clock, dict(state.deps), hosts, servers)


def uses(run: RunUsage | RunState, thing: Thing, since: float) -> bool:
    """Whether `run` used `thing` within `since` (module docstring)."""
    kind, name = thing
    if kind == "dep":
        return run.deps.get(name, float("-inf")) >= since
    if isinstance(run, RunUsage):
        return name in (run.hosts if kind == "host" else run.servers)
    if kind == "host":
        return any(p.host == name for p in run.processes.by_id.values())
    return any(
        srv.process is not None and f"{server}@{srv.process.host}" == name
        for server, srv in run.inference.servers.items()
    )


class EnginePopulation:
    """Who uses what, read from the engine's run states when a decision needs it (never per
    event)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def active(self, since: float) -> set[str]:
        return {run for run, t in self.engine.runs.items() if t.state.clock >= since}

    def users(self, thing: Thing, since: float) -> set[str]:
        return {run for run, t in self.engine.runs.items()
                if t.state.clock >= since and uses(t.state, thing, since)}  # fmt: skip


class RecordedPopulation:
    """Who uses what, from the latest usage record of each run (the Kafka fleet stage)."""

    def __init__(self, runs: dict[str, RunUsage] | None = None) -> None:
        self.runs: dict[str, RunUsage] = {} if runs is None else runs

    def report(self, run: str, usage: RunUsage) -> None:
        """A run's usage as of its clock; an older report than the one held is ignored."""
        held = self.runs.get(run)
        if held is None or usage.clock >= held.clock:
            self.runs[run] = usage

    def forget(self, before: float) -> None:
        """Runs not heard from since `before` leave (bounded: the active ones only)."""
        for run in [r for r, u in self.runs.items() if u.clock < before]:
            del self.runs[run]

    def active(self, since: float) -> set[str]:
        return {run for run, u in self.runs.items() if u.clock >= since}

    def users(self, thing: Thing, since: float) -> set[str]:
        return {run for run, u in self.runs.items()
                if u.clock >= since and uses(u, thing, since)}  # fmt: skip

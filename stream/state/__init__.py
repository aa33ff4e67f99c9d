"""What runwatch knows about a run, folded from its events: `RunState` and the parts it is
made of (processes, inference servers, trajectories and requests, progress bars, ranks, steps).
Pure: no clock, no I/O."""

from runwatch.stream.state.run import RunState, StateConfig

__all__ = ["RunState", "StateConfig"]

"""Which policy weights a run's trainer published and which each inference server loaded.

`weights.published` (trainer) says version V exists from its `ts` on; `weights.loaded` says
a server generates with version V from its `ts` on. Bounded: the latest `KEEP` published
versions, and one entry per server.
"""

from __future__ import annotations

from runwatch.stream.state.compact import Compact, blank

KEEP = 64


class Loaded:
    """One server's latest load."""

    __slots__ = ("at", "process", "version")

    def __init__(self, version: int, at: float, process: str) -> None:
        self.version, self.at, self.process = version, at, process


class Weights(Compact):
    """Published versions (version -> first ts published) and each server's latest load."""

    __slots__ = ("loaded", "published", "steps")

    def __init__(self) -> None:
        self.published: dict[int, float] = {}
        self.steps: dict[int, int] = {}  # version -> the step that made it, when said
        self.loaded: dict[str, Loaded] = {}

    def publish(self, version: int, ts: float, step: int | None) -> None:
        first = self.published.get(version)
        if first is None or ts < first:
            self.published[version] = ts
        if step is not None:
            self.steps[version] = step
        if len(self.published) > KEEP:
            oldest = min(self.published)
            del self.published[oldest]
            self.steps.pop(oldest, None)

    def load(self, server: str, version: int, ts: float, process: str) -> None:
        """A server's load: the highest version it reported stands (reports out of order,
        an older one arriving late, change nothing)."""
        now = self.loaded.get(server)
        if now is None or version > now.version or (version == now.version and ts > now.at):
            self.loaded[server] = Loaded(version, ts, process)

    @property
    def latest(self) -> int | None:
        return max(self.published) if self.published else None

    def missing_since(self, version: int) -> float | None:
        """When the first version newer than `version` was published (what a server on
        `version` has been missing since); None when there is none."""
        newer = [ts for v, ts in self.published.items() if v > version]
        return min(newer) if newer else None


#: every run's until it writes its own (`compact.blank`)
NO_WEIGHTS = blank(Weights(), "NO_WEIGHTS")

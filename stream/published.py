"""What `runwatch.alerts` already holds, as a takeover reads it: the transitions a rebuilt
engine compares its own with (`LiveDriver.finish_replay`), so that none is published twice
and none is lost."""

from __future__ import annotations

from collections.abc import Iterator

from runwatch.stream.alerts import Alert, transition_id
from runwatch.stream.engine import Engine


class PublishedAlerts:
    """What `runwatch.alerts` already holds: per key, how many transitions and the last."""

    __slots__ = ("_ids", "last")

    def __init__(self) -> None:
        self._ids: dict[str, set[str]] = {}
        self.last: dict[str, Alert] = {}

    def add(self, alert: Alert) -> None:
        """Record one transition read from the topic (a repeated id counts once)."""
        ids = self._ids.setdefault(alert.key, set())
        if alert.id not in ids:
            ids.add(alert.id)
            self.last[alert.key] = alert

    def checkpointed(self, engine: Engine) -> None:
        """Record every transition `engine` made as on the topic: restored from a checkpoint
        stored once all it made was published, whose output topics are read from where
        they ended when it was made (`read.output_ends`), not from their start."""
        for tracked in engine.runs.values():
            for key, made in tracked.transitions.items():
                ids = self._ids.setdefault(key, set())
                ids.update(transition_id(key, n) for n in range(1, made + 1))

    def count(self, key: str) -> int:
        return len(self._ids.get(key, ()))

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

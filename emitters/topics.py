"""The Kafka topics of contract §1 and §3, spelled once: every role and the Emitter take their
names from `Topics`, with an optional prefix (tests, staging beside production, tenants)."""

from __future__ import annotations

from dataclasses import dataclass

#: A record of `runwatch.events` that carries several events of one run (contract section 8)
#: has this header; its value is one event per line (JSON Lines), its key the run id.
BATCH_HEADER = ("content-type", b"application/x-ndjson")


@dataclass(frozen=True, slots=True)
class Topics:
    """runwatch's topic names under `prefix` (e.g. "staging." gives staging.runwatch.events)."""

    prefix: str = ""

    @property
    def events(self) -> str:
        """Events from emitters; key = run id."""
        return f"{self.prefix}runwatch.events"

    @property
    def alerts(self) -> str:
        """Alert transitions; key = run id."""
        return f"{self.prefix}runwatch.alerts"

    @property
    def dlq(self) -> str:
        """Invalid events, each with the reason (the dead-letter topic)."""
        return f"{self.prefix}runwatch.events.dlq"

    @property
    def checkpoints(self) -> str:
        """The stream workers' checkpoints (compacted); key = group, topic and partition."""
        return f"{self.prefix}runwatch.checkpoints"

    @property
    def breaker(self) -> str:
        """Each run's view (`runwatch.emitters.runview`, compacted); key = run id."""
        return f"{self.prefix}runwatch.breaker"

    @property
    def fleet(self) -> str:
        """What the workers tell the fleet stage (`runwatch.stream.fleet.wire`); one
        partition, key = the cause or the run."""
        return f"{self.prefix}runwatch.fleet"

    @property
    def fleet_members(self) -> str:
        """The fleet stage's decisions the workers stamp `incident.fleet` from
        (`runwatch.stream.fleet.members`, compacted); one partition, key `@fleet`."""
        return f"{self.prefix}runwatch.fleet.members"

    @classmethod
    def of_events(cls, events: str) -> Topics:
        """The topics beside an events topic named the usual way (`Prunwatch.events`)."""
        base = cls().events
        if not events.endswith(base):
            raise ValueError(f"{events!r} does not end in {base!r}: name the topic yourself")
        return cls(events[: -len(base)])

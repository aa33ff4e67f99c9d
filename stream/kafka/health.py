"""Liveness and readiness of a Kafka consuming loop (`runwatch sink`, `runwatch notify`).

What the Helm chart's probes ask: /healthz (restart me when this fails) and /readyz (count me
as up when this passes). Alive: the loop turned within `stall` seconds -- or it waits, for at
most the `grace` it announced, on something with its own deadline (a DuckDB flush waiting for
readers, a Slack call with its retries). Ready: partitions assigned, Kafka answering fetches
of each (where the client tells when it last did), and at most `behind_ok` records in all
between what the loop has handled and the end of its partitions (the broker's high watermark
from the last fetch).

The loop calls `beat()` once per batch, never per record; the checks read what it left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

#: per assigned (topic, partition): records behind the end; None before its first fetch, or
#: when Kafka has not answered one lately. None for the whole: no assignment yet.
Lag = Callable[[], Mapping[tuple[str, int], int | None] | None]


class ConsumerHealth:
    """The state behind /healthz and /readyz of one consuming loop."""

    def __init__(
        self,
        lag: Lag,
        *,
        stall: float,
        behind_ok: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lag = lag
        self.stall = stall
        self.behind_ok = behind_ok
        self.clock = clock
        self.beat_at = clock()
        self._allowed = stall

    def beat(self, grace: float | None = None) -> None:
        """The loop turned. With `grace`: it is about to wait for something that ends (or
        fails) within `grace` seconds, so a longer silence is not a hang."""
        self.beat_at = self.clock()
        self._allowed = self.stall if grace is None else max(self.stall, grace)

    def live(self) -> tuple[bool, str]:
        quiet = self.clock() - self.beat_at
        if quiet > self._allowed:
            return False, f"the consuming loop has not turned for {quiet:.0f} s"
        return True, "consuming"

    def ready(self) -> tuple[bool, str]:
        lag = self.lag()
        if not lag:
            return False, "no partitions assigned yet"
        unfetched = sorted(f"{t}:{p}" for (t, p), n in lag.items() if n is None)
        if unfetched:
            return False, f"waiting for Kafka to answer a fetch of {', '.join(unfetched)}"
        behind = sum(n for n in lag.values() if n is not None)
        if behind > self.behind_ok:
            return False, f"catching up: {behind} records behind"
        return True, f"caught up on {len(lag)} partitions ({behind} records behind)"

"""serve's HTTP front and pages over a `Service` fed bundled scenarios on their own clock,
for the browser test and the README's screenshot (`make docs`).

Posted to a live `runwatch serve`, a recorded scenario's two hours arrive in a second and
the clock-skew correction puts them all at their arrival: the rules see no time pass. Here
the service's wall clock follows the events instead (as tests/unit/service does): each batch
arrives 50 ms after its last event and the timer turns between batches, so the alerts fire as
they did in the incident, and the pages show it as a person would have seen it live.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from runwatch.dev.scenarios import SCENARIOS
from runwatch.service.core import Service
from runwatch.service.http import ServiceServer

#: A request holds at most this many events, and at most this much event time (seconds), as
#: an emitter's sender sends them: so a host's first request tells its clock's offset.
BATCH = 250
WINDOW = 2.0


class EventClock:
    """The service's wall clock: set by whoever feeds it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scenario_events(names: Iterable[str], until: float | None = None) -> list[dict[str, Any]]:
    """The named scenarios' events in time order (up to `until`, event time)."""
    events = [e for name in names for e in SCENARIOS[name]()]
    events.sort(key=lambda e: float(e["ts"]))
    return [e for e in events if until is None or float(e["ts"]) <= until]


class ScenarioServe:
    """A `Service` fed `events` as emitters would have sent them, behind serve's HTTP front
    on a free loopback port (without it: `http=False`); `url`, `feed()` more, `close()` (or
    use it as a context)."""

    def __init__(
        self, events: list[dict[str, Any]], *, token: str | None = None, http: bool = True
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="runwatch-pages-"))
        self.clock = EventClock(float(events[0]["ts"]) if events else 0.0)
        self.service = Service(self.dir / "h.duckdb", self.dir / "logs", clock=self.clock)
        self.service.recover()
        self.server: ServiceServer | None = None
        try:
            self.feed(events)
            self.wait_for_history()
            if http:
                # silences live in a Slack notifier's ledger: one of its own, no Slack
                ledger = self.dir / "notify.sqlite"
                self.server = ServiceServer(("127.0.0.1", 0), self.service, token, silences=ledger)
                self.server.start()
        except BaseException:
            self.close()
            raise
        port = self.server.server_address[1] if self.server is not None else 0
        self.url = f"http://127.0.0.1:{port}"

    def feed(self, events: list[dict[str, Any]]) -> None:
        """Requests of events close in time (`BATCH`, `WINDOW`), each arriving just after its
        last event; the timer turns after each."""
        i = 0
        while i < len(events):
            first = float(events[i]["ts"])
            j = i + 1
            while j < len(events) and j - i < BATCH and float(events[j]["ts"]) < first + WINDOW:
                j += 1
            batch, i = events[i:j], j
            self.clock.now = max(self.clock.now, float(batch[-1]["ts"]) + 0.05)
            got = self.service.ingest([orjson.dumps(e) for e in batch])
            if got.rejected:
                raise ValueError(f"the scenario's events were refused: {got.rejected[0]}")
            self.service.tick()

    def wait_for_history(self, timeout: float = 120.0) -> None:
        """Until the history holds every event fed (its thread writes a second or so
        behind), so that a run's timeline on the pages is whole."""
        deadline = time.monotonic() + timeout
        while self.service.history.lag_bytes():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the history did not catch up in {timeout:g}s")
            time.sleep(0.05)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.service.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ScenarioServe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

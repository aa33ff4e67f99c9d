"""JSON Lines into the history without Kafka: events, and the alert transitions the rules
raise on them.

This is the embedded path: what `runwatch ingest` runs, and what fills a history in tests.
First every valid line is stored; then the runs the input touched are replayed from the
history (`backtest.replay_stored`: `runwatch.stream.replay` over stored events in event-time
order), so the recorded transitions are the ones the same engine raises on the whole history
of those runs -- whatever order the files came in, and also when a run's events arrive over
several ingests. Transition ids are deterministic (alert key + number), so transitions
recorded before are not stored twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runwatch.store.backtest import replay_stored
from runwatch.store.store import Store
from runwatch.store.writer import BATCH_SIZE, BatchWriter
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.refused import Refused
from runwatch.stream.replay import admitted

Line = tuple[str, int, bytes]


@dataclass(frozen=True, slots=True)
class Ingested:
    lines: int
    events: int  # valid events read
    new_events: int  # of them, not in the history before (by id)
    alerts: int  # alert transitions raised on the runs touched
    new_alerts: int  # of them, not recorded before
    invalid: int


def ingest(
    lines: Iterable[Line],
    db: str | Path,
    *,
    config: RulesConfig | None = None,
    rules: bool = True,
    until: float | None = None,
    batch_size: int = BATCH_SIZE,
    on_invalid: Callable[[Refused], None] | None = None,
) -> Ingested:
    """Store every valid line; with `rules`, also store the transitions of the runs touched.

    Invalid lines are reported through `on_invalid`, kept in `invalid_events`, and skipped.
    """
    report = on_invalid or (lambda bad: None)
    writer = BatchWriter(db)
    runs: set[str] = set()
    n_lines = n_events = n_invalid = 0

    def counted() -> Iterator[Line]:
        nonlocal n_lines
        for line in lines:
            n_lines += 1
            yield line

    def refuse(bad: Refused) -> None:
        nonlocal n_invalid
        n_invalid += 1
        writer.add_invalid(bad)
        report(bad)

    try:
        # a run.started.config the rules refuse is not stored either
        for event, _, _, raw in admitted(counted(), Engine(config).check, refuse):
            n_events += 1
            runs.add(event.run)
            writer.add_event(raw, event)
            if writer.pending >= batch_size:
                writer.flush()
        writer.flush()
    finally:
        writer.close()
    alerts = new_alerts = 0
    if rules and runs:
        with Store.writer(db) as store:
            engine = Engine(config)
            found = list(
                replay_stored(
                    store,
                    sorted(runs),
                    engine,
                    until=until,
                    on_invalid=report,
                )
            )
            alerts = len(found)
            new_alerts = store.write_alerts(found)
    return Ingested(n_lines, n_events, writer.totals["new_events"], alerts, new_alerts, n_invalid)

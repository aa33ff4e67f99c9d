"""Replay: JSON Lines in, alert transitions out, on event time (contract §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from runwatch.emitters.events import Event
from runwatch.stream.alerts import Alert
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.reorder import ReorderWindow

#: Default reorder window for replay, in seconds of event time.
DEFAULT_WINDOW = 5.0


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line that was skipped, and why."""

    source: str
    line: int
    reason: str


Held = tuple[Event, str, int]  # an event and where it came from


def replay(
    lines: Iterable[tuple[str, int, bytes]],
    engine: Engine,
    *,
    until: float | None = None,
    window: float = DEFAULT_WINDOW,
    on_invalid: Callable[[BadLine], None] | None = None,
) -> Iterator[Alert]:
    """Feed (source, line number, raw line) records to the engine; yield transitions in order.

    Blank lines are skipped; invalid ones are reported through `on_invalid` and skipped.
    With `until`, time advances to it after the last event so holding conditions fire.
    """
    report = on_invalid or (lambda bad: None)
    buffer: ReorderWindow[Held] = ReorderWindow(window)
    push, check = buffer.push, engine.check
    for source, number, raw in lines:
        if raw.isspace() or not raw:  # blank (what `not raw.strip()` says, without a copy)
            continue
        try:
            event = decode(raw)
            check(event)  # one the engine will refuse must not move the window
        except InvalidEvent as err:
            report(BadLine(source, number, err.reason))
            continue
        for held in push(event.ts, (event, source, number)):
            alerts = _apply(engine, held, report)
            if alerts:
                yield from alerts
    for held in buffer.drain():
        yield from _apply(engine, held, report)
    if until is not None:
        yield from engine.advance(until)


def _apply(engine: Engine, held: Held, report: Callable[[BadLine], None]) -> list[Alert]:
    event, source, number = held
    try:
        return engine.apply(event)
    except InvalidEvent as err:
        report(BadLine(source, number, err.reason))
        return []

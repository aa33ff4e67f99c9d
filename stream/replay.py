"""Replay: JSON Lines in, alert transitions out, on event time (contract §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, count, islice, repeat
from operator import attrgetter
from typing import TYPE_CHECKING

from runwatch.stream.alerts import Alert
from runwatch.stream.decode import admit, chunk_admitted, lines_admitted
from runwatch.stream.engine import CHECKED_KINDS, Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.refused import Refused
from runwatch.stream.rules.shared_cause import judged
from runwatch.stream.timekeeping.ahead import FarAhead
from runwatch.stream.timekeeping.reorder import in_order

if TYPE_CHECKING:
    from runwatch.emitters.events import Event

#: Default reorder window for replay, in seconds of event time.
DEFAULT_WINDOW = 5.0
#: Lines read, admitted and put through the window as one batch: the steps between them
#: are taken once a batch, not once an event (their order, and what each one sees, is the
#: same). Input that comes in batches of its own (`Batches`) keeps them.
BATCH = 1024


Line = tuple[str, int, bytes]  # where a line came from (source, line number) and the line
Held = tuple["Event", str, int, bytes]  # an event, where it came from, and its line


class Chunk:
    """A piece of a file of whole lines: where it came from (`source`, the number of its
    first line), its bytes as read (`data`) and its lines (each with its newline, the last
    perhaps without). Replay decodes `data` as it is, in one step (`decode.chunk_admitted`),
    without joining the lines again; iterated, it gives (source, number, line) as
    `Line`s."""

    __slots__ = ("data", "first", "lines", "source")

    def __init__(self, source: str, first: int, data: bytes, lines: list[bytes]) -> None:
        self.source, self.first, self.data, self.lines = source, first, data, lines

    def __iter__(self) -> Iterator[Line]:
        return zip(repeat(self.source), count(self.first), self.lines)

    def __len__(self) -> int:
        return len(self.lines)


class Batches:
    """Lines that come in batches, each what the input had ready (a pipe's lines so far, a
    file's next chunk: `runwatch.commands.lines`). Replay takes them a batch at a time as
    they come, so that one fed by a pipe that stays open moves with its lines, where
    `BATCH` lines at a time would wait for lines that have not been written. Iterated: the
    lines one by one."""

    __slots__ = ("batches",)

    def __init__(self, batches: Iterable[Sequence[Line] | Chunk]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Line]:
        return chain.from_iterable(self.batches)


def replay(
    lines: Iterable[Line],
    engine: Engine,
    *,
    until: float | None = None,
    window: float = DEFAULT_WINDOW,
    on_invalid: Callable[[Refused], None] | None = None,
    fleet: bool = True,
) -> Iterator[Alert]:
    """Feed (source, line number, raw line) records to the engine; yield transitions in order.

    Blank lines are skipped; invalid ones are reported through `on_invalid` and skipped, as
    are events far ahead of the stream that nothing else confirms (`FarAhead`)
    and events the rules fail on (isolated, reported, the replay goes on). With `until`,
    time advances to it after the last event so holding conditions fire. Every run is in
    one stream, so fleet incidents are judged too (`runwatch.stream.fleet`; `fleet=False`:
    the engine's transitions alone).
    """
    report = on_invalid or (lambda bad: None)
    stage = None
    if fleet and judged(engine.config):
        # imported only where fleet incidents are judged: a replay of the seven starts without
        from runwatch.stream.fleet.stage import FleetStage

        stage = FleetStage(engine)
    apply = engine.apply
    for released in in_order(stamped(lines, engine.check, report), window):
        for held in released:
            try:  # (this loop runs once per event)
                alerts = apply(held[0])
                if alerts:
                    for alert in alerts:
                        alert.to_json()  # what cannot be written out must not be made
                    yield from alerts if stage is None else stage.transitions(alerts)
            except Exception as err:
                report(_refused(held, err))
    if until is not None:
        alerts = engine.advance(until)
        yield from alerts if stage is None else stage.transitions(alerts)


def admitted(
    lines: Iterable[Line],
    check: Callable[[Event], None],
    on_refused: Callable[[Refused], None],
) -> Iterator[Held]:
    """The events of a stream of (source, line number, raw line) that may be applied, as
    (event, source, line number, raw line) in the order to apply them: through the ingress
    boundary (`decode.admit`), then `check` (the engine's: a usable run.started.config), then
    the stream's time (`ahead.FarAhead`). Each line refused goes to `on_refused`, one far
    ahead of the stream when that is certain (at the end at the latest). Blank lines are
    skipped. What `replay` (through the reorder window: `stamped`), `ingest` and `check`
    all read through.
    """
    return (held for _, batch in stamped(lines, check, on_refused) for held in batch)


def stamped(
    lines: Iterable[Line],
    check: Callable[[Event], None],
    on_refused: Callable[[Refused], None],
) -> Iterator[tuple[list[float], list[Held]]]:
    """`admitted`'s events a batch at a time (`Batches`' own, else `BATCH` lines), as (their
    ts, them): what the reorder window takes. A batch of plain lines, none far ahead, is
    admitted in one step (`decode.lines_admitted`, `FarAhead.passes_all`: its stamps and
    kinds as the decode's checks found them); any other, line by line."""
    ahead: FarAhead[Held] = FarAhead()
    for batch in lines.batches if isinstance(lines, Batches) else _batched(lines):
        if not batch:
            continue
        if type(batch) is Chunk:  # (a file's piece: decoded as it was read)
            admitted = chunk_admitted(batch.data, batch.lines)
            raws: Sequence[bytes] = batch.lines
            sources: Iterable[str] = repeat(batch.source)
            numbers: Iterable[int] = count(batch.first)
        else:
            sources, numbers, raws = zip(*batch, strict=True)
            admitted = lines_admitted(raws)
        if admitted is not None:
            events, stamps, types = admitted
            if _checked(events, types, check) and ahead.passes_all(stamps):
                yield stamps, list(zip(events, sources, numbers, raws, strict=False))
                continue
        yield _one_by_one(batch, ahead, check, on_refused)
    for (_, src, line, data), why in ahead.finish():
        on_refused(Refused(why, data, src, position=line, kind="bad_time"))


def _batched(lines: Iterable[Line]) -> Iterator[list[Line]]:
    """`lines`, `BATCH` at a time."""
    it = iter(lines)
    return iter(lambda: list(islice(it, BATCH)), [])


_KIND = attrgetter("kind")


def _checked(events: list[Event], types: set[type], check: Callable[[Event], None]) -> bool:
    """Whether the engine takes every event (`Engine.check`: it refuses a bad run.started
    config); False sends the batch line by line, where the refusal is reported. `types`: the
    events' structs (each names its kind), for a batch with none the engine checks."""
    if CHECKED_KINDS.isdisjoint(map(_KIND, types)):
        return True
    try:
        for event in events:
            if event.kind in CHECKED_KINDS:
                check(event)
    except InvalidEvent:
        return False
    return True


def _one_by_one(
    batch: Iterable[Line],
    ahead: FarAhead[Held],
    check: Callable[[Event], None],
    on_refused: Callable[[Refused], None],
) -> tuple[list[float], list[Held]]:
    """`stamped`'s step for a batch with a line that is not plain, or an event far ahead."""
    stamps: list[float] = []
    held: list[Held] = []
    passes = ahead.passes
    for source, number, raw in batch:
        if raw.isspace() or not raw:  # blank (what `not raw.strip()` says, without a copy)
            continue
        try:
            event = admit(raw)
            if event.kind in CHECKED_KINDS:  # (the others it never refuses)
                check(event)  # one the engine will refuse must not move the stream's time
        except InvalidEvent as err:
            on_refused(Refused(err.reason, raw, source, position=number, kind=err.kind))
            continue
        ts = event.ts
        if passes(ts):
            stamps.append(ts)
            held.append((event, source, number, raw))
            continue
        passed, refused = ahead.offer(ts, origin(event), (event, source, number, raw))
        for (_, src, line, data), why in refused:
            on_refused(Refused(why, data, src, position=line, kind="bad_time"))
        stamps += [one[0].ts for one in passed]
        held += passed
    return stamps, held


def origin(event: Event) -> tuple[str, str, object]:
    """Who stamped an event's time: its run, component and host (else process)."""
    src = event.src
    return event.run, src.component, src.host or src.instance or src.pid


def _refused(held: Held, err: Exception) -> Refused:
    """An event the rules refused (InvalidEvent) or failed on (a bug meets an input: the
    event is isolated, the replay goes on)."""
    _, source, number, raw = held
    if isinstance(err, InvalidEvent):
        return Refused(err.reason, raw, source, position=number, kind=err.kind)
    why = f"could not be applied: {type(err).__name__}: {err}"
    return Refused(why, raw, source, position=number, kind="failed_in_rules")

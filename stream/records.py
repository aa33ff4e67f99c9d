"""A record of `runwatch.events` into its events: one, or the lines of a batch.

Contract section 8: a record may carry several events of one run, marked by the header
`content-type: application/x-ndjson` (`topics.BATCH_HEADER`), its value one event per line;
a record without it is one event. Every reader of the topic -- the worker's live path and
its takeover re-read (`LiveDriver.feed_records`), the sink -- splits records here, and
validates each line on its own: one bad line is refused with its reason and its place in
the record, the others are applied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from runwatch.emitters.events import Event
from runwatch.emitters.topics import BATCH_HEADER
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import InvalidEvent

#: a Kafka record's headers, as aiokafka and kafka-python give them: (key, value) pairs
Headers = Iterable[tuple[str, bytes]]

_KEY, _VALUE = BATCH_HEADER[0], BATCH_HEADER[1]
#: the headers as the emitters write them (`emitters/transport.py`), as aiokafka reads them
#: the headers the emitters put on every batch record (compared as a whole first)
EMITTED = (BATCH_HEADER,)


def is_batch(headers: Headers | None) -> bool:
    """Whether a record's headers mark it as a batch: `content-type` (any case) is
    `application/x-ndjson` (parameters after a `;` allowed, as in HTTP)."""
    if not headers:
        return False
    if headers == EMITTED:  # (what nearly every batch carries: no loop)
        return True
    for key, value in headers:
        if key.lower() == _KEY and value is not None:
            return value.split(b";", 1)[0].strip().lower() == _VALUE
    return False


def lines_of(value: bytes) -> list[bytes]:
    """A batch record's lines, blank ones left out: its events, in order."""
    return [line for line in value.split(b"\n") if line and not line.isspace()]


def record_events(
    value: bytes, batch: bool, check: Callable[[bytes], Event] = decode
) -> Iterator[tuple[bytes, Event | InvalidEvent]]:
    """The events of one record, in order, as (their bytes, the event or why it is refused):
    the value as one event, or with `batch` each of its lines (blank ones skipped), each
    through `check` (`decode`; the sink's `admit`). A refused line's reason says which line
    of how many it is."""
    if not batch:
        try:
            yield value, check(value)
        except InvalidEvent as err:
            yield value, err
        return
    lines = lines_of(value)
    for number, line in enumerate(lines, 1):
        try:
            yield line, check(line)
        except InvalidEvent as err:
            yield line, InvalidEvent(f"line {number} of {len(lines)} of a batch: {err.reason}",
                                     err.kind)  # fmt: skip

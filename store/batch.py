"""`EventBatch`: a batch of events being gathered for one write, in the shape DuckDB takes.

Gathering is Python work (one dict lookup and two appends per event) and runs where the
events arrive -- on the sink's consuming thread -- so that the writer thread does nothing but
DuckDB work, which runs without the GIL beside the decoding of the next batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from runwatch.emitters.events import Event
from runwatch.stream.decode import decode

#: What a batch takes: the event as received (bytes, text, or a parsed object).
RawEvent = bytes | str | Mapping[str, Any]

_BOM = b"\xef\xbb\xbf"


def as_bytes(raw: RawEvent) -> bytes:
    """The event's JSON as UTF-8 bytes, without a byte-order mark."""
    if isinstance(raw, bytes):
        return raw[3:] if raw[:3] == _BOM else raw
    if isinstance(raw, str):
        return raw.lstrip("\ufeff").encode("utf-8", "surrogatepass")
    # Python's json keeps NaN/Infinity as the tokens emitters write; DuckDB reads them.
    return json.dumps(raw, separators=(",", ":")).encode()


class EventBatch:
    """Valid events for one write: the first copy of each id, in the order received.

    `received` counts every event added, copies included: the store numbers events (`seq`)
    by arrival, so a batch spans `received` sequence numbers and `index` says which of them
    the kept events take.
    """

    __slots__ = ("ids", "index", "raws", "received")

    def __init__(self) -> None:
        self.received = 0
        self.index: list[int] = []  # position among the received events, per kept event
        self.raws: list[bytes] = []
        self.ids: dict[str, float] = {}  # id -> ts, of the kept events

    def add(self, raw: RawEvent, event: Event | None = None) -> None:
        """Add one event; without `event` it is validated here (raises InvalidEvent)."""
        data = raw if type(raw) is bytes and raw[:3] != _BOM else as_bytes(raw)
        if event is None:
            event = decode(data)
        n = self.received
        self.received = n + 1
        ids = self.ids
        id_ = event.id
        if id_ in ids:  # a copy within the batch: the first one wins
            return
        ids[id_] = event.ts
        self.index.append(n)
        self.raws.append(data)

    def __len__(self) -> int:
        return self.received

    def without(self, stored: set[str]) -> EventBatch:
        """This batch less the events whose ids are in `stored` (same `received`)."""
        out = EventBatch()
        out.received = self.received
        for i, id_ in enumerate(self.ids):
            if id_ not in stored:
                out.ids[id_] = self.ids[id_]
                out.index.append(self.index[i])
                out.raws.append(self.raws[i])
        return out

    def halves(self) -> tuple[EventBatch, EventBatch]:
        """The kept events split in two, each half numbered from 0 (`received` = its size):
        for finding the one event of a batch the history refuses."""
        cut = len(self.raws) // 2
        return self._part(0, cut), self._part(cut, len(self.raws))

    def _part(self, start: int, stop: int) -> EventBatch:
        out = EventBatch()
        ids = list(self.ids)[start:stop]
        out.ids = {i: self.ids[i] for i in ids}
        out.raws = self.raws[start:stop]
        out.index = list(range(len(out.raws)))
        out.received = len(out.raws)
        return out

    def arrow(self, seq0: int) -> pa.Table:
        """(seq, raw) columns, numbering from `seq0` for the first received event."""
        index = pa.array(self.index, pa.int64())
        return pa.table({"seq": pc.add(index, seq0), "raw": pa.array(self.raws, pa.string())})

    def id_table(self) -> pa.Table:
        return pa.table({"id": pa.array(list(self.ids), pa.string())})

"""One input refused, and why: the same type at every ingress.

A Kafka record the worker or the sink cannot use, a line of a file `replay`, `check` or
`ingest` reads, a line of a POST to `serve`, a line of serve's log: each is refused as a
`Refused`, so every refusal is kept, counted and shown the same way -- the dead-letter topic
(`to_json`), the history's `invalid_events` (`where`), a command's stderr (`FILE:LINE`), an
HTTP 400 (the line number).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

#: The line of a dead letter that stands for its whole record (`Refused.place`).
WHOLE = 1 << 62


class Refused(msgspec.Struct, frozen=True):
    """What was refused (`raw`), where it came from, and why.

    The field order is a checkpoint's: a worker's checkpoint keeps the dead letters a
    rebuild made as tuples of these fields, in this order (a field added goes last, with a
    default, so that an older checkpoint's shorter tuples still load)."""

    reason: str
    raw: bytes = b""
    #: the topic, the file, `serve`'s source of a POST, "wal"
    source: str = ""
    #: a Kafka record's partition (None for a line)
    partition: int | None = None
    #: a Kafka record's offset, or a line's number (from 1) in its file or body
    position: int | None = None
    #: a bounded label for metrics (`InvalidEvent.kind`)
    kind: str = "schema"
    #: a line's number (from 1) in a Kafka record that carries a batch of events (None: the
    #: record is one event, or not a Kafka record): one record may hold several bad lines,
    #: each its own dead letter at the record's offset
    line: int | None = None

    @property
    def place(self) -> tuple[int, int]:
        """Where a Kafka record's dead letter sits in its partition, in the order they are
        made: (offset, line), a record of one event after every line (`WHOLE`)."""
        return (-1 if self.position is None else self.position,
                WHOLE if self.line is None else self.line)  # fmt: skip

    @property
    def where(self) -> str:
        """`topic:partition:offset`, `file:line`, or the source alone."""
        if self.partition is not None:
            return f"{self.source}:{self.partition}:{self.position}"
        if self.position is not None:
            return f"{self.source}:{self.position}"
        return self.source

    def to_json(self) -> bytes:
        """The value on `runwatch.events.dlq`: the reason, the raw bytes (base64 where they
        are not UTF-8), the record's topic, partition and offset, and for a line of a batch
        record its number."""
        out: dict[str, Any] = {"reason": self.reason}
        try:
            out["raw"] = self.raw.decode("utf-8")
        except UnicodeDecodeError:
            import base64  # (a record not UTF-8 is rare: not loaded by every start)

            out["raw"] = base64.b64encode(self.raw).decode("ascii")
            out["raw_encoding"] = "base64"
        out.update(topic=self.source, partition=self.partition, offset=self.position)
        if self.line is not None:
            out["line"] = self.line
        return orjson.dumps(out)

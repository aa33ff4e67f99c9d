"""Checking a stream of event lines without applying them (`runwatch check`): every line
through the ingress boundary (`decode.admit`), its `run.started.config` against the rules,
and its `ts` against the rest of the stream (`ahead.FarAhead`), as a replay would."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runwatch.stream.ahead import FarAhead
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import admit
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.replay import BadLine, origin


@dataclass
class Checked:
    lines: int = 0  # not blank
    valid: int = 0
    invalid: list[BadLine] = field(default_factory=list)


def check_lines(lines: Iterable[tuple[str, int, bytes]], config: RulesConfig) -> Checked:
    """Every problem, in the order found (an event far ahead of the stream: at the end)."""
    out = Checked()
    engine = Engine(config)
    ahead: FarAhead[tuple[str, int]] = FarAhead()
    for source, number, raw in lines:
        if raw.isspace() or not raw:
            continue
        out.lines += 1
        try:
            event = admit(raw)
            engine.check(event)
        except InvalidEvent as err:
            out.invalid.append(BadLine(source, number, err.reason))
            continue
        passed, refused = ahead.offer(event.ts, origin(event), (source, number))
        out.valid += len(passed)
        out.invalid += [BadLine(src, line, why) for (src, line), why in refused]
    out.invalid += [BadLine(src, line, why) for (src, line), why in ahead.finish()]
    return out

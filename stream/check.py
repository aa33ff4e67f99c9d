"""Checking a stream of event lines without applying them (`runwatch check`): every line read
as a replay reads it (`replay.admitted`: the ingress boundary, the rules' check of
`run.started.config`, and the stream's time)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.refused import Refused
from runwatch.stream.replay import admitted


@dataclass
class Checked:
    valid: int = 0
    invalid: list[Refused] = field(default_factory=list)

    @property
    def lines(self) -> int:
        """Lines that were not blank: each is valid or invalid, once."""
        return self.valid + len(self.invalid)


def check_lines(lines: Iterable[tuple[str, int, bytes]], config: RulesConfig) -> Checked:
    """Every problem, in the order found (an event far ahead of the stream: once certain)."""
    out = Checked()

    for _ in admitted(lines, Engine(config).check, out.invalid.append):
        out.valid += 1
    return out

"""Whether a console ended in its hang: inside a wait its framework declared (`stalls.Waits`)
that nothing after it ended, with no failure read.

A job that went on would have printed the wait's end (a step, the barrier's completion, the
session started); one whose processes died says so (a traceback, a collective's timeout) --
they died, they did not hang. Read the same way by `runwatch diagnose` (time runs on past the
logs' end to where the rule decides) and `runwatch watch` (a saved console's run is left open,
for the service's rules to decide on its clock).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runwatch.emitters.console import LineParser
from runwatch.emitters.logparse import Found
from runwatch.emitters.stalls import Waits

#: events that say a console's processes failed: a wait it ends in was no hang
FAILED = frozenset({"component.failed", "collective.timeout"})


@dataclass(frozen=True)
class Hung:
    """When the open waits a console ended in began: its ranks' last change of phase
    (`ranks_stalled` decides from it), an engine's stall (`inference_stalled`); None where
    it ended in none."""

    ranks_since: float | None = None
    engine_since: float | None = None

    def __bool__(self) -> bool:
        return self.ranks_since is not None or self.engine_since is not None


def ended_in_hang(waits: Waits, kinds: Iterable[str]) -> Hung:
    """The hang a console ended in, from its waits and the kinds of the events read from it
    (none when one of them says a process failed)."""
    if any(kind in FAILED for kind in kinds):
        return Hung()
    return Hung(waits.hung_since, waits.engine_hung_since)


def at_end(parser: LineParser, kinds: Iterable[str]) -> list[Found]:
    """What the output's end (or its going quiet) decides of the hangs a console shows --
    `runwatch diagnose` at a file's end and `runwatch watch` at its output's, alike, from the
    kinds of the events read from it so far: engines whose own stats lines, to their last,
    say they stall (`Waits.stalled_engines`) -- unless a process failed (`FAILED`), as for
    `ended_in_hang`: one alert, the failure's (component_failed explains an engine's stall
    after it); a stall its lines show lasting the rule's limit fires on them regardless."""
    if any(kind in FAILED for kind in kinds):
        return []
    return parser.waits.stalled_engines()

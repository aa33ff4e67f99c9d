"""The kinds of the fleet pause: a process holds its calls to a service whose fleet
incident is open, lets canaries through, and releases the hold (`runwatch.emitters.hold`)."""

from __future__ import annotations

from typing import Literal

from runwatch.emitters.envelope import Event, Examples
from runwatch.emitters.fields import Ident, Int64, note


class DepHeld(Event):
    """A process holds its work to `dep` (addition, the fleet pause): the run opted in
    (`run.started.config`, `shared_cause.hold`) and the dep's fleet incident is open. Sent
    once per hold, when the first call waits (`runwatch.emitters.hold`)."""

    emitted_when = "a process holds its calls to `dep` while the dep's fleet incident is open"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "waiting": 1},
        minimal={"dep": "sandbox@pool-a:443"},
    )  # fmt: skip

    kind: Literal["dep.held"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    waiting: Int64 | None = note("calls waiting when it was sent")


class DepCanary(Event):
    """One call let through to a held `dep` to see whether it is healthy again (addition),
    and how it ended: `ok` lifts the hold."""

    emitted_when = "a canary call to a held `dep` ends"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "status": "error", "duration_s": 0.4},
        minimal={"dep": "sandbox@pool-a:443", "status": "ok"},
    )  # fmt: skip

    kind: Literal["dep.canary"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    status: Literal["ok", "error", "timeout", "aborted"]
    duration_s: float | None = None


class DepReleased(Event):
    """A process stops holding its work to `dep` (addition): a canary succeeded (`healthy`),
    the service's own heartbeats came back (`beating`), the fleet incident left the run view
    (`resolved`), the run view cannot be read (fail open: `unreachable`), or the emitter
    closed (`closed`)."""

    emitted_when = "a process stops holding its calls to `dep`"
    examples = Examples(
        full={"dep": "sandbox@pool-a:443", "fleet": "fleet|dep:sandbox@pool-a:443|1",
              "reason": "healthy", "held_s": 4512.0, "waited": 1280},
        minimal={"dep": "sandbox@pool-a:443", "reason": "resolved"},
    )  # fmt: skip

    kind: Literal["dep.released"]
    dep: Ident
    fleet: Ident | None = note("the fleet incident's id")
    reason: Literal["healthy", "beating", "resolved", "unreachable", "closed"]
    held_s: float | None = note("how long it held")
    waited: Int64 | None = note("calls that waited in the hold")

"""What consoles said went wrong: failed processes and timed-out collectives.

Both come from lines a process printed (`runwatch watch` and `runwatch diagnose` read them:
`runwatch.emitters.failures`, `runwatch.emitters.collectives`) or from emitters that report
them. They are facts, not conditions to wait for: the rules (`component_failed`,
`collective_timeout`) fire on them and let go once the run shows progress after them.
"""

from __future__ import annotations

from typing import Any

from runwatch.stream.state.compact import Compact, blank

#: Records kept per run: a console can print the same timeout for hundreds of ranks.
MAX_RECORDS = 512


class Failure:
    """One process's failure: the first error it showed, and how many it showed."""

    __slots__ = ("at", "component", "count", "error", "exit_code", "how", "process")

    def __init__(self, process: str, component: str, at: float, error: str, how: str,
                 exit_code: int | None) -> None:  # fmt: skip
        self.process = process
        self.component = component
        self.at = at
        self.error = error
        self.how = how
        self.exit_code = exit_code
        self.count = 1


class Failures(Compact):
    """Failed processes of a run, by process name (`component@host/pid`)."""

    __slots__ = ("by_process",)

    def __init__(self) -> None:
        self.by_process: dict[str, Failure] = {}

    def failed(self, process: str, component: str, at: float, error: str, how: str,
               exit_code: int | None) -> None:  # fmt: skip
        known = self.by_process.get(process)
        if known is None:
            if len(self.by_process) < MAX_RECORDS:
                self.by_process[process] = Failure(process, component, at, error, how, exit_code)
            return
        known.count += 1
        if exit_code is not None and known.exit_code is None:
            known.exit_code = exit_code
        if at < known.at:  # a late line of the same failure: the earliest stands
            known.at = at
        if how == "exception" and known.how != "exception":
            known.error, known.how = error, how  # the exception names the cause best


class Timeout:
    """What one rank said about one timed-out collective (lines of it merged)."""

    __slots__ = (
        "at",
        "backend",
        "group_rank",
        "incident",
        "last_completed",
        "last_enqueued",
        "message",
        "op",
        "pg",
        "process",
        "ran_s",
        "rank",
        "seq",
        "timeout_s",
        "who",
    )  # fmt: skip

    def __init__(self, who: str, process: str, at: float) -> None:
        self.who = who  # the rank's identity: `rank N` (global), else its process
        self.process = process
        self.at = at
        #: the failing collective this record is about, fixed when the record is made
        #: (`Collectives.by_incident`): the process group's name, or "" while none was named
        self.incident = ""
        self.backend: str = ""
        self.rank: int | None = None
        self.group_rank: int | None = None
        self.pg: str | None = None
        self.op: str | None = None
        self.seq: int | None = None
        self.timeout_s: float | None = None
        self.ran_s: float | None = None
        self.last_enqueued: int | None = None
        self.last_completed: int | None = None
        self.message: str | None = None

    def merge(self, fields: dict[str, Any]) -> None:
        """Fill what this record does not know yet from another line about it."""
        for name, value in fields.items():
            if value is not None and getattr(self, name) in (None, ""):
                setattr(self, name, value)

    @property
    def label(self) -> str:
        """The rank as a person reads it."""
        if self.rank is not None:
            return str(self.rank)
        if self.group_rank is not None:
            return f"{self.group_rank} of {self.process}"
        return self.process


class Collectives(Compact):
    """Timed-out collectives of a run: one record per rank and collective."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[Timeout] = []

    def timeout(self, process: str, at: float, fields: dict[str, Any]) -> None:
        """One line that said a collective timed out (the `collective.timeout` fields)."""
        rank, seq, pg = fields.get("rank"), fields.get("seq"), fields.get("pg")
        group_rank = fields.get("group_rank")
        if rank is not None:
            who = f"rank {rank}"
        elif group_rank is not None:  # one process printing for several ranks (one file)
            who = f"{process} rank {group_rank}"
        else:
            who = process
        for record in self.records:
            if record.who != who:
                continue
            same = (seq is not None and record.seq == seq) or (
                seq is None and pg is not None and record.pg == pg
            )
            if same:
                record.merge(fields)
                record.at = min(record.at, at)
                return
        if len(self.records) < MAX_RECORDS:
            record = Timeout(who, process, at)
            record.merge(fields)
            record.incident = self._incident(seq, pg)
            self.records.append(record)

    def _incident(self, seq: int | None, pg: str | None) -> str:
        """The failing collective a new record is about: that of a record at its sequence
        number in its group (or in a group not named), else that of its group, else one
        that no line named a group of yet, else its group's name. A line that names no group
        (torch 2.2-2.5's watchdog line, the c10d store's) cannot say which other it is
        about: it joins the first, a rank behind or ahead in the same job's hang."""
        records = self.records
        if seq is not None:
            for r in records:
                if r.seq == seq and (pg is None or r.pg in (None, pg)):
                    return r.incident
        if pg is None:
            return records[0].incident if records else ""
        if (same := next((r.incident for r in records if r.pg == pg), None)) is not None:
            return same
        named = {r.incident for r in records if r.pg}
        return next((r.incident for r in records if r.incident not in named), pg)

    def by_incident(self) -> dict[str, list[Timeout]]:
        """The records by the failing collective they are about (its process group's name,
        or "" where the first line about it named none). A record keeps its incident when a
        later line names its group: the lines of one collective come cut, out of order or
        late (a loaded emitter), and an alert that fired on the first ones stays one alert."""
        out: dict[str, list[Timeout]] = {}
        for record in self.records:
            out.setdefault(record.incident, []).append(record)
        return out


#: every run's until it writes its own (`compact.blank`)
NO_FAILURES = blank(Failures(), "NO_FAILURES")


#: every run's until it writes its own (`compact.blank`)
NO_COLLECTIVES = blank(Collectives(), "NO_COLLECTIVES")

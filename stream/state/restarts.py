"""Which processes of one role replaced one another: the restart ledger, from heartbeats.

A slot is one role in a run: component + host + rank + instance (eight trainer ranks on a
host are eight slots; a vLLM server named `vllm-0` is one slot whatever its pid). Each pid
of a slot is kept with its first and last heartbeat. A pid P restarted the slot when every
earlier pid of the slot had beaten for the last time before P's first beat (they went quiet,
P came in their place), or -- even while a sibling of the slot lives on (workers without a
rank share one) -- when one earlier pid did so without saying it was stopping (`final`):
it was lost, and each lost pid stands for one restart at most. (A Python process that dies
of an exception still says `final` from its exit handler, so a lone pid's `final` does not
rule a restart out.) Pids that beat side by side never count, nor a pool that grows; a pid
that looked replaced and beats again was not. Bounded: the latest `KEEP` pids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runwatch.stream.state.compact import Compact

if TYPE_CHECKING:
    from runwatch.emitters.events import Source

KEEP = 16


def slot_name(src: Source) -> str:
    """component@host[/rank R][/instance]: what the alert names."""
    name = f"{src.component}@{src.host or '?'}"
    if src.rank is not None:
        name += f"/rank {src.rank}"
    if src.instance is not None:
        name += f"/{src.instance}"
    return name


class Slot(Compact):
    """One role's pids: pid -> [first beat, last beat] (`pids`), and the pids that said
    `final`. Most slots only ever have one pid: it is kept as `one` and its `span`, without
    a dict (a dict of one entry is most of a slot's size); `many` holds them once there
    are two."""

    __slots__ = ("final", "many", "newest", "one", "span")

    def __init__(self) -> None:
        self.one: int | None = None  # the slot's only pid (`many` None)
        self.span: list[float] | None = None  # its [first beat, last beat]
        self.many: dict[int, list[float]] | None = None  # the pids, once there are two
        #: made on the first `final` beat: most slots never see one, and an empty set is
        #: a few hundred bytes per slot of every live run
        self.final: set[int] | None = None
        self.newest: int | None = None  # the pid that beat first last, if no other did then

    @property
    def pids(self) -> dict[int, list[float]]:
        """pid -> [first beat, last beat]: to read (made anew for a slot of one pid); the
        lists are the slot's own, which a heartbeat ledger may hold (`RunState.ledger`)."""
        if self.many is not None:
            return self.many
        if self.one is None or self.span is None:
            return {}
        return {self.one: self.span}

    def _keep(self, pids: dict[int, list[float]]) -> None:
        """Hold `pids` as the slot's: inline when there is one."""
        if len(pids) == 1:
            ((self.one, self.span),) = pids.items()
            self.many = None
        else:
            self.one, self.span = None, None
            self.many = pids or None

    def beat(self, pid: int, ts: float, final: bool = False) -> bool:
        """Fold one heartbeat in. False when it cannot change `restarts()`: a later beat of
        the slot's newest pid, which no pid follows (a routine beat)."""
        many = self.many
        seen = many.get(pid) if many is not None else self.span if pid == self.one else None
        if not final and seen is not None and pid == self.newest and ts >= seen[0]:
            if ts > seen[1]:  # a routine beat (most of them): its last beat moves on
                seen[1] = ts
            return False
        if final:
            if self.final is None:
                self.final = set()
            self.final.add(pid)
        if seen is None:
            pids = self.pids
            pids[pid] = [ts, ts]
            if len(pids) > KEEP:
                oldest = min(pids, key=lambda p: pids[p][0])
                # first at +inf: a heartbeat ledger that kept this pid's list (`RunState`)
                # sees it let go, and takes the long way
                pids.pop(oldest)[0] = float("inf")
                if self.final:
                    self.final.discard(oldest)
                self._keep(pids)
                self._find_newest()
            else:
                self._keep(pids)
                self._newcomer(pid, ts)
        else:
            if ts > seen[1]:
                seen[1] = ts
            if ts < seen[0]:  # an earlier first beat: which pid came last may differ now
                seen[0] = ts
                self._find_newest()
        return True

    def _newcomer(self, pid: int, first: float) -> None:
        """`newest` after pid's first beat (`_find_newest` without a sort, most of the time:
        a new pid beats first after the others)."""
        newest = self.newest
        if self.many is None:  # (its only pid)
            self.newest = pid
        elif newest is None:  # a tie, or none before: look at them all
            self._find_newest()
        else:
            latest = self.many[newest][0]
            if first > latest:
                self.newest = pid
            elif first == latest:
                self.newest = None  # tied

    def _find_newest(self) -> None:
        """The pid whose first beat is the latest, None if two share it."""
        firsts = sorted((first, pid) for pid, (first, _) in self.pids.items())
        tied = len(firsts) > 1 and firsts[-1][0] == firsts[-2][0]
        self.newest = None if tied or not firsts else firsts[-1][1]

    def restarts(self) -> list[float]:
        """When a pid came in place of one that had gone quiet, oldest first."""
        out = []
        quiet: list[float] = []  # last beats of earlier pids lost (no `final`), not replaced
        quiet_until = float("-inf")  # the latest last beat of all earlier pids
        for pid, (first, last) in sorted(self.pids.items(), key=lambda p: p[1]):
            lost = [q for q in quiet if q < first]
            if lost:  # in place of a pid that was lost, whoever else of the slot lives
                quiet.remove(lost[0])
                out.append(first)
            elif quiet_until != float("-inf") and quiet_until < first:
                out.append(first)  # in place of every earlier pid, however they ended
            if not self.final or pid not in self.final:
                quiet.append(last)
            quiet_until = max(quiet_until, last)
        return out


class Restarts(Compact):
    """The run's slots by name."""

    __slots__ = ("shared", "slots")

    def __init__(self) -> None:
        self.slots: dict[str, Slot] = {}
        #: a slot has had a second pid: until one has, no restart can be told of
        self.shared = False

    def slot(self, src: Source) -> Slot | None:
        """`src`'s slot, found (or made) by its name; None for a process without a pid,
        which no restart can be told of. The caller keeps what it found (the run's
        heartbeat ledger, `RunState`)."""
        if src.pid is None:
            return None
        name = slot_name(src)
        found = self.slots.get(name)
        if found is None:
            found = self.slots[name] = Slot()
        return found

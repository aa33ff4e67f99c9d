"""Which processes of one role replaced one another: the restart ledger, from heartbeats.

A slot is one role in a run: component + host + rank + instance (eight trainer ranks on a
host are eight slots; a vLLM server named `vllm-0` is one slot whatever its pid). Each pid
of a slot is kept with its first and last heartbeat. A pid P restarted the slot when an
earlier pid Q of the slot beat for the last time before P's first beat: Q went quiet and
P came in its place. Pids that beat side by side (workers without a rank) never count; a
pid that looked replaced and beats again was not. Bounded: the latest `KEEP` pids a slot.
"""

from __future__ import annotations

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


class Slot:
    """One role's pids: pid -> [first beat, last beat], oldest first."""

    __slots__ = ("pids",)

    def __init__(self) -> None:
        self.pids: dict[int, list[float]] = {}

    def beat(self, pid: int, ts: float) -> None:
        seen = self.pids.get(pid)
        if seen is None:
            self.pids[pid] = [ts, ts]
            if len(self.pids) > KEEP:
                del self.pids[min(self.pids, key=lambda p: self.pids[p][0])]
            return
        if ts < seen[0]:
            seen[0] = ts
        if ts > seen[1]:
            seen[1] = ts

    def restarts(self) -> list[float]:
        """When a pid came in place of one that had gone quiet, oldest first."""
        spans = sorted(self.pids.values())
        out = []
        quiet_until = float("-inf")  # the latest last beat of the pids started before
        for first, last in spans:
            if quiet_until != float("-inf") and quiet_until < first:
                out.append(first)
            quiet_until = max(quiet_until, last)
        return out


class Restarts:
    """The run's slots by name."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: dict[str, Slot] = {}

    def beat(self, src: Source, ts: float) -> None:
        if src.pid is None:
            return
        name = slot_name(src)
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = Slot()
        slot.beat(src.pid, ts)

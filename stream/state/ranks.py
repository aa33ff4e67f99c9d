"""Distributed trainer ranks and the phase each one is in."""

from __future__ import annotations

from runwatch.stream.state.compact import Compact, blank


class Rank(Compact):
    __slots__ = ("changed_at", "last_ts", "phase", "step")

    def __init__(self, phase: str, changed_at: float, ts: float, step: int | None) -> None:
        self.phase = phase
        self.changed_at = changed_at  # when the rank entered `phase`
        self.last_ts = ts
        self.step = step


class Ranks(Compact):
    """Latest phase per rank, and the world size the ranks report."""

    __slots__ = ("by_rank", "world_size")

    def __init__(self) -> None:
        self.by_rank: dict[int, Rank] = {}
        self.world_size = 0

    def status(
        self,
        rank: int,
        world_size: int,
        phase: str,
        since: float | None,
        step: int | None,
        ts: float,
    ) -> None:
        self.world_size = max(self.world_size, world_size)
        cur = self.by_rank.get(rank)
        if cur is None:
            self.by_rank[rank] = Rank(phase, since if since is not None else ts, ts, step)
            return
        if ts < cur.last_ts:
            return  # late: a newer status of this rank is already known
        cur.last_ts = ts
        if step is not None:
            cur.step = step
        if phase != cur.phase:
            cur.phase = phase
            cur.changed_at = since if since is not None else ts
        elif since is not None and since != cur.changed_at:
            # the same phase name, entered again (e.g. the next all_reduce)
            cur.changed_at = since

    def last_change(self) -> float | None:
        if not self.by_rank:
            return None
        return max(r.changed_at for r in self.by_rank.values())

    def phases(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for rank in sorted(self.by_rank):
            out.setdefault(self.by_rank[rank].phase, []).append(rank)
        return out

    def missing(self) -> list[int]:
        return [r for r in range(self.world_size) if r not in self.by_rank]


#: every run's until it writes its own (`compact.blank`)
NO_RANKS = blank(Ranks(), "NO_RANKS")

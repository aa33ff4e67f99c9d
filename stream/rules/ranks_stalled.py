"""`ranks_stalled`: no rank of a distributed trainer changed phase for a long time.

The incidents: some ranks hang in `destroy_process_group` after an exception while others
wait in `recv` (divergent), or every rank sits in one collective (uniform).
"""

from __future__ import annotations

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    Rule,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState


class RanksParams(Params, frozen=True):
    timeout: Seconds = 300.0


class RanksStalledRule(Rule[RanksParams]):
    id = "ranks_stalled"
    severity = "critical"
    fires_when = (
        "no trainer rank changed phase for `timeout` ({timeout:g} s); says divergent or uniform"
    )
    hang = True
    silence = True
    params_model = RanksParams
    watches = frozenset({"rank.status", "run.finished"})
    explains = frozenset({"stuck_progress", "step_slowdown", "idle_gap_growing"})

    def check(self, run: RunState, now: float, params: RanksParams) -> Verdict:
        ranks = run.ranks
        last = ranks.last_change()
        if run.finished or last is None:
            return QUIET
        if all(r.phase == "exited" for r in ranks.by_rank.values()) and not ranks.missing():
            return QUIET  # every rank has exited: nothing is waiting
        return Verdict((Condition("", last, last + params.timeout),))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: RanksParams
    ) -> Description:
        phases = run.ranks.phases()
        pattern = "divergent" if len(phases) > 1 else "uniform"
        where = "; ".join(f"{p}: ranks {compact_ranks(rs)}" for p, rs in phases.items())
        missing = run.ranks.missing()
        gone = f"; never heard from: {compact_ranks(missing)}" if missing else ""
        return Description(
            f"no rank changed phase for {fmt_duration(now - cond.since)} ({pattern}: "
            f"{where}{gone})",
            {
                "pattern": pattern,
                "phases": phases,
                "missing": missing,
                "world_size": run.ranks.world_size,
                "stalled_s": round(now - cond.since, 3),
            },
        )


def compact_ranks(ranks: list[int]) -> str:
    """Compact rank list: 0-3,5,7,8 (a range from three ranks on)."""
    out: list[str] = []
    start = prev = None
    for r in [*ranks, None]:
        if r is not None and prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            assert prev is not None
            if prev - start >= 2:
                out.append(f"{start}-{prev}")
            else:
                out.extend(str(x) for x in range(start, prev + 1))
        start = prev = r
    return ",".join(out)

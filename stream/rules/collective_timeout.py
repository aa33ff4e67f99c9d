"""`collective_timeout`: a rank's collective operation timed out (NCCL, gloo, the c10d store).

The most common hang signature in real RL consoles, and the rank-divergence incident of
docs/architecture.md seen from the inside: torch's NCCL watchdog names, per rank, the
collective (`OpType`), its sequence number in the process group, how long it ran, and the
last work the rank enqueued and completed. Ranks that all time out in the same collective
are *uniform* (something outside the group stalled them all: a peer that died, the network);
ranks at different sequence numbers *diverge*, and the ones behind are where to look.

One alert per failing collective (its process group: `Collectives.by_incident`, however
its lines are cut, ordered or delayed): it fires `settle` seconds after the first line, so
the ranks that print within that window are in it (they print within a second or two of
each other) -- or at the run's end, when that comes first, whatever the run's status: nothing
more comes to gather (`Rule.gathers`), and a timeout the output showed happened even if the
command then exited 0 (`runwatch watch -- cat FILE` of a console always does) -- and lets go
when a step ends after the timeout (the job was restarted and goes on) or the run finishes.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from runwatch.stream.rules.base import (
    QUIET,
    STALLS,
    Condition,
    Description,
    Params,
    Rule,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.rules.ranks_stalled import compact_ranks
from runwatch.stream.state.failures import Timeout
from runwatch.stream.state.run import RunState


class CollectiveTimeoutParams(Params, frozen=True):
    settle: Seconds = 10.0


def _where(record: Timeout, ops: dict[int, str]) -> str:
    """`ALLREDUCE #1580`: the collective a rank timed out in (its op from another rank's
    line about the same sequence number when its own line does not say it)."""
    op = record.op or (ops.get(record.seq) if record.seq is not None else None)
    return f"{op or 'collective'} #{record.seq}" if record.seq is not None else (op or "?")


def _group(records: list[Timeout]) -> str | None:
    """The process group the records name (the first named: a line naming none is in it)."""
    return next((r.pg for r in records if r.pg), None)


def _number(record: Timeout) -> int | None:
    return record.rank if record.rank is not None else record.group_rank


def _ranks(records: list[Timeout]) -> str:
    """`ranks 0-3,5`, with what cannot be numbered named."""
    numbers = sorted({n for r in records if (n := _number(r)) is not None})
    named = sorted({r.label for r in records if _number(r) is None})
    parts = [f"rank{'s' if len(numbers) > 1 else ''} {compact_ranks(numbers)}"] if numbers else []
    return ", ".join(parts + named) or "a rank"


class Analysis(msgspec.Struct, frozen=True):
    """Where the ranks of one process group timed out."""

    pattern: str  # uniform | divergent
    by_work: dict[str, list[Timeout]]  # "ALLREDUCE #1580" -> the ranks that timed out there
    behind: list[Timeout]  # the ranks at the lowest sequence number (or last completed)


def analyse(records: list[Timeout]) -> Analysis:
    """Uniform or divergent, and which ranks are behind, from what the ranks said."""
    # lines that name no collective (the heartbeat monitor's "watchdog got stuck", the c10d
    # store) say where nothing is, when others do: they are told apart (`others`)
    records = [r for r in records if r.seq is not None] or records
    ops = {r.seq: r.op for r in records if r.seq is not None and r.op}
    by_work: dict[str, list[Timeout]] = {}
    for r in records:
        by_work.setdefault(_where(r, ops), []).append(r)
    seqs = [r.seq for r in records if r.seq is not None]
    completed = [r.last_completed for r in records if r.last_completed is not None]
    behind: list[Timeout] = []
    if len(set(seqs)) > 1:
        behind = [r for r in records if r.seq == min(seqs)]
    elif len(set(completed)) > 1:
        behind = [r for r in records if r.last_completed == min(completed)]
    pattern = "divergent" if len(by_work) > 1 or behind else "uniform"
    return Analysis(pattern, by_work, behind)


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


class CollectiveTimeoutRule(Rule[CollectiveTimeoutParams]):
    id = "collective_timeout"
    severity = "critical"
    fires_when = (
        "a rank's NCCL, gloo or c10d-store collective timed out; one alert per process group, "
        "`settle` ({settle:g} s) after its first line; names the ranks, the op, the sequence "
        "numbers, and whether the ranks agree (uniform) or which are behind (divergent)"
    )
    hang = True
    silence = True
    gathers = True  # a run that ends while it settles: every rank has said what it will
    params_model = CollectiveTimeoutParams
    watches = frozenset({"collective.timeout", "step.done", "run.finished"})
    explains = STALLS | {"heartbeat_lost", "weight_sync_stalled", "inference_idle_with_pending"}

    def check(self, run: RunState, now: float, params: CollectiveTimeoutParams) -> Verdict:
        return self._held(run, params, run.failed_after_progress)

    def gathered(self, run: RunState, now: float, params: CollectiveTimeoutParams) -> Verdict:
        """At the run's end: every timeout no step ended after, the end's status aside -- an
        `ok` end closes the alert, it does not unsay the timeout the output showed."""
        return self._held(run, params, run.no_progress_after)

    def _held(
        self, run: RunState, params: CollectiveTimeoutParams, stands: Callable[[float], bool]
    ) -> Verdict:
        if not run.collectives.records:
            return QUIET
        held = []
        for key, records in run.collectives.by_incident().items():
            since = min(r.at for r in records)
            if stands(since):
                pg = _group(records)
                subject = f"process group {pg}" if pg else None
                held.append(Condition(key, since, since + params.settle, subject))
        return Verdict(tuple(held)) if held else QUIET

    def describe(
        self, run: RunState, cond: Condition, now: float, params: CollectiveTimeoutParams
    ) -> Description:
        records = run.collectives.by_incident().get(cond.key, [])
        pg = _group(records)
        found = analyse(records)
        sequenced = [r for r in records if r.seq is not None]
        backend = next((r.backend for r in sequenced or records if r.backend), "nccl")
        group = f" in process group {pg}" if pg else ""
        timeout = max((r.timeout_s for r in records if r.timeout_s is not None), default=None)
        limit = f" (timeout {fmt_duration(timeout)})" if timeout is not None else ""
        if found.pattern == "uniform" and len(found.by_work) == 1:
            ((work, rs),) = found.by_work.items()
            story = (
                f"{_ranks(rs)} timed out in {work}{limit}: uniform, every rank that reported "
                "waits in the same collective"
            )
        else:
            parts = "; ".join(f"{_ranks(rs)} in {work}" for work, rs in found.by_work.items())
            late = f": {_ranks(found.behind)} behind the others" if found.behind else ""
            story = f"ranks timed out in different places{limit} ({parts}): divergent{late}"
        done = [r.last_completed for r in records if r.last_completed is not None]
        queued = [r.last_enqueued for r in records if r.last_enqueued is not None]
        if done:
            story += f"; last completed {_span(done)}"
        if queued:
            story += f", last enqueued {_span(queued)}"
        if sequenced:  # what the lines without a collective said beside it
            for r in records:
                if r.seq is None:
                    after = f" after {fmt_duration(r.timeout_s)}" if r.timeout_s else ""
                    what = "watchdog stuck" if r.op == "watchdog" else f"{r.backend} {r.op}"
                    story += f"; {what} on {_ranks([r])}{after}"
        ranks = {
            r.label: {
                "op": r.op,
                "seq": r.seq,
                "last_completed": r.last_completed,
                "last_enqueued": r.last_enqueued,
                "timeout_s": r.timeout_s,
                "ran_s": r.ran_s,
            }
            for r in records
        }
        first = min(records, key=lambda r: r.at) if records else None
        return Description(
            f"{backend.upper()} collective timed out{group}: {story}",
            {
                "backend": backend,
                "pg": pg,
                "pattern": found.pattern,
                "ranks": ranks,
                "by_work": {w: sorted(r.label for r in rs) for w, rs in found.by_work.items()},
                "behind": sorted(r.label for r in found.behind),
                "timeout_s": timeout,
                "first_line": first.message if first is not None else None,
            },
        )

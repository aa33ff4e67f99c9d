"""`inference_idle_with_pending`: every inference server idle while trajectories wait.

The incident: vLLM at 0 running / 0 waiting while the last trajectory of 512 sat in a code
sandbox for 99 minutes. The evidence says where the pending work is stuck.
"""

from __future__ import annotations

from collections import Counter as Tally

from pydantic import PositiveFloat

from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Description,
    Params,
    Rule,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState


class IdleParams(Params):
    idle_for: PositiveFloat = 120.0


class InferenceIdleWithPending(Rule[IdleParams]):
    id = "inference_idle_with_pending"
    severity = "critical"
    params_model = IdleParams
    watches = frozenset(
        {
            "trajectory.started",
            "trajectory.done",
            "inference.stats",
            "request.queued",
            "request.done",
            "heartbeat",
            "run.finished",
        }
    )

    def check(self, run: RunState, now: float, params: IdleParams) -> Verdict:
        inf = run.inference
        if inf.idle_since is None:
            return QUIET
        timeout = run.config.heartbeat_timeout
        recheck: float | None = None
        for srv in inf.live_servers():
            lost = srv.process.lost_at(timeout) if srv.process is not None else None
            if lost is None:
                continue
            if now >= lost:
                return QUIET  # a silent server is unknown, not idle: heartbeat_lost speaks
            recheck = lost if recheck is None else min(recheck, lost)
        since = inf.idle_since
        return Verdict((Condition("", since, since + params.idle_for),), recheck)

    def describe(
        self, run: RunState, cond: Condition, now: float, params: IdleParams
    ) -> Description:
        inf = run.inference
        pending = inf.pending
        by_phase = dict(Tally(t.phase for t in pending.values()).most_common())
        oldest_id, oldest = min(pending.items(), key=lambda kv: kv[1].started)
        servers = sorted(n for n, s in inf.servers.items() if not s.final)
        batch = inf.started_in_step(oldest.step)
        in_phase = fmt_duration(now - oldest.phase_since)
        idle = f"inference is idle ({', '.join(servers)}) for {fmt_duration(now - cond.since)}"
        if len(pending) == 1 and batch:
            summary = (
                f"{batch - 1} of {batch} trajectories done, the last one ({oldest_id}) has sat "
                f"in {oldest.phase} for {in_phase} while {idle}"
            )
        else:
            phases = ", ".join(f"{n} in {p}" for p, n in by_phase.items())
            summary = (
                f"{len(pending)} trajectories pending ({phases}); the oldest ({oldest_id}) has "
                f"sat in {oldest.phase} for {in_phase} while {idle}"
            )
        details = {
            "pending": len(pending),
            "pending_by_phase": by_phase,
            "oldest": {
                "traj": oldest_id,
                "step": oldest.step,
                "age_s": round(now - oldest.started, 3),
                "phase": oldest.phase,
                "in_phase_s": round(now - oldest.phase_since, 3),
            },
            "idle_servers": servers,
            "idle_s": round(now - cond.since, 3),
        }
        if batch:
            details["step_trajectories"] = batch
        return Description(summary, details)

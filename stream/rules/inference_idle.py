"""`inference_idle_with_pending`: every inference server idle while trajectories wait.

The incident: vLLM at 0 running / 0 waiting while the last trajectory of 512 sat in a code
sandbox for 99 minutes. The evidence says where the pending work is stuck.
"""

from __future__ import annotations

from collections import Counter as Tally

from msgspec import field
from msgspec.structs import replace

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
from runwatch.stream.state.run import RunState, StateConfig

#: Progress bars that count trajectories of a rollout: the sandbox-hang incident's
#: "Generating trajectories" (DESIGN.md), slime's "Rollout generation" (samples;
#: slime/rollout/sglang_rollout.py at 3c9aa09) and OpenRLHF's "Generate samples" (prompts;
#: openrlhf/trainer/ppo_utils/samples_generator.py at 3c3be62).
PENDING_BARS = ("Generating trajectories", "Rollout generation", "Generate samples")


class IdleParams(Params, frozen=True):
    idle_for: Seconds = 120.0
    #: bars whose `total - n` stand for pending trajectories, for logs without
    #: trajectory events (`runwatch watch`)
    pending_bars: list[str] = field(default_factory=lambda: list(PENDING_BARS))


class InferenceIdleWithPendingRule(Rule[IdleParams]):
    id = "inference_idle_with_pending"
    severity = "critical"
    fires_when = (
        "every inference server idle for `idle_for` ({idle_for:g} s) while trajectories wait"
    )
    hang = True
    silence = True
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
            "progress",
        }
    )
    skips_routine_beats = True
    #: and the fleet pause: work held on the service the run's stall waits on (dep_held)
    explains = STALLS | {"dep_held"}

    def state_needs(self, params: IdleParams, base: StateConfig) -> StateConfig:
        return replace(base, pending_bars=base.pending_bars | frozenset(params.pending_bars))

    def quiet(self, run: RunState) -> bool:
        return run.inference.idle_since is None  # (every trajectory event asks)

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
        if not pending:
            return self._describe_bars(run, cond, now)
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
        first: dict[str, object] = {
            "traj": oldest_id,
            "step": oldest.step,
            "age_s": round(now - oldest.started, 3),
            "phase": oldest.phase,
            "in_phase_s": round(now - oldest.phase_since, 3),
        }
        details = {
            "pending": len(pending),
            "pending_by_phase": by_phase,
            "oldest": first,
            "idle_servers": servers,
            "idle_s": round(now - cond.since, 3),
        }
        if batch:
            details["step_trajectories"] = batch
        waits_on = inf.waits_on(now, cond.since)
        if waits_on is not None:  # the service the stalled work waits on (section 8)
            details["dep"] = waits_on
            details["pending_by_dep"] = inf.pending_by_dep()
            first["dep"] = oldest.dep
            summary += f"; the work waits on {waits_on}"
        return Description(summary, details)

    def _describe_bars(self, run: RunState, cond: Condition, now: float) -> Description:
        """The evidence when only pending-work bars say trajectories wait (a console read by
        `runwatch watch`): how far the bar got, and since when it has not moved."""
        inf = run.inference
        servers = sorted(n for n, s in inf.servers.items() if not s.final)
        idle = f"inference is idle ({', '.join(servers)}) for {fmt_duration(now - cond.since)}"
        bars = {
            name: {"n": c.n, "total": c.total, "still_s": round(now - c.last_advance, 3)}
            for (_, name), c in inf.bars.items()
            if c.total is not None and c.n < c.total
        }
        name, bar = max(bars.items(), key=lambda kv: kv[1]["still_s"])
        waiting = bar["total"] - bar["n"]
        last = "the last one has" if waiting == 1 else f"the last {waiting} have"
        summary = (
            f"{bar['n']} of {bar['total']} trajectories done ({name}), {last} not finished in "
            f"{fmt_duration(float(bar['still_s']))} while {idle}"
        )
        details = {
            "pending": inf.bar_pending(),
            "bars": bars,
            "idle_servers": servers,
            "idle_s": round(now - cond.since, 3),
        }
        return Description(summary, details)

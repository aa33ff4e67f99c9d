"""`heartbeat_lost`: a process that was sending heartbeats went silent without saying goodbye.

The incident: the orchestrator died; the trainer logged "Waiting for training batch to
arrive" and nobody noticed.
"""

from __future__ import annotations

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


class HeartbeatParams(Params, frozen=True):
    timeout: Seconds = 60.0


class HeartbeatLostRule(Rule[HeartbeatParams]):
    id = "heartbeat_lost"
    severity = "critical"
    fires_when = "a process that sent heartbeats went silent for `timeout` ({timeout:g} s)"
    hang = True
    silence = True
    params_model = HeartbeatParams
    watches = frozenset({"heartbeat", "run.finished"})
    skips_routine_beats = True
    skips_final_beats = True
    explains = STALLS | {"inference_idle_with_pending", "zero_reward", "weight_sync_stalled"}

    def state_needs(self, params: HeartbeatParams, base: StateConfig) -> StateConfig:
        return replace(base, heartbeat_timeout=params.timeout)

    def check(self, run: RunState, now: float, params: HeartbeatParams) -> Verdict:
        if run.finished:
            return QUIET
        # Every heartbeat re-checks every process of the run, so only the silent ones get a
        # Condition; the others only say when the next one could go silent.
        # (`Deadlines`' loop written out: this check runs on every process's first and
        # last beat and every timer of the run, over every process)
        held: list[Condition] = []
        recheck: float | None = None
        timeout = params.timeout
        for proc in run.processes.by_id.values():
            last = proc.last_beat
            if last is None or proc.final:
                continue
            deadline = last + timeout
            if deadline <= now:
                held.append(Condition(proc.name, last, deadline, proc.name))
            elif recheck is None or deadline < recheck:
                recheck = deadline
        return Verdict(tuple(held), recheck) if held or recheck is not None else QUIET

    def describe(
        self, run: RunState, cond: Condition, now: float, params: HeartbeatParams
    ) -> Description:
        proc = run.processes.by_id[cond.key]
        others = sorted(
            p.name
            for p in run.processes.by_id.values()
            if p is not proc and p.alive(now, params.timeout) and p.last_beat is not None
        )
        return Description(
            f"{proc.component} process {proc.name} has sent no heartbeat for "
            f"{fmt_duration(now - cond.since)}",
            {
                "process": proc.name,
                "component": proc.component,
                "host": proc.host,  # where it ran (what a fleet incident groups by)
                "last_beat": cond.since,
                "silent_s": round(now - cond.since, 3),
                "alive": others,
                **run.inference.served_by(proc),
            },
        )

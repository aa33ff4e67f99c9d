"""`weight_sync_stalled`: the trainer published new policy weights and an inference server
has not loaded them for `timeout` -- rollouts run on a stale policy, or (synchronous RL) the
whole job waits on the sync.

Who must load: every server that has reported a load (`weights.loaded`) in this run and
whose process is alive (a server whose heartbeats stopped is heartbeat_lost's business; one
that never reported a load cannot be told apart from one that does not report). A server
lags while its latest loaded version is older than the latest published one; it has been
lagging since the first version newer than its own was published.
"""

from __future__ import annotations

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
from runwatch.stream.state.run import RunState


class WeightSyncParams(Params, frozen=True):
    timeout: Seconds = 600.0


def lagging(run: RunState, now: float) -> dict[str, tuple[int, float, float | None]]:
    """Live servers behind the latest published version: server -> (its version, since,
    when its process would count as lost if it stays silent)."""
    weights = run.weights
    latest = weights.latest
    if latest is None:
        return {}
    out = {}
    timeout = run.config.heartbeat_timeout
    for server, loaded in weights.loaded.items():
        if loaded.version >= latest:
            continue
        proc = run.processes.by_id.get(loaded.process)
        if proc is not None and not proc.alive(now, timeout):
            continue
        since = weights.missing_since(loaded.version)
        if since is not None:
            lost = proc.lost_at(timeout) if proc is not None else None
            out[server] = (loaded.version, since, lost)
    return out


class WeightSyncStalledRule(Rule[WeightSyncParams]):
    id = "weight_sync_stalled"
    severity = "critical"
    silence = True
    fires_when = (
        "an inference server that reports loads (`weights.loaded`) has not loaded the weights"
        " the trainer published (`weights.published`) for `timeout` ({timeout:g} s)"
    )
    params_model = WeightSyncParams
    watches = frozenset({"weights.published", "weights.loaded", "heartbeat", "run.finished"})
    skips_routine_beats = True
    explains = STALLS | {"inference_stalled", "inference_idle_with_pending", "zero_reward"}

    def quiet(self, run: RunState) -> bool:
        return run.weights.latest is None  # nothing published, nothing to load (`lagging`)

    def check(self, run: RunState, now: float, params: WeightSyncParams) -> Verdict:
        if run.finished:
            return QUIET
        behind = lagging(run, now)
        if not behind:
            return QUIET
        since = min(s for _, s, _ in behind.values())
        # a lagging server whose heartbeats stop leaves the set: look again then
        lost = [at for _, _, at in behind.values() if at is not None and at > now]
        return Verdict((Condition("", since, since + params.timeout),), min(lost, default=None))

    def describe(
        self, run: RunState, cond: Condition, now: float, params: WeightSyncParams
    ) -> Description:
        weights = run.weights
        latest = weights.latest
        assert latest is not None  # a firing condition has a published version
        behind = lagging(run, now)
        servers = sorted(weights.loaded)
        on = ", ".join(f"{s}: v{behind[s][0]}" for s in sorted(behind))
        step = weights.steps.get(latest)
        made = f" (step {step})" if step is not None else ""
        published = weights.published[latest]
        return Description(
            f"weights v{latest}{made} published {fmt_duration(now - published)} ago; "
            f"{len(behind)} of {len(servers)} inference servers have not loaded them for "
            f"{fmt_duration(now - cond.since)} ({on})",
            {
                "version": latest,
                "step": step,
                "published_at": published,
                "lagging": {s: v for s, (v, _, _) in sorted(behind.items())},
                "loaded": {s: weights.loaded[s].version for s in servers},
            },
        )

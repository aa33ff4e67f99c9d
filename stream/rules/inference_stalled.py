"""`inference_stalled`: an engine holds requests but makes no tokens.

Users ask for exactly this: an engine "alive but hung" answers `/health` with 200 while
its running requests go nowhere. vLLM's stats line says it (`Running: 1 reqs` at 0.0 tokens/s
of prompt and of generation); so do the rates of its `/metrics` token counters. vLLM V1
logs that line once at INFO and then only at DEBUG while nothing moves (vllm/v1/metrics/
loggers.py), so the last snapshot stands until replaced, as long as the server's process
is alive.

Default `stalled_for` 180 s: vLLM's own engine loop gives up on one iteration after 60 s
(`VLLM_ENGINE_ITERATION_TIMEOUT_S`, V0), and V1 prefills in chunks of at most
`max_num_batched_tokens`, each well under a 10 s stats interval on a GPU -- so prefill
throughput shows in the interval it happens in, and a long prompt cannot hold both rates at
zero for three minutes. A prefill-only interval (generation 0, prompt > 0) is progress.
"""

from __future__ import annotations

from runwatch.stream.rules.base import (
    STALLS,
    Condition,
    Deadlines,
    Description,
    Params,
    Rule,
    Seconds,
    Verdict,
    fmt_duration,
)
from runwatch.stream.state.run import RunState


class InferenceStalledParams(Params, frozen=True):
    stalled_for: Seconds = 180.0


class InferenceStalledRule(Rule[InferenceStalledParams]):
    id = "inference_stalled"
    severity = "critical"
    fires_when = (
        "an inference engine holds running requests but made no tokens (no generation, no "
        "prefill) for `stalled_for` ({stalled_for:g} s), from its stats line or its /metrics"
    )
    hang = True
    silence = True
    params_model = InferenceStalledParams
    watches = frozenset({"inference.stats", "heartbeat", "run.finished"})
    skips_routine_beats = True
    explains = STALLS | {"inference_idle_with_pending", "zero_reward"}

    def quiet(self, run: RunState) -> bool:
        # (every snapshot asks): a server holds a condition only while it stalls; a loop,
        # not `all()` over a generator, which costs as much again per call
        for srv in run.inference.servers.values():  # noqa: SIM110
            if srv.stalled_since is not None:
                return False
        return True

    def check(self, run: RunState, now: float, params: InferenceStalledParams) -> Verdict:
        due = Deadlines(now)
        if run.finished:
            return due.verdict()
        timeout = run.config.heartbeat_timeout
        for name, srv in run.inference.servers.items():
            since = srv.stalled_since
            if since is None or srv.final:
                continue
            lost = srv.process.lost_at(timeout) if srv.process is not None else None
            if lost is not None:
                if now >= lost:
                    continue  # a silent server is heartbeat_lost's business
                due.later(lost)
            due.due(name, since, since + params.stalled_for, name)
        return due.verdict()

    def describe(
        self, run: RunState, cond: Condition, now: float, params: InferenceStalledParams
    ) -> Description:
        srv = run.inference.servers[cond.key]
        pending = len(run.inference.pending) or run.inference.bar_pending()
        waits = f"; {pending} trajectories wait on inference" if pending else ""
        return Description(
            f"inference server {cond.key} holds {srv.running} running and {srv.waiting} "
            f"waiting requests but has made no tokens for {fmt_duration(now - cond.since)}"
            f"{waits}",
            {
                "server": cond.key,
                "running": srv.running,
                "waiting": srv.waiting,
                "stalled_s": round(now - cond.since, 3),
                "process": srv.process.name if srv.process is not None else None,
                "host": srv.process.host if srv.process is not None else None,
                "pending_trajectories": pending,
            },
        )

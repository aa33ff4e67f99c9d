"""`component_failed`: a process of the run failed -- an uncaught exception, a known fatal
marker of an engine or framework, or a watched command that exited non-zero.

The incidents: PRIME-RL's orchestrator died with `KeyError: 'teacher_logprobs'` while the
trainer went on "Waiting for training batch to arrive"; a vLLM engine core hit a fatal
error and every rollout after it failed. Whatever else fires later is the consequence; this
is the cause, and its text is in the console. One alert per failed process; it lets go when
a step ends after the failure (the run recovered: a supervisor restarted the process) or the
run finishes `ok`. A run that ends failed keeps it: that is how it ended.
"""

from __future__ import annotations

from msgspec import field

from runwatch.stream.rules.base import (
    QUIET,
    STALLS,
    Condition,
    Description,
    Params,
    Rule,
    Verdict,
)
from runwatch.stream.state.run import RunState


class ComponentFailedParams(Params, frozen=True):
    #: failures whose error holds one of these texts are not alerts (a person's Ctrl-C)
    ignore: list[str] = field(default_factory=lambda: ["KeyboardInterrupt"])


class ComponentFailedRule(Rule[ComponentFailedParams]):
    id = "component_failed"
    severity = "critical"
    fires_when = (
        "a process of the run failed: an uncaught exception, a fatal marker of vLLM, SGLang, "
        "Ray, PRIME-RL or torch, or a watched command that exited non-zero; names the error"
    )
    params_model = ComponentFailedParams
    watches = frozenset({"component.failed", "step.done", "run.finished"})
    explains = STALLS | {
        "heartbeat_lost",
        "restart_loop",
        "collective_timeout",
        "inference_stalled",
        "weight_sync_stalled",
        "inference_idle_with_pending",
        "zero_reward",
    }

    def check(self, run: RunState, now: float, params: ComponentFailedParams) -> Verdict:
        failures = run.failures.by_process
        if not failures:
            return QUIET
        held = tuple(
            Condition(name, f.at, f.at, name)
            for name, f in failures.items()
            if run.failed_after_progress(f.at) and not any(t in f.error for t in params.ignore)
        )
        return Verdict(held) if held else QUIET

    def describe(
        self, run: RunState, cond: Condition, now: float, params: ComponentFailedParams
    ) -> Description:
        f = run.failures.by_process[cond.key]
        how = {"exception": "uncaught exception", "fatal": "fatal error", "exit": "exit"}[f.how]
        code = (
            f" (exit status {f.exit_code})" if f.exit_code is not None and f.how != "exit" else ""
        )
        others = sorted(n for n in run.failures.by_process if n != cond.key)
        also = f"; {len(others)} other process(es) failed too" if others else ""
        return Description(
            f"{f.component} process {f.process} failed ({how}): {f.error}{code}{also}",
            {
                "process": f.process,
                "component": f.component,
                "host": proc.host if (proc := run.processes.by_id.get(f.process)) else None,
                "error": f.error,
                "how": f.how,
                "exit_code": f.exit_code,
                "lines": f.count,
                "others": others,
            },
        )

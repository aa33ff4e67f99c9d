"""A simulated cluster of RL jobs: the events their processes would emit, in time order.

Generalises `runwatch.dev.scenarios`: each job has a trainer (ranks), an orchestrator, a rollout
worker and inference servers; a step is a rollout (trajectories with long-tailed durations,
generate → sandbox → generate → reward), then the update (rank phases), with validation and
checkpoint pauses every few steps. Faults from the incidents in docs/architecture.md can be
injected per job.

Times here are *simulated* seconds from the job's start; `Cluster.events()` maps them onto
an epoch clock at `speed` (ts = t0 + t / speed), scaling every duration in the events and the
time thresholds in `run.started.config` by the same factor, so a run at `--speed 60` sees
the rules behave as they would in real time. Deterministic for a given seed.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runwatch.dev.envelope import Event, event
from runwatch.stream.rules import BUILTIN_RULES
from runwatch.stream.rules.base import time_params

FAULTS = ("sandbox_hang", "inference_crash", "orchestrator_dies", "rank_divergence")
KINDS = (*FAULTS, "slow_but_healthy")
#: The rule each fault must raise (slow_but_healthy: none).
EXPECTED_RULE = {
    "sandbox_hang": "inference_idle_with_pending",
    "inference_crash": "zero_reward",
    "orchestrator_dies": "heartbeat_lost",
    "rank_divergence": "ranks_stalled",
}
#: The root cause each fault's incident must name: (rule, component of its subject or None).
EXPECTED_ROOT = {
    "sandbox_hang": ("inference_idle_with_pending", None),
    "inference_crash": ("heartbeat_lost", "inference"),
    "orchestrator_dies": ("heartbeat_lost", "orchestrator"),
    "rank_divergence": ("ranks_stalled", None),
}
BEAT_S = 10.0
STATS_S = 5.0
HANG_S = 900.0  # a hung sandbox is killed after this long (the alert then resolves)
MAX_TRAJ_S = 140.0
#: what a crashing trainer says (`JobSpec.crash_at`): unrelated failures, one per job
CRASHES = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "KeyError: 'input_ids'",
    "ValueError: Expected all tensors to be on the same device",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/global_step_40'",
    "AssertionError: batch size 511 is not divisible by 8",
)


@dataclass(frozen=True)
class JobSpec:
    index: int
    run: str
    fault: str | None = None
    fault_step: int = 3
    trajectories: int = 32
    servers: int = 2
    world_size: int = 4
    total_steps: int = 10_000
    val_every: int = 5
    ckpt_every: int = 10
    #: the shared services its trajectories wait on in the sandbox and reward phases
    #: (`dep`), and the node its rollout worker runs on (default: its own)
    sandbox_dep: str | None = None
    reward_dep: str | None = None
    rollout_host: str | None = None
    #: simulated second at which its trainer raises and the run ends failed
    crash_at: float | None = None


@dataclass(frozen=True)
class Shared:
    """What breaks for every job at once (`runwatch.dev.fleet`): a service that stops
    answering over [start, end) -- work that reaches it then waits until `end` -- and nodes
    that go down at a time (their processes go silent; a job whose process died hangs)."""

    hangs: tuple[tuple[str, float, float], ...] = ()  # (dep, start, end)
    down: tuple[tuple[str, float], ...] = ()  # (host, at)

    def through(self, dep: str | None, start: float, end: float) -> float:
        """When a phase on `dep` that began at `start`, due to end at `end`, ends."""
        for name, a, b in self.hangs:
            if name == dep and start < b and end > a:
                return max(end, b + (end - start))
        return end


class Job:
    """One job's events over [0, end) simulated seconds, yielded in time order."""

    def __init__(self, spec: JobSpec, seed: int, end: float, shared: Shared = Shared()) -> None:
        self.spec = spec
        self.shared = shared
        self.rng = random.Random(f"{seed}/{spec.index}")
        self.end = end
        self.slow = 1.8 if spec.fault == "slow_but_healthy" else 1.0
        host = f"node-{spec.index}"
        pid = 1000 + 10 * spec.index
        self.trainer = [
            {"component": "trainer", "host": host, "pid": pid + r, "rank": r}
            for r in range(spec.world_size)
        ]
        self.orch = {"component": "orchestrator", "host": host, "pid": pid + 5}
        self.rollout = {"component": "rollout", "host": spec.rollout_host or host, "pid": pid + 6}
        self.servers = [
            {"component": "inference", "host": f"{host}-gpu", "pid": pid + 7 + k,
             "instance": f"vllm-{k}"}
            for k in range(spec.servers)
        ]  # fmt: skip
        beating = [self.trainer[0], self.orch, self.rollout, *self.servers]
        #: process -> (next beat, dies at)
        self.beats = {id(p): [self.rng.uniform(0, BEAT_S), math.inf] for p in beating}
        self.beating = beating
        for down, at in shared.down:  # a node that goes down takes its processes with it
            for p in beating:
                if p["host"] == down:
                    self.kill(p, at)
        self.buf: list[tuple[float, int, str, dict[str, Any], dict[str, Any]]] = []
        #: When the injected fault began (simulated seconds): for detection latency.
        self.fault_at: float | None = None
        self.n = itertools.count()
        self.finished = False  # its run.finished was yielded
        self.yielded = 0  # events yielded so far (their ids count on from here)

    def emit(self, t: float, kind: str, src: dict[str, Any], **fields: Any) -> None:
        self.buf.append((t, next(self.n), kind, src, fields))

    def kill(self, src: dict[str, Any], at: float) -> None:
        self.beats[id(src)][1] = min(self.beats[id(src)][1], at)

    def dies(self, src: dict[str, Any]) -> float:
        """When a process stops (it emits nothing from then on); inf if it does not."""
        state = self.beats.get(id(src))
        return state[1] if state is not None else math.inf

    def events(self) -> Iterator[tuple[float, str, dict[str, Any], dict[str, Any]]]:
        """The job's events; one the simulation stops before its last step ends as a
        stopped job does (`closing`), so nothing it leaves behind looks like a fault."""
        yield from self._steps()
        if not self.finished:
            for kind, src, fields in self.closing():
                yield self.end, kind, src, fields

    def closing(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """What a job the simulation stops says last: a final heartbeat from each process
        still alive, and run.finished (killed)."""
        self.finished = True
        alive = [src for src in self.beating if self.beats[id(src)][1] == math.inf]
        return [*(("heartbeat", src, {"final": True}) for src in alive),
                ("run.finished", self.trainer[0], {"status": "killed"})]  # fmt: skip

    def _steps(self) -> Iterator[tuple[float, str, dict[str, Any], dict[str, Any]]]:
        spec, t = self.spec, self.rng.uniform(0, 5)
        labels = {"model": "qwen2.5-7b", "algo": "grpo", "sim_fault": spec.fault or ""}
        self.emit(t, "run.started", self.trainer[0], total_steps=spec.total_steps, labels=labels)
        step = 1
        while t < self.end:
            start = t
            t, hung = self.step(step, t)
            t = min(t, self.end) if hung else t
            if spec.crash_at is not None and spec.crash_at < t:
                self.crash(spec.crash_at)
                t, hung = min(t, self.end), True
            self.heartbeats(start, t)
            self.buf.sort()
            for at, _, kind, src, fields in self.buf:
                if at >= self.end:
                    return
                if at >= self.dies(src):  # a process that died sends nothing more
                    continue
                yield at, kind, src, fields
            self.buf.clear()
            if hung:
                return
            if step >= spec.total_steps:
                self.finished = True
                yield t, "run.finished", self.trainer[0], {"status": "ok"}
                return
            step += 1

    def crash(self, at: float) -> None:
        """The trainer raises at `at`: the run ends failed, its processes stop."""
        tr = self.trainer[0]
        error = CRASHES[self.spec.index % len(CRASHES)]
        self.emit(at, "component.failed", tr, how="exception", error=error)
        self.emit(at + 0.5, "run.finished", tr, status="failed")
        self.end, self.finished = at + 1.0, True
        for src in self.beating:
            self.kill(src, at + 1.0)

    def heartbeats(self, start: float, end: float) -> None:
        for src in self.beating:
            state = self.beats[id(src)]
            while state[0] < end and state[0] < state[1]:
                self.emit(state[0], "heartbeat", src)
                state[0] += BEAT_S

    def ranks(self, t: float, phase: str, step: int) -> None:
        for r, src in enumerate(self.trainer):
            at = t + 0.05 * r
            self.emit(at, "rank.status", src, rank=r, world_size=self.spec.world_size,
                      phase=phase, since=at, step=step)  # fmt: skip

    def step(self, step: int, t0: float) -> tuple[float, bool]:
        """One step from `t0`; returns (when it ended, whether the job hangs from here)."""
        spec, rng, fault = self.spec, self.rng, self.spec.fault
        at_fault = fault is not None and step == spec.fault_step
        crashed = fault == "inference_crash" and step >= spec.fault_step
        tr = self.trainer[0]
        self.emit(t0, "step.started", tr, step=step)
        self.ranks(t0, "wait_batch", step)
        n = spec.trajectories
        self.emit(t0, "progress", self.rollout, name="rollout", n=0, total=n)
        if at_fault and fault == "inference_crash":
            self.fault_at = t0
            for src in self.servers:
                self.kill(src, t0)
        gen: list[tuple[float, float, int]] = []  # (start, end, server) of generate spans
        done_at: list[float] = []
        rewards: list[float] = []
        orch_dies = t0 + 30.0 if at_fault and fault == "orchestrator_dies" else math.inf
        for i in range(n):
            traj, s = f"s{step}-t{i:03d}", t0 + rng.uniform(0, 3)
            if s >= orch_dies:
                break
            self.emit(s, "trajectory.started", self.rollout, traj=traj, step=step)
            self.emit(s + 0.01, "trajectory.phase", self.rollout, traj=traj, phase="generate")
            if crashed:  # every request fails at once: the rollout is all errors, reward 0
                e = s + rng.uniform(0.2, 1.0)
                self.emit(e, "trajectory.done", self.rollout, traj=traj, status="error",
                          reward=0.0, duration_s=e - s)  # fmt: skip
                done_at.append(e)
                rewards.append(0.0)
                continue
            g1, sb, g2 = (rng.lognormvariate(math.log(m), 0.7) for m in (10.0, 4.0, 7.0))
            total = g1 + sb + g2 + 1.0
            k = min(1.0, MAX_TRAJ_S / total) * self.slow
            g1, sb, g2 = g1 * k, sb * k, g2 * k
            # a shared service that hangs holds the phase that waits on it
            sb = self.shared.through(spec.sandbox_dep, s + g1, s + g1 + sb) - (s + g1)
            server = i % spec.servers
            gen.append((s, s + g1, server))
            self.phase(s + g1, traj, "sandbox", spec.sandbox_dep)
            if at_fault and fault == "sandbox_hang" and i == n - 1:
                self.fault_at = s + g1
                e = s + g1 + HANG_S
                self.emit(e, "trajectory.done", self.rollout, traj=traj, status="timeout",
                          reward=0.0, duration_s=e - s)  # fmt: skip
                done_at.append(e)
                rewards.append(0.0)
                continue
            gen.append((s + g1 + sb, s + g1 + sb + g2, server))
            self.emit(s + g1 + sb, "trajectory.phase", self.rollout, traj=traj, phase="generate")
            r = s + g1 + sb + g2
            self.phase(r, traj, "reward", spec.reward_dep)
            e = self.shared.through(spec.reward_dep, r, r + rng.uniform(0.2, 1.5))
            reward = round(rng.uniform(0.05, 0.9), 3)
            self.emit(e, "trajectory.done", self.rollout, traj=traj, status="ok",
                      reward=reward, duration_s=e - s)  # fmt: skip
            done_at.append(e)
            rewards.append(reward)
        for k, e in enumerate(sorted(done_at), 1):
            self.emit(e, "progress", self.rollout, name="rollout", n=k, total=n)
        rollout_end = max(done_at, default=t0)
        lost = min(self.dies(self.rollout), self.dies(self.orch))
        if lost < rollout_end:  # its rollout died with its node: the batch never comes
            self.fault_at = self.fault_at if self.fault_at is not None else lost
            self.stats([(a, min(b, lost), k) for a, b, k in gen if a < lost], t0, self.end)
            return self.end, True
        if orch_dies < math.inf:
            self.fault_at = orch_dies
            self.kill(self.orch, orch_dies)
            self.stats(gen, t0, self.end)
            return self.end, True
        self.stats(gen, t0, rollout_end)
        t = rollout_end
        timing: dict[str, float] = {"gen": rollout_end - t0}
        for phase in ("forward", "backward", "all_reduce", "optimizer"):
            if at_fault and fault == "rank_divergence" and phase == "all_reduce":
                bad = rng.randrange(spec.world_size)
                self.fault_at = t
                for r, src in enumerate(self.trainer):
                    p = "destroy_process_group" if r == bad else "recv"
                    self.emit(t + 0.1 * r, "rank.status", src, rank=r,
                              world_size=spec.world_size, phase=p, since=t, step=step)  # fmt: skip
                self.stats([], t, self.end)
                return self.end, True
            self.ranks(t, phase, step)
            d = rng.uniform(5, 15) * self.slow
            timing[phase] = d
            t += d
        for every, phase, lo, hi in (
            (spec.val_every, "testing", 40, 80),
            (spec.ckpt_every, "save_checkpoint", 60, 120),
        ):
            if step % every == 0:
                self.ranks(t, phase, step)
                d = rng.uniform(lo, hi) * self.slow
                if phase == "testing":
                    self.busy_stats(t, t + d)
                timing[phase] = d
                t += d
        mean = round(sum(rewards) / len(rewards), 4) if rewards else 0.0
        self.emit(t - 0.2, "reward", tr, step=step, mean=mean, count=len(rewards))
        metrics = {"critic/score/mean": mean, "actor/grad_norm": round(rng.uniform(0.2, 2), 3)}
        self.emit(t - 0.1, "step.metrics", tr, step=step, metrics=metrics)
        self.emit(t, "step.done", tr, step=step, duration_s=t - t0, timing=timing)
        self.emit(t, "progress", tr, name="Training Progress", n=step, total=spec.total_steps)
        if not crashed:
            self.stats([], rollout_end, t)
        return t, False

    def phase(self, t: float, traj: str, name: str, dep: str | None) -> None:
        fields = {"dep": dep} if dep is not None else {}
        self.emit(t, "trajectory.phase", self.rollout, traj=traj, phase=name, **fields)

    def stats(self, gen: list[tuple[float, float, int]], start: float, end: float) -> None:
        """Each live server's queue every STATS_S: running = its trajectories generating."""
        for k, src in enumerate(self.servers):
            dies, t = self.beats[id(src)][1], start + 0.5 + 0.3 * k
            mine = [(a, b) for a, b, s in gen if s == k]
            while t < end and t < dies:
                running = sum(1 for a, b in mine if a <= t < b)
                self.emit(t, "inference.stats", src, server=src["instance"], running=running,
                          waiting=0, kv_cache_usage=round(min(1.0, running / 16), 3))  # fmt: skip
                t += STATS_S

    def busy_stats(self, start: float, end: float) -> None:
        for k, src in enumerate(self.servers):
            t = start + 0.5 + 0.3 * k
            while t < end and t < self.beats[id(src)][1]:
                self.emit(t, "inference.stats", src, server=src["instance"], running=8, waiting=0)
                t += STATS_S
            self.emit(end, "inference.stats", src, server=src["instance"], running=0, waiting=0)


def scaled_config(
    speed: float, config: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, dict[str, float]]:
    """The time thresholds of the built-in rules (their `Seconds` parameters: `config`'s,
    in the simulation's seconds, else the defaults) at `speed`, for `run.started.config`
    (empty at real time without `config`)."""
    config = config or {}
    if speed == 1 and not config:
        return {}
    out: dict[str, dict[str, float]] = {}
    for rule in BUILTIN_RULES:
        defaults = rule.params_model()
        given = config.get(rule.id, {})
        scaled = {}
        fixed = getattr(rule, "fixed_fields", ())  # not per run: the fleet's (shared_cause)
        for name in time_params(rule.params_model):
            value = given.get(name, getattr(defaults, name))
            if name in fixed:
                continue
            if isinstance(value, int | float):
                scaled[name] = float(value) / speed
        if scaled:
            out[rule.id] = scaled
    return out


class Cluster:
    """N jobs; `events()` merges their events in time order as contract dicts."""

    def __init__(
        self,
        jobs: int,
        *,
        faults: list[str] | None = None,
        seed: int = 0,
        duration: float = 3600.0,
        fault_step: int = 3,
        prefix: str = "sim",
        specs: list[JobSpec] | None = None,
        shared: Shared = Shared(),
        config: Mapping[str, Mapping[str, float]] | None = None,
        **job_args: Any,
    ) -> None:
        """`config`: rule thresholds every job starts with (`scaled_config`), where not the
        defaults."""
        faults = list(faults or [])
        if unknown := sorted(set(faults) - set(KINDS)):
            raise ValueError(f"unknown fault {', '.join(unknown)}; choose from {', '.join(KINDS)}")
        if len(faults) > jobs:
            raise ValueError(f"{len(faults)} faults need at least as many jobs, not {jobs}")
        self.seed, self.duration, self.prefix, self.shared = seed, duration, prefix, shared
        self.config = dict(config or {})
        self.jobs: list[Job] = []  # built by events()
        self.specs = specs if specs is not None else [
            JobSpec(i, f"{prefix}-{seed}-job{i:03d}", faults[i] if i < len(faults) else None,
                    fault_step, **job_args)
            for i in range(jobs)
        ]  # fmt: skip

    def events(self, t0: float, speed: float = 1.0) -> Iterator[Event]:
        config = scaled_config(speed, self.config)
        jobs = self.jobs = [Job(spec, self.seed, self.duration, self.shared)
                            for spec in self.specs]  # fmt: skip
        streams = [_numbered(job) for job in jobs]
        for t, index, i, kind, src, fields in heapq.merge(*streams):
            spec = self.specs[index]
            ts = t0 + t / speed
            fields = _scale(fields, t0, speed)
            if kind == "run.started" and config:
                fields = {**fields, "config": config}
            yield event(kind, round(ts, 4), spec.run, src, f"{spec.run}-{i:07d}", **fields)

    def stop(self, now: float) -> list[Event]:
        """The simulation stops early (Ctrl-C) at wall time `now`: the closing events of
        every job still running, so the runs end instead of going silent."""
        out: list[Event] = []
        for job in self.jobs:
            if job.finished:
                continue
            run = job.spec.run
            for kind, src, fields in job.closing():
                out.append(
                    event(kind, round(now, 4), run, src, f"{run}-{job.yielded:07d}", **fields)
                )
                job.yielded += 1
        return out


def _numbered(job: Job) -> Iterator[tuple[float, int, int, str, dict[str, Any], dict[str, Any]]]:
    index = job.spec.index
    for t, kind, src, fields in job.events():
        i, job.yielded = job.yielded, job.yielded + 1
        yield t, index, i, kind, src, fields


def _scale(fields: dict[str, Any], t0: float, speed: float) -> dict[str, Any]:
    if speed == 1 and "since" not in fields:
        return fields
    out = dict(fields)
    if "duration_s" in out:
        out["duration_s"] = out["duration_s"] / speed
    if "timing" in out:
        out["timing"] = {k: v / speed for k, v in out["timing"].items()}
    if "since" in out:
        out["since"] = t0 + out["since"] / speed
    return out

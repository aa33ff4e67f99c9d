"""The scenarios: the incidents runwatch exists for (docs/architecture.md), recorded as
deterministic event streams (`runwatch scenarios` writes them).

Each builder returns the events a real job would have emitted, with the published numbers:
the 20/21/26-minute idle gaps and the 511/512 bar stuck for 99 minutes; reward 0 from step
188 to 680; the orchestrator that dies; ranks that diverge or all hang in one collective;
and a healthy 2-hour step with validation and checkpointing that must stay quiet. They drive
the golden tests, `make demo` and the benchmarks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from runwatch.dev.envelope import Event, event

#: 2026-03-14 14:00:00 UTC: the scenarios' clock starts here.
T0 = datetime(2026, 3, 14, 14, 0, tzinfo=UTC).timestamp()
MIN = 60.0


@dataclass
class Script:
    """Builds one run's events; ids are deterministic so replays are reproducible."""

    run: str
    seed: int = 0
    events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.run}/{self.seed}")

    def emit(self, kind: str, ts: float, src: dict[str, Any], **fields: Any) -> None:
        n = len(self.events)
        self.events.append(
            event(kind, round(ts, 3), self.run, src, f"{self.run}-{n:07d}", **fields)
        )

    def heartbeats(
        self,
        src: dict[str, Any],
        start: float,
        end: float,
        every: float = 10.0,
        final: bool = False,
    ) -> None:
        t = start
        while t < end:
            self.emit("heartbeat", t, src)
            t += every
        if final:
            self.emit("heartbeat", end, src, final=True)

    def sorted(self) -> list[Event]:
        """Events in time order, as one partition would carry them."""
        return sorted(self.events, key=lambda e: e["ts"])


TRAINER = {"component": "trainer", "host": "node-0", "pid": 4100}
ROLLOUT = {"component": "rollout", "host": "node-1", "pid": 4200}
VLLM = {"component": "inference", "host": "node-2", "pid": 4300, "instance": "vllm-0"}


def _rollout_step(
    s: Script,
    step: int,
    start: float,
    *,
    n: int = 512,
    gen_end: float,
    tail: float | None,
    tail_phase: str = "sandbox",
    long_tail: bool = True,
) -> float:
    """One step's rollout: `n` trajectories generate until `gen_end` (vLLM busy), then
    finish within a minute -- except, with `tail`, the last one, which sits in `tail_phase`
    for `tail` seconds while vLLM is idle. Returns when the last trajectory finished
    (None-tail: when the batch finished)."""
    rng = s.rng
    s.emit("progress", start, ROLLOUT, name="Rollout", n=0, total=n)
    gen_done: list[float] = []
    for i in range(n):
        traj = f"s{step}-t{i:03d}"
        t_start = start + rng.uniform(0, 5)
        s.emit("trajectory.started", t_start, ROLLOUT, traj=traj, step=step)
        s.emit("trajectory.phase", t_start + 0.01, ROLLOUT, traj=traj, phase="generate")
        # long tail: most finish early, a few run long; else slow but steady completions
        frac = min(1.0, rng.paretovariate(3) / 4) if long_tail else (i + rng.random()) / n
        g = min(gen_end - 1.0, t_start + (gen_end - start) * frac)
        if i == n - 1:
            g = gen_end - 0.5
        gen_done.append(g)
        s.emit("trajectory.phase", g, ROLLOUT, traj=traj, phase="sandbox")
    finish = []
    for i, g in enumerate(gen_done):
        traj = f"s{step}-t{i:03d}"
        if i == n - 1 and tail is not None:
            if tail_phase != "sandbox":
                s.emit("trajectory.phase", g + 1.0, ROLLOUT, traj=traj, phase=tail_phase)
            done = gen_end + tail
        else:
            r = g + rng.uniform(2, 30)
            s.emit("trajectory.phase", r, ROLLOUT, traj=traj, phase="reward")
            done = r + rng.uniform(0.1, 1.0)
        finish.append(done)
    for k, (i, done) in enumerate(sorted(enumerate(finish), key=lambda x: x[1]), 1):
        s.emit(
            "trajectory.done",
            done,
            ROLLOUT,
            traj=f"s{step}-t{i:03d}",
            status="ok",
            reward=round(rng.uniform(0.1, 0.9), 3),
        )
        s.emit("progress", done, ROLLOUT, name="Rollout", n=k, total=n)
    # vLLM's queue, scraped every 10 s: busy until gen_end, idle from then on
    t = start
    while t < gen_end:
        running = sum(1 for g in gen_done if g > t)
        s.emit("inference.stats", t, VLLM, server="vllm-0", running=running, waiting=0)
        t += 10.0
    s.emit("inference.stats", gen_end, VLLM, server="vllm-0", running=0, waiting=0)
    return max(finish)


def _train(s: Script, step: int, start: float, end_rollout: float, reward: float) -> float:
    """The trainer's side of a step after rollout: update, metrics, reward, step.done."""
    update = 10 * MIN
    done = end_rollout + update
    s.emit("reward", done - 1, TRAINER, step=step, mean=reward, count=512)
    s.emit(
        "step.metrics",
        done - 1,
        TRAINER,
        step=step,
        metrics={"critic/score/mean": reward, "actor/grad_norm": 0.8, "actor/lr": 1e-6},
    )
    s.emit(
        "step.done",
        done,
        TRAINER,
        step=step,
        duration_s=done - start,
        timing={"gen": end_rollout - start, "update_actor": update},
    )
    return done


def sandbox_hang() -> list[Event]:
    """GPU idle while trajectories wait: gaps of 20, 21, 26 minutes, then 511/512 for 99 min.

    The fourth step's generation ends at 16:41; its last trajectory never leaves the code
    sandbox; someone presses Ctrl-C 99 minutes later.
    """
    s = Script("grpo-qwen2.5-7b-sandbox")
    s.emit("run.started", T0, TRAINER, labels={"team": "reasoning"}, total_steps=400)
    s.emit("progress", T0, TRAINER, name="Training Progress", n=0, total=400)
    # the fourth step's generation must end at 16:41 sharp
    gen_len = 15 * MIN
    gaps = [20 * MIN, 21 * MIN, 26 * MIN]
    t = T0 + 60
    step_starts = []
    for step, gap in enumerate(gaps, start=1):
        step_starts.append(t)
        s.emit("step.started", t, TRAINER, step=step)
        end = _rollout_step(s, step, t, gen_end=t + gen_len, tail=gap)
        t = _train(s, step, t, end, reward=0.42 + 0.01 * step)
        s.emit("progress", t, TRAINER, name="Training Progress", n=step, total=400)
        t += 30
    stall_start = datetime(2026, 3, 14, 16, 41, tzinfo=UTC).timestamp()
    assert stall_start - gen_len > t, "the first steps must fit before 16:41"
    t = stall_start - gen_len
    s.emit("step.started", t, TRAINER, step=4)
    end = stall_start + 99 * MIN
    _rollout_step(s, 4, t, gen_end=stall_start, tail=2 * end)  # never finishes
    s.emit("run.finished", end, TRAINER, status="killed")
    for src in (TRAINER, ROLLOUT, VLLM):
        s.heartbeats(src, T0, end)
    return [e for e in s.sorted() if e["ts"] <= end]


def zero_reward(last_step: int = 680) -> list[Event]:
    """Reward exactly zero from step 188: the SGLang server died and every rollout failed."""
    s = Script("ppo-llama3-8b-math")
    sglang = {"component": "inference", "host": "node-5", "pid": 7100, "instance": "sglang-0"}
    step_len = 90.0
    s.emit("run.started", T0, TRAINER, labels={"team": "math"}, total_steps=1000)
    death = T0 + (188 - 150) * step_len - 30
    for step in range(150, last_step + 1):
        start = T0 + (step - 150) * step_len
        s.emit("step.started", start, TRAINER, step=step)
        dead = start > death
        if not dead:
            s.emit("inference.stats", start + 5, sglang, server="sglang-0", running=64, waiting=8)
        reward = 0.0 if dead else round(0.31 + 0.0005 * (step - 150) + s.rng.uniform(0, 0.01), 4)
        done = start + step_len - 5
        s.emit("step.metrics", done - 1, TRAINER, step=step, metrics={"critic/score/mean": reward})
        s.emit("step.done", done, TRAINER, step=step, duration_s=step_len - 5)
    end = T0 + (last_step - 150 + 1) * step_len
    s.heartbeats(TRAINER, T0, end)
    s.heartbeats(sglang, T0, death)
    s.emit("run.finished", end, TRAINER, status="killed")
    return s.sorted()


def orchestrator_dies() -> list[Event]:
    """Trainer, orchestrator and inference are separate processes; the orchestrator dies and
    the trainer waits for a batch that never arrives."""
    s = Script("prime-rl-qwen3-4b")
    orch = {"component": "orchestrator", "host": "node-3", "pid": 5100}
    vllm = {"component": "inference", "host": "node-4", "pid": 5200, "instance": "vllm-0"}
    step_len = 5 * MIN
    s.emit("run.started", T0, TRAINER, total_steps=200)
    s.emit("progress", T0, TRAINER, name="Training Progress", n=0, total=200)
    for step in range(1, 11):
        start = T0 + (step - 1) * step_len
        s.emit("step.started", start, TRAINER, step=step)
        s.emit("reward", start + step_len - 2, TRAINER, step=step, mean=0.5)
        s.emit("step.done", start + step_len - 1, TRAINER, step=step)
        s.emit(
            "progress", start + step_len - 1, TRAINER, name="Training Progress", n=step, total=200
        )
        s.emit("inference.stats", start + 10, vllm, server="vllm-0", running=32, waiting=0)
    death = T0 + 10 * step_len + 20
    end = death + 90 * MIN
    s.emit("inference.stats", T0 + 10 * step_len + 10, vllm, server="vllm-0", running=0, waiting=0)
    s.heartbeats(orch, T0, death)
    s.heartbeats(TRAINER, T0, end)
    s.heartbeats(vllm, T0, end)
    return s.sorted()


def rank_hang(pattern: str = "divergent", world_size: int = 8) -> list[Event]:
    """A distributed trainer's ranks stop changing phase.

    divergent: rank 3 raised and hangs in `destroy_process_group` while the others wait in
    `recv`. uniform: every rank sits in one `all_reduce`.
    """
    s = Script(f"verl-dapo-32b-{pattern}")
    s.emit("run.started", T0, TRAINER, total_steps=100)
    cycle = ("forward", "backward", "all_reduce")
    t = T0
    for i in range(60):  # ten healthy minutes: a phase change every 10 s
        t = T0 + i * 10.0
        for r in range(world_size):
            src = {**TRAINER, "rank": r, "pid": 4100 + r}
            s.emit(
                "rank.status", t, src, rank=r, world_size=world_size, phase=cycle[i % 3], since=t
            )
    hang = t + 10.0
    end = hang + 30 * MIN
    for r in range(world_size):
        src = {**TRAINER, "rank": r, "pid": 4100 + r}
        if pattern == "divergent":
            phase = "destroy_process_group" if r == 3 else "recv"
        else:
            phase = "all_reduce"
        tick = hang
        while tick < end:  # the status rides on each rank's heartbeat: same phase, same since
            s.emit("rank.status", tick, src, rank=r, world_size=world_size, phase=phase, since=hang)
            s.emit("heartbeat", tick, src)
            tick += 10.0
    return s.sorted()


def healthy_long_steps(steps: int = 3) -> list[Event]:
    """A healthy run with 2-hour steps, validation and checkpointing: must raise no alert."""
    s = Script("grpo-qwen2.5-72b-healthy")
    s.emit("run.started", T0, TRAINER, total_steps=50)
    s.emit("progress", T0, TRAINER, name="Training Progress", n=0, total=50)
    t = T0 + 60
    for step in range(1, steps + 1):
        start = t
        s.emit("step.started", start, TRAINER, step=step)
        rollout_end = _rollout_step(
            s, step, start, n=256, gen_end=start + 80 * MIN, tail=None, long_tail=False
        )
        # validation: vLLM busy with the validation set, no training trajectories pending
        val_start = rollout_end + 20 * MIN
        for k in range(60):
            s.emit(
                "inference.stats", val_start + k * 10, VLLM, server="vllm-0", running=48, waiting=4
            )
        s.emit("inference.stats", val_start + 600, VLLM, server="vllm-0", running=0, waiting=0)
        done = val_start + 10 * MIN + 5 * MIN  # then a 5-minute checkpoint
        s.emit("reward", done - 2, TRAINER, step=step, mean=0.55 + 0.01 * step)
        s.emit(
            "step.done",
            done,
            TRAINER,
            step=step,
            duration_s=done - start,
            timing={
                "gen": rollout_end - start,
                "update_actor": 20 * MIN,
                "testing": 10 * MIN,
                "save_checkpoint": 5 * MIN,
            },
        )
        s.emit("progress", done, TRAINER, name="Training Progress", n=step, total=50)
        t = done + 30
    for src in (TRAINER, ROLLOUT, VLLM):
        s.heartbeats(src, T0, t, final=True)
    s.emit("run.finished", t, TRAINER, status="ok")
    return s.sorted()


#: name -> builder, for the demo and `runwatch scenarios`.
SCENARIOS: dict[str, Callable[[], list[Event]]] = {
    "sandbox_hang": sandbox_hang,
    "zero_reward": zero_reward,
    "orchestrator_dies": orchestrator_dies,
    "rank_divergence": lambda: rank_hang("divergent"),
    "rank_uniform": lambda: rank_hang("uniform"),
    "healthy_long_steps": healthy_long_steps,
}


def write(out_dir: Path, names: list[str] | None = None) -> list[Path]:
    """Write the chosen scenarios (default: all) as JSON Lines files; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or list(SCENARIOS):
        path = out_dir / f"{name}.jsonl"
        with path.open("wb") as f:
            for e in SCENARIOS[name]():
                f.write(orjson.dumps(e) + b"\n")
        paths.append(path)
    return paths

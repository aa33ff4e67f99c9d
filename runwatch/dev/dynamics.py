"""Generated training curves, healthy and faulty, for the training-dynamics rules: the
property tests check that healthy runs raise nothing, and bench/dynamics.py backtests the
defaults (false alarms on healthy runs, detection and delay on faulty ones).

Healthy: gradient norms that fall while the model warms up, then wander with heavy-tailed
noise and rare one-step spikes; a KL that grows and settles; an entropy that falls as the
policy learns; responses that lengthen. Faults start at step `at` and stay.
"""

from __future__ import annotations

import math
import random
from typing import Any

from runwatch.dev.envelope import event

#: fault name -> the rule that should catch it
FAULTS = {
    "grad_explosion": "grad_norm_spike",
    "kl_runaway": "kl_spike",
    "entropy_collapse": "entropy_collapse",
    "entropy_to_12pct": "entropy_collapse",  # the fall a fraction of 0.1 let pass
    "length_collapse": "response_length_drift",
    "length_clipping": "response_length_drift",
    "slowdown": "step_slowdown",
    "stale_rollouts": "staleness_growing",
}


def curves(
    seed: int, n: int = 2000, fault: str | None = None, at: int = 0
) -> list[dict[str, float]]:
    """One metrics dict per step (verl's key names, and PRIME-RL's off_policy/mean), 1..n."""
    rng = random.Random(seed)
    slow = random.Random(f"{seed}/pace")
    out = []
    for t in range(1, n + 1):
        grad = (0.5 + 5.0 * math.exp(-t / 150)) * math.exp(rng.gauss(0, 0.35))
        kl = 0.002 + 0.02 * (1 - math.exp(-t / 300)) * math.exp(rng.gauss(0, 0.35))
        entropy = (0.35 + 0.65 * math.exp(-t / 500)) * math.exp(rng.gauss(0, 0.1))
        length = (400 + 600 * (1 - math.exp(-t / 400))) * math.exp(rng.gauss(0, 0.15))
        clip = min(1.0, 0.02 * math.exp(rng.gauss(0, 0.5)))
        if rng.random() < 0.01:
            grad *= rng.uniform(3, 20)
        if rng.random() < 0.01:
            kl *= rng.uniform(3, 20)
        if rng.random() < 0.01:
            entropy *= rng.uniform(0.02, 0.2)  # a one-step dip
        if fault is not None and t >= at:
            if fault == "grad_explosion":
                grad *= 30
            elif fault == "kl_runaway":
                kl *= 20
            elif fault == "entropy_collapse":
                entropy *= 0.03
            elif fault == "entropy_to_12pct":  # of the early level (1.0), and it stays
                entropy = 0.12 * math.exp(rng.gauss(0, 0.05))
            elif fault == "length_collapse":
                length *= 0.05
            elif fault == "length_clipping":
                clip = max(clip, 0.8)
        step = {"actor/grad_norm": grad, "actor/ppo_kl": kl, "actor/entropy": entropy,
                "response_length/mean": length, "response_length/clip_ratio": clip}  # fmt: skip
        step.update(_pace(slow, t, fault if fault is not None and t >= at else None, at))
        out.append(step)
    return out


def _pace(rng: random.Random, t: int, fault: str | None, at: int) -> dict[str, float]:
    """Step time (verl's timing_s/*: generation and update, a checkpoint every 10th step,
    drift, noise, a rare one-off slow step) and the rollouts' off-policy lag (PRIME-RL's
    off_policy/mean). Drawn from their own generator, so the other series stay as they were."""
    gen = 200.0 * (1 + 0.2 * t / 2000) * math.exp(rng.gauss(0, 0.12))
    update = 100.0 * math.exp(rng.gauss(0, 0.08))
    lag = 1.0 + 0.5 * math.exp(rng.gauss(0, 0.4))
    if rng.random() < 0.01:
        gen *= rng.uniform(1.5, 3.0)
    if fault == "slowdown":
        gen *= 2.5
    elif fault == "stale_rollouts":
        lag += 0.25 * (t - at)
    out = {"timing_s/gen": gen, "timing_s/update_actor": update, "off_policy/mean": lag}
    if t % 10 == 0:
        out["timing_s/save_checkpoint"] = 120.0 * math.exp(rng.gauss(0, 0.1))
    out["timing_s/step"] = sum(out[k] for k in out if k.startswith("timing_s/"))
    return out


def events(
    run: str, metrics: list[dict[str, float]], start: float = 1_800_000_000.0, every: float = 30.0
) -> list[dict[str, Any]]:
    """The curves as contract events, as the TrainerLogger sends verl's dict: per step,
    `step.metrics`, then `step.done` with `timing_s/step` as its duration and the other
    `timing_s/*` as its timing (when the dict has them)."""
    src = {"component": "trainer", "host": "node-0", "pid": 100}
    out: list[dict[str, Any]] = []
    for i, m in enumerate(metrics, 1):
        ts = start + every * i
        out.append(event("step.metrics", ts, run, src, f"{run}-{i}", step=i, metrics=m))
        if "timing_s/step" in m:
            timing = {k[len("timing_s/") :]: v for k, v in m.items()
                      if k.startswith("timing_s/") and k != "timing_s/step"}  # fmt: skip
            out.append(event("step.done", ts, run, src, f"{run}-{i}-done", step=i,
                             duration_s=m["timing_s/step"], timing=timing))  # fmt: skip
    return out

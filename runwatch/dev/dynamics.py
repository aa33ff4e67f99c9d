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

#: fault name -> the rule that should catch it
FAULTS = {
    "grad_explosion": "grad_norm_spike",
    "kl_runaway": "kl_spike",
    "entropy_collapse": "entropy_collapse",
    "length_collapse": "response_length_drift",
    "length_clipping": "response_length_drift",
}


def curves(
    seed: int, n: int = 2000, fault: str | None = None, at: int = 0
) -> list[dict[str, float]]:
    """One metrics dict per step (verl's key names), steps 1..n."""
    rng = random.Random(seed)
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
            elif fault == "length_collapse":
                length *= 0.05
            elif fault == "length_clipping":
                clip = max(clip, 0.8)
        out.append({"actor/grad_norm": grad, "actor/ppo_kl": kl, "actor/entropy": entropy,
                    "response_length/mean": length,
                    "response_length/clip_ratio": clip})  # fmt: skip
    return out


def events(
    run: str, metrics: list[dict[str, float]], start: float = 1_800_000_000.0, every: float = 30.0
) -> list[dict[str, Any]]:
    """The curves as contract `step.metrics` events, one per step."""
    src = {"component": "trainer", "host": "node-0", "pid": 100}
    return [{"v": 1, "id": f"{run}-{i}", "ts": start + every * i, "run": run,
             "kind": "step.metrics", "src": src, "step": i, "metrics": m}
            for i, m in enumerate(metrics, 1)]  # fmt: skip

"""A training loop that obeys runwatch, for `runwatch demo`: what a verl user gets from
`RUNWATCH_GUARD=zero_reward` alone, as a separate process.

Each step logs verl-shaped metrics (`runwatch.dev.dynamics` curves, with the KL running
away from `--kl-at` on: a `kl_spike`) and a reward that drops to zero from `--zero-at` on
(the dead-inference-server case), through `TrainerLogger` with a guard on `zero_reward`. Once
the rule fires the loop is paused inside `log()` -- it says so on stdout -- until a person
runs `runwatch resume RUN`; then it goes on. SIGTERM ends the run as killed.

    python -m runwatch.dev.trainer --url http://127.0.0.1:8787 --run demo-guarded
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from runwatch.dev.dynamics import curves
from runwatch.emitters.emitter import Emitter
from runwatch.emitters.guard import Decision
from runwatch.emitters.trainer import TrainerLogger


def say(message: str) -> None:
    print(message, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runwatch.dev.trainer", description=__doc__)
    p.add_argument("--url", required=True, help="runwatch serve")
    p.add_argument("--run", default="demo-guarded")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-s", type=float, default=0.3, help="wall seconds per step")
    p.add_argument("--kl-at", type=int, default=30, help="the KL runs away from this step")
    p.add_argument("--zero-at", type=int, default=45, help="reward 0 from this step on")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    stop = threading.Event()
    em = Emitter(args.run, "trainer", url=args.url, heartbeat_interval=2.0)
    labels = {"model": "qwen2.5-1.5b", "algo": "grpo", "demo": "circuit breaker"}
    em.emit("run.started", total_steps=args.steps, labels=labels)

    def paused(decision: Decision) -> None:
        say(f"PAUSED {decision.reason}")

    logger = TrainerLogger(em, guard=em.guard({"zero_reward"}, poll_interval=0.5),
                           on_pause=paused)  # fmt: skip

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if logger.guard is not None:
            logger.guard.close()  # a paused loop goes on to its end

    signal.signal(signal.SIGTERM, on_term)
    metrics = curves(args.seed, n=args.steps, fault="kl_runaway", at=args.kl_at)
    status = "ok"
    for step in range(1, args.steps + 1):
        if stop.wait(args.step_s):
            status = "killed"
            break
        reward = 0.0 if step >= args.zero_at else round(0.2 + 0.4 * step / args.steps, 4)
        curve = {k: v for k, v in metrics[step - 1].items() if not k.startswith("timing_s/")}
        data = {**curve, "critic/score/mean": reward, "timing_s/step": args.step_s}
        logger.log(data, step)  # paused in here while zero_reward fires and nobody resumed
        say(f"step {step}")
    em.emit("run.finished", status=status)
    em.close()
    say(f"finished {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

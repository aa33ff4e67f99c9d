"""What /metrics costs: one scrape with 1,000 live runs, and the exporter's per-event cost.

Scrape. `--runs` (1,000) live runs spread over 4 engines (a worker's partitions), each with
a trainer, a rollout worker and two vLLM servers sending heartbeats and queue stats, 64
trajectories pending across four phases (generate/tool/sandbox/reward), two progress bars,
16 steps with reward and timing by phase, 8 ranks, and one firing alert. A scrape
computes every gauge from the run states, then writes the text format: reported for the
collector's own writer (`exposition()`, what /metrics answers) and for prometheus-client's
`generate_latest(registry)`: series per scrape, median and p95 wall time of `--scrapes`.

Fleet. `--fleet-runs` (5,000) runs of the same shape, one in 100 with a firing alert: one
scrape under the cardinality budget (`Limits.detailed_runs`: quiet runs show 6 series when
more runs than that are tracked) against every family for every run.

Per event. The sandbox-hang incident, decoded up front, applied to a fresh `Engine` with and
without `RunwatchMetrics.instrument` (the event-kind counter and the transition counter),
best of `--repeat` passes; the difference per event is the exporter's cost.

    .venv/bin/python bench/exporter.py [--quick] [--runs 1000] [--scrapes 20]

Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from benchinfo import SAID, machine, say, write_section
from prometheus_client import CollectorRegistry, generate_latest

from runwatch.dev.envelope import event
from runwatch.dev.scenarios import sandbox_hang
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine
from runwatch.stream.metrics.exporter import Limits, RunwatchMetrics

PHASES = ("generate", "tool", "sandbox", "reward")


def _events(run: str, t0: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n = 0

    def emit(kind: str, ts: float, src: dict[str, Any], **fields: Any) -> None:
        nonlocal n
        n += 1
        out.append(event(kind, ts, run, src, f"{run}-{n}", **fields))

    trainer = {"component": "trainer", "host": "n0", "pid": 1}
    rollout = {"component": "rollout", "host": "n1", "pid": 2}
    servers = [
        {"component": "inference", "host": "n2", "pid": 3 + i, "instance": f"vllm-{i}"}
        for i in range(2)
    ]
    emit("run.started", t0, trainer, labels={"team": "rl"}, total_steps=1000)
    for step in range(1, 17):
        ts = t0 + step * 60
        emit("step.started", ts - 50, trainer, step=step)
        emit("reward", ts - 1, trainer, step=step, mean=0.5)
        emit(
            "step.done",
            ts,
            trainer,
            step=step,
            duration_s=50.0,
            timing={"gen": 30.0, "update_actor": 15.0, "old_log_prob": 5.0},
        )
        emit("progress", ts, trainer, name="Training Progress", n=step, total=1000)
    t = t0 + 17 * 60
    emit("step.started", t, trainer, step=17)
    emit("progress", t, rollout, name="Rollout", n=0, total=64)
    for i in range(64):
        emit("trajectory.started", t + 1, rollout, traj=f"t{i}", step=17)
        emit("trajectory.phase", t + 2, rollout, traj=f"t{i}", phase=PHASES[i % 4])
    for rank in range(8):
        src = {**trainer, "rank": rank, "pid": 100 + rank}
        emit("rank.status", t + 3, src, rank=rank, world_size=8, phase="forward")
    for src in (trainer, rollout, *servers):
        emit("heartbeat", t + 4, src)
    for i, src in enumerate(servers):
        emit(
            "inference.stats",
            t + 5,
            src,
            server=f"vllm-{i}",
            running=0,
            waiting=0,
            kv_cache_usage=0.1,
        )
    return out


def scrape_cost(runs: int, scrapes: int) -> None:
    registry = CollectorRegistry()
    metrics = RunwatchMetrics(registry)
    engines = [metrics.instrument(Engine()) for _ in range(4)]
    t0 = 1_700_000_000.0
    started = time.perf_counter()
    for r in range(runs):
        engine = engines[r % len(engines)]
        for e in _events(f"run-{r:04d}", t0):
            engine.apply(decode_dict(e))
    for engine in engines:  # idle for 2 min 10 s: inference_idle_with_pending fires
        engine.advance(t0 + 17 * 60 + 140)
    build = time.perf_counter() - started
    text = generate_latest(registry).decode()
    lines = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    firing = sum(len(engine.firing()) for engine in engines)

    def timed(body: Any) -> tuple[float, float]:
        times = []
        for _ in range(scrapes):
            t = time.perf_counter()
            body()
            times.append(time.perf_counter() - t)
        times.sort()
        return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.95))]

    fast, fast95 = timed(metrics.exposition)
    slow, slow95 = timed(lambda: generate_latest(registry))
    say(
        f"scrape: {runs} live runs ({firing} firing alerts), {lines} series "
        f"({lines / runs:.0f} per run), {len(text) / 1e6:.1f} MB of text "
        f"(state built in {build:.1f}s)"
    )
    say(
        f"  /metrics (RunwatchMetrics.exposition, what the worker and serve() answer): "
        f"median {fast * 1e3:.0f} ms, p95 {fast95 * 1e3:.0f} ms"
    )
    say(
        f"  via prometheus-client generate_latest(registry): median {slow * 1e3:.0f} ms, "
        f"p95 {slow95 * 1e3:.0f} ms"
    )


def decode_dict(e: dict[str, Any]) -> Any:
    import orjson

    return decode(orjson.dumps(e))


def per_event_cost(repeat: int) -> None:
    import orjson

    decoded = [decode(orjson.dumps(e)) for e in sandbox_hang()]

    def run(instrumented: bool) -> float:
        best = float("inf")
        for _ in range(repeat):
            engine = Engine()
            if instrumented:
                RunwatchMetrics(CollectorRegistry()).instrument(engine)
            t = time.process_time()
            for e in decoded:
                engine.apply(e)
            best = min(best, time.process_time() - t)
        return best

    plain, inst = run(False), run(True)
    n = len(decoded)
    say(
        f"per event ({n} events of the sandbox-hang incident, engine.apply only, best of "
        f"{repeat}): plain {plain / n * 1e6:.2f} µs, instrumented {inst / n * 1e6:.2f} µs, "
        f"exporter adds {(inst - plain) / n * 1e9:.0f} ns/event "
        f"({(inst - plain) / plain * 100:+.1f}%)"
    )


def fleet_budget(runs: int, scrapes: int) -> None:
    """`runs` live runs of the shape above, 1 in 100 with a firing alert: /metrics under the
    default budget (`Limits.detailed_runs`) against every family for every run, the same
    run states scraped by both."""
    engines = [Engine() for _ in range(4)]
    t0 = 1_700_000_000.0
    for r in range(runs):
        engine = engines[r % len(engines)]
        events = _events(f"run-{r:05d}", t0)
        if r % 100 == 0:  # a NaN loss: non_finite_metric fires
            last = events[-1]
            events.append(event("step.metrics", last["ts"], last["run"], events[0]["src"],
                                f"nan-{r}", step=17, metrics={"loss": float("nan")}))  # fmt: skip
        for e in events:  # json writes NaN as the token the contract allows; orjson as null
            engine.apply(decode(json.dumps(e).encode()) if e["id"].startswith("nan") else
                         decode_dict(e))  # fmt: skip
    firing = sum(len(engine.firing()) for engine in engines)
    say(f"fleet: {runs} live runs, {firing} firing alerts, 4 engines")
    budget = f"the budget (detailed_runs={Limits.detailed_runs})"
    for label, limits in (("every family for every run", Limits(detailed_runs=10**9)),
                          (budget, Limits())):  # fmt: skip
        metrics = RunwatchMetrics(CollectorRegistry(), limits=limits)
        for engine in engines:
            metrics.add_engine(engine)
        times = []
        for _ in range(scrapes):
            t = time.perf_counter()
            body = metrics.exposition()
            times.append(time.perf_counter() - t)
        lines = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        took = statistics.median(times) * 1e3
        say(f"  {label:<40} {lines:>8,} series ({lines / runs:.0f} per run), "
              f"{len(body) / 1e6:5.1f} MB, median scrape {took:.0f} ms")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fleet-runs", type=int, default=5000, help="runs for the budget figure")
    ap.add_argument("--quick", action="store_true", help="fewer scrapes and passes")
    args = ap.parse_args()
    if args.quick:
        args.scrapes, args.repeat, args.fleet_runs = 5, 2, 1000
    say(machine())
    scrape_cost(args.runs, args.scrapes)
    fleet_budget(args.fleet_runs, max(3, args.scrapes // 4))
    per_event_cost(args.repeat)
    if not args.quick:
        write_section("exporter", ["## What `/metrics` costs (`bench/exporter.py`)", "", "```",
                                   *SAID, "```"])  # fmt: skip


if __name__ == "__main__":
    main()

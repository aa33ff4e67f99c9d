"""Replay throughput on one core, next to a naive baseline, and memory per active run.

Throughput, on three traces of different shape (the shape decides what an event costs):

  the repository's  every incident of `runwatch.dev.scenarios`, copied under `--copies`
                    different run ids each (48 runs, ~360k events by default), each copy
                    shifted by a random offset of up to three hours, merged by event time, so
                    dozens of runs are live at once and their events interleave the way one
                    Kafka partition group would carry them.
  heartbeat-heavy   `bench/heartbeat_trace.py`: 60 small runs over four hours, ~320k events,
                    half of them heartbeats, a sixth `inference.stats`, a quarter trajectory
                    starts and ends, the rest step events, written as the emitter writes them.
  fleet-shaped      the fleet bench's run shape (`bench/fleet_shape.py`: eight trainer ranks,
                    a rollout worker, an orchestrator and two servers a run, every trajectory
                    moving through a phase), `--fleet-runs` runs (100) for 240 s, ~70k events.

Lines are JSON bytes in memory (no file I/O). On each:

  runwatch replay   `runwatch.stream.replay.replay` with a default `Engine`, as the command
                    runs it (the collector tuned for a consuming loop): batches of lines
                    decoded by msgspec, the 5 s reorder window, the engine evaluating only
                    the rules an event can change, and every alert serialized with orjson.
                    Twice: every built-in rule on, and only the contract's seven (the
                    others `enabled = false`).
  plain reading     `bench/reference.py`: the contract's seven rules as one would write them
                    from the contract -- a dict per run, `json.loads`, every rule of the run
                    after every event and every run once a second.
  naive engine      the same run state and rules with every shortcut off
                    (`Engine(shortcuts=False)`: every rule after every event) and the same
                    fleet incidents beside it, fed by `json.loads` and the pydantic models;
                    its alerts must equal runwatch's (the script checks that before printing
                    figures).

Memory. `--mem-runs` runs (200) held live at once, each with a trainer and a vLLM server
sending heartbeats, 512 trajectories started and still pending (each moved through a phase or
two), a few finished steps with metrics and reward, and two progress counters. tracemalloc
measures the engine's memory after applying every event; the recent-ids ring that drops
duplicates is engine-wide and bounded (`dedup_capacity`), so it is reported apart.

Goals (issue 44): >= 1.5x the plain reading with every rule on, >= 2x it with the seven, on
every trace; <= 128 KiB per active run with 512 pending trajectories. Times are the process's
CPU time (one core; the bench is single-threaded, and the machine may be shared), best of
`--repeat` passes. Figures only: nothing here asserts a timing.

Through the command (`--command`, the heartbeat-heavy and fleet-shaped traces): `runwatch
replay FILE` with every rule and with the seven (`--config`), against `python
bench/reference.py FILE`, each a process from start to end -- imports and start-up included,
as a user (or a check) runs them. With `--base DIR` (another commit's checkout: `git archive
REV | tar -x -C DIR`), that build's `runwatch` too, through this interpreter, each of its runs
beside this build's (the same transitions, checked), for a before and after in one run.

    .venv/bin/python bench/replay.py [--quick] [--shape all|incidents|heartbeats|fleet]
        [--copies 8] [--fleet-runs 100] [--fleet-seconds 240] [--command] [--mem-runs 200]
        [--repeat 3] [--no-naive] [--base DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
from benchinfo import SAID, interleaved_scenarios, machine, say, write_section
from fleet_shape import schedule, wire
from heartbeat_trace import HOURS, RUNS, heartbeat_heavy
from reference import SEVEN, plain

from runwatch.dev.scenarios import SCENARIOS, T0
from runwatch.emitters import events
from runwatch.stream.alerts import Alert
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine, RecentIds
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.replay import replay
from runwatch.stream.rules import BUILTIN_RULES

Event = dict[str, Any]
Record = tuple[str, int, bytes]


# --- the stream ---------------------------------------------------------------------------


def multi_run_stream(copies: int, seed: int = 11) -> list[bytes]:
    """Every incident under `copies` run ids, each shifted in time, merged by ts."""
    merged = interleaved_scenarios(copies, seed)
    for e in merged:
        e["ts"] = round(e["ts"], 3)
    return [orjson.dumps(e) for e in merged]


def fleet_trace(runs: int, seconds: float) -> list[bytes]:
    """`runs` runs of the fleet bench's shape (bench/fleet_shape.py) for `seconds`, one
    process of one going silent and a NaN in another, in schedule order."""
    rng = random.Random(3)
    names = [f"run-{k}" for k in range(runs)]
    faults = [(seconds / 3, names[3], "silent"), (seconds / 2, names[7], "nan")]
    return [wire(p, round(T0 + p.at, 3), f"{rng.getrandbits(128):032x}")
            for p in schedule(names, seconds, seed=1, faults=faults) if p.kind]  # fmt: skip


def records(lines: list[bytes]) -> Iterator[Record]:
    return (("bench", i, raw) for i, raw in enumerate(lines, 1))


# --- the two contenders -------------------------------------------------------------------


def runwatch_replay(lines: list[bytes], engine: Engine | None = None) -> list[bytes]:
    with tuned_for_consuming():  # as `runwatch replay` runs
        return [orjson.dumps(a.to_dict()) for a in replay(records(lines), engine or Engine())]


#: the built-in rules other than the contract's seven, turned off (`enabled = false`)
ONLY_SEVEN = RulesConfig.from_mapping(
    {"rules": {r.id: {"enabled": False} for r in BUILTIN_RULES if r.id not in SEVEN}}
)


def runwatch_seven(lines: list[bytes]) -> list[bytes]:
    return runwatch_replay(lines, Engine(ONLY_SEVEN))


#: A duplicate-id ring much smaller than the stream, so that nearly every event evicts an id:
#: what a long replay or a long-lived worker does all the time once its ring is full.
SMALL_RING = 50_000


def runwatch_replay_full_ring(lines: list[bytes]) -> list[bytes]:
    return runwatch_replay(lines, Engine(dedup_capacity=SMALL_RING))


def naive(lines: list[bytes]) -> list[bytes]:
    engine = Engine(shortcuts=False)  # every rule after every event
    stage = FleetStage(engine)  # fleet incidents beside it, as replay judges them
    out: list[bytes] = []
    for raw in lines:
        try:
            event = events.validate(json.loads(raw))
        except ValueError:  # pydantic's ValidationError is a ValueError, as is a JSON error
            continue
        alerts: list[Alert] = stage.transitions(engine.apply(event))
        out.extend(json.dumps(a.to_dict()).encode() for a in alerts)
    return out


def decode_only(lines: list[bytes]) -> list[bytes]:
    for raw in lines:
        decode(raw)
    return []


def timed(fn: Any, lines: list[bytes], repeat: int) -> tuple[float, list[bytes]]:
    """Best CPU time of `repeat` passes: one core's worth of work (the process has one
    thread), and steadier than wall time on a machine shared with other work."""
    best, out = float("inf"), []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        out = fn(lines)
        best = min(best, time.process_time() - t0)
    return best, out


# --- through the command -------------------------------------------------------------------

BENCH = os.path.dirname(os.path.abspath(__file__))
RUNWATCH = os.path.join(os.path.dirname(sys.executable), "runwatch")

#: `runwatch` from another checkout, run by this interpreter: that checkout first on the path
#: and the editable install's mapping of runwatch's packages pointed at its folders, before
#: runwatch is imported
BASE_LAUNCHER = """\
import os, sys
checkout = sys.argv.pop(1)
sys.path.insert(0, checkout)  # (before this checkout's root, which a .pth puts on the path)
finder = next(m for name, m in list(sys.modules.items())
              if name.startswith("__editable___runwatch") and name.endswith("_finder"))
for package, path in list(finder.MAPPING.items()):
    finder.MAPPING[package] = os.path.join(checkout, os.path.basename(path))
from runwatch.cli import main
sys.exit(main())
"""


def compiled(checkout: str) -> None:
    """A checkout's modules compiled, as `make setup` compiles them (where
    PYTHONDONTWRITEBYTECODE is set, a stale module would be compiled at every start)."""
    import compileall

    for folder in ("runwatch", "stream", "emitters", "store"):
        compileall.compile_dir(os.path.join(checkout, folder), quiet=1)


def base_runwatch(checkout: str, tmp: str) -> list[str]:
    """The argv prefix that runs `runwatch` from `checkout` (a `git worktree` or `git
    archive` of another commit), compiled."""
    compiled(checkout)
    launcher = os.path.join(tmp, "runwatch_base.py")
    with open(launcher, "w") as f:
        f.write(BASE_LAUNCHER)
    return [sys.executable, launcher, os.path.abspath(checkout)]


def child_cpu(argv: list[str]) -> tuple[float, bytes]:
    """CPU seconds (user + system) of one program run to its end, and what it wrote."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.stdout


def through_the_command(lines: list[bytes], repeat: int, base: str | None = None) -> None:
    """`runwatch replay FILE` (every rule; only the seven: `--config`) against the plain
    reading run as a program (`python bench/reference.py FILE`), each a process of its own
    from start to end (imports, start-up, reading the file, writing alerts): best CPU time of
    `repeat` runs, alternating. With `base` (another checkout), its `runwatch` too, each
    of its runs beside this one's, and its output checked to be the same."""
    with tempfile.TemporaryDirectory() as tmp:
        trace, config = os.path.join(tmp, "trace.jsonl"), os.path.join(tmp, "seven.toml")
        with open(trace, "wb") as f:
            f.writelines(line + b"\n" for line in lines)
        with open(config, "w") as f:
            f.writelines(f"[rules.{r.id}]\nenabled = false\n" for r in BUILTIN_RULES
                         if r.id not in SEVEN)  # fmt: skip
        empty = os.path.join(tmp, "empty.jsonl")
        open(empty, "wb").close()
        reference = [sys.executable, os.path.join(BENCH, "reference.py"), trace]
        compiled(os.path.dirname(BENCH))
        builds = {"": [RUNWATCH]}
        if base is not None:
            builds[" (base)"] = base_runwatch(base, tmp)
        argvs: dict[str, list[str]] = {}
        for tag, runwatch in builds.items():
            argvs[f"runwatch replay FILE, every rule{tag}"] = [*runwatch, "replay", trace]
            argvs[f"runwatch replay FILE --config (the seven){tag}"] = [
                *runwatch, "replay", trace, "--config", config]  # fmt: skip
        argvs["python bench/reference.py FILE"] = reference
        for tag, runwatch in builds.items():
            argvs[f"runwatch replay on an empty file (start-up){tag}"] = [
                *runwatch, "replay", empty]  # fmt: skip
        best = dict.fromkeys(argvs, float("inf"))
        outputs: dict[str, bytes] = {}
        for _ in range(repeat):
            for label, argv in argvs.items():
                used, out = child_cpu(argv)
                best[label] = min(best[label], used)
                outputs[label] = out
        for label, out in outputs.items():  # the same transitions from both builds
            if label.endswith(" (base)") and out != outputs[label.removesuffix(" (base)")]:
                raise SystemExit(f"{label}: its transitions differ from this build's")
    n = len(lines)
    say(f"through the command, each a process from start to end (CPU s, best of {repeat}):")
    for label, t in best.items():
        say(f"  {label:<55}{t:>7.3f} s")
    plain_t = best["python bench/reference.py FILE"]
    for tag in builds:
        every = best[f"runwatch replay FILE, every rule{tag}"]
        seven = best[f"runwatch replay FILE --config (the seven){tag}"]
        say(f"  every rule vs the plain program{tag}: {plain_t / every:.2f}x; the seven: "
            f"{plain_t / seven:.2f}x ({n:,} events)")  # fmt: skip
    say("")


# --- memory per active run ----------------------------------------------------------------

TRAINER = {"component": "trainer", "host": "node-0", "pid": 4100}
ROLLOUT = {"component": "rollout", "host": "node-1", "pid": 4200}
VLLM = {"component": "inference", "host": "node-2", "pid": 4300, "instance": "vllm-0"}
PHASES = ("tool", "sandbox", "reward")


def busy_run(run: str, pending: int = 512, steps: int = 3) -> list[bytes]:
    """One live run mid-step: finished steps behind it, `pending` trajectories in flight."""
    out: list[Event] = []

    def emit(kind: str, ts: float, src: dict[str, Any], **fields: Any) -> None:
        out.append(
            {"v": 1, "id": f"{run}-{len(out)}", "ts": round(ts, 3), "run": run, "kind": kind}
            | {"src": src, **fields}
        )

    t = T0
    emit("run.started", t, TRAINER, labels={"team": "bench"}, total_steps=400)
    for step in range(1, steps + 1):
        emit("step.started", t, TRAINER, step=step)
        metrics = {"critic/score/mean": 0.4, "actor/grad_norm": 0.8, "actor/lr": 1e-6}
        emit("step.metrics", t + 60, TRAINER, step=step, metrics=metrics)
        emit("reward", t + 60, TRAINER, step=step, mean=0.4, count=512)
        emit("step.done", t + 61, TRAINER, step=step, duration_s=61.0)
        emit("progress", t + 61, TRAINER, name="Training Progress", n=step, total=400)
        t += 62
    emit("step.started", t, TRAINER, step=steps + 1)
    for i in range(pending):
        traj = f"s{steps + 1}-t{i:03d}"
        emit("trajectory.started", t + i * 0.01, ROLLOUT, traj=traj, step=steps + 1)
        emit("trajectory.phase", t + i * 0.01 + 0.005, ROLLOUT, traj=traj, phase="generate")
    t += 10
    for i in range(pending):
        traj = f"s{steps + 1}-t{i:03d}"
        emit("trajectory.phase", t + i * 0.01, ROLLOUT, traj=traj, phase=PHASES[i % 3])
        if i % 8 == 0:
            emit("progress", t + i * 0.01, ROLLOUT, name="Rollout", n=i // 8, total=pending)
    t += 10
    for k in range(6):
        emit("inference.stats", t + k, VLLM, server="vllm-0", running=64 - k, waiting=0)
        for src in (TRAINER, ROLLOUT, VLLM):
            emit("heartbeat", t + k, src)
    return [orjson.dumps(e) for e in out]


def memory_per_run(runs: int) -> dict[str, float]:
    per_run = [busy_run(f"mem-run-{r:04d}") for r in range(runs)]
    events_per_run = len(per_run[0])
    gc.collect()
    tracemalloc.start()
    engine = Engine()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    for lines in per_run:
        for raw in lines:
            engine.apply(decode(raw))
    gc.collect()
    total = tracemalloc.get_traced_memory()[0] - base
    pending = sum(len(t.state.inference.pending) for t in engine.runs.values())
    engine.seen = RecentIds(1)  # what is left is the runs themselves (and the timer heap)
    gc.collect()
    runs_only = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {
        "runs": runs,
        "events_per_run": events_per_run,
        "pending_per_run": pending / runs,
        "kib_per_run": runs_only / runs / 1024,
        "dedup_kib": (total - runs_only) / 1024,
        "dedup_ids": runs * events_per_run,
    }


# --- main ---------------------------------------------------------------------------------


def throughput(shape: str, lines: list[bytes], runs: int, args: argparse.Namespace) -> None:
    """The rows for one trace: runwatch with every rule and with the seven, the plain
    reading and the naive engine, all on the same lines in this process."""
    n = len(lines)
    say(f"{shape}: {n:,} events, {runs} runs interleaved by ts")
    t_full, alerts = timed(runwatch_replay, lines, args.repeat)
    t_seven, seven_alerts = timed(runwatch_seven, lines, args.repeat)
    t_plain, plain_alerts = timed(plain, lines, args.repeat)
    t_decode, _ = timed(decode_only, lines, args.repeat)
    rows = [
        ("runwatch replay, every rule (decode+reorder+engine)", t_full),
        ("runwatch replay, only the contract's seven rules", t_seven),
        ("plain reading of the seven rules (bench/reference.py)", t_plain),
    ]
    if args.ring:
        t_ring, ring_alerts = timed(runwatch_replay_full_ring, lines, 1)
        assert ring_alerts == alerts, "a full duplicate-id ring changed the alerts"
        rows.append((f"runwatch, duplicate-id ring full ({SMALL_RING:,} ids)", t_ring))
    rows.append(("runwatch decode alone (part of the first rows)", t_decode))
    if not args.no_naive:
        t_naive, naive_alerts = timed(naive, lines, 1)
        same = [orjson.loads(a) for a in alerts] == [json.loads(a) for a in naive_alerts]
        assert same, "runwatch replay and the naive baseline disagree on the alerts"
        rows.append(("naive: json+pydantic, every rule after every event", t_naive))
        say(f"alert transitions: {len(alerts)} (identical with every rule after every event)")
    else:
        say(f"alert transitions: {len(alerts)}")
    say("")
    say(f"{'path':<55}{'events/s':>10}{'µs/event':>10}")
    for label, t in rows:
        say(f"{label:<55}{n / t:>10,.0f}{t / n * 1e6:>10.2f}")
    say("")
    say(f"every rule vs the plain reading of seven: {t_plain / t_full:.2f}x (goal >= 1.5)")
    say(f"the seven vs the plain reading of seven:  {t_plain / t_seven:.2f}x (goal >= 2)")
    if not args.no_naive:
        say(f"every rule vs the naive engine:           {t_naive / t_full:.2f}x")
    say("firing transitions per rule, runwatch (seven on) / the plain reading:")
    ours = Counter(r["rule"] for r in map(orjson.loads, seven_alerts) if r["state"] == "firing")
    theirs = Counter(r["rule"] for r in map(json.loads, plain_alerts) if r["state"] == "firing")
    say("  " + ", ".join(f"{rule} {ours[rule]}/{theirs[rule]}" for rule in SEVEN))
    say("")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=8, help="runs per incident (default 8)")
    ap.add_argument("--mem-runs", type=int, default=200, help="live runs for the memory figure")
    ap.add_argument("--repeat", type=int, default=3, help="passes of each replay, best kept")
    ap.add_argument("--no-naive", action="store_true", help="leave out the naive engine (slow)")
    ap.add_argument(
        "--shape",
        choices=("all", "incidents", "heartbeats", "fleet"),
        default="all",
        help="which trace (default all three)",
    )
    ap.add_argument("--fleet-runs", type=int, default=100,
                    help="runs of the fleet-shaped trace (default 100)")  # fmt: skip
    ap.add_argument("--fleet-seconds", type=float, default=240.0,
                    help="length of the fleet-shaped trace in seconds (default 240)")  # fmt: skip
    ap.add_argument("--command", action="store_true",
                    help="also time the heartbeat-heavy and fleet-shaped traces through "
                    "`runwatch replay FILE` against the plain reading as a program")  # fmt: skip
    ap.add_argument("--base", metavar="DIR",
                    help="with --command, also run `runwatch` from the checkout DIR (another "
                    "commit, `git archive REV | tar -x -C DIR`), alternating")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="small traces, one pass, print only")
    args = ap.parse_args()
    if args.quick:
        args.copies, args.mem_runs, args.repeat = 2, 50, 1

    say(machine())
    say("CPU time (process_time) per pass, best of "
        f"{args.repeat}; every figure of a trace measured in this one process")  # fmt: skip
    say("")
    if args.shape in ("all", "incidents"):
        args.ring = True
        lines = multi_run_stream(args.copies)
        throughput("the repository's trace (every incident, copied)", lines,
                   len(SCENARIOS) * args.copies, args)  # fmt: skip
    if args.shape in ("all", "heartbeats"):
        args.ring = False
        hours = 1.0 if args.quick else HOURS
        lines = heartbeat_heavy(hours=hours)
        throughput(f"heartbeat-heavy trace (bench/heartbeat_trace.py, {hours:g} h)", lines,
                   RUNS, args)  # fmt: skip
        if args.command:
            through_the_command(lines, args.repeat, args.base)

    if args.shape in ("all", "fleet"):
        args.ring = False
        runs = 30 if args.quick else args.fleet_runs
        lines = fleet_trace(runs, args.fleet_seconds)
        throughput(f"fleet-shaped trace (bench/fleet_shape.py: 12 processes a run, "
                   f"{args.fleet_seconds:g} s)", lines, runs, args)  # fmt: skip
        if args.command:
            through_the_command(lines, args.repeat, args.base)

    mem = memory_per_run(args.mem_runs)
    say(
        f"memory: {mem['runs']} live runs, {mem['events_per_run']} events each, "
        f"{mem['pending_per_run']:.0f} pending trajectories each"
    )
    say(f"  run state: {mem['kib_per_run']:.1f} KiB per run (goal <= 128 KiB)")
    say(
        f"  duplicate-id ring (engine-wide, bounded): {mem['dedup_kib']:,.0f} KiB for "
        f"{mem['dedup_ids']:,} ids ({mem['dedup_kib'] * 1024 / mem['dedup_ids']:.0f} B/id)"
    )

    if not args.quick and args.shape == "all" and not args.no_naive:
        body = ["## Replay throughput against a plain reading of the seven rules "
                "(`bench/replay.py`)", "", "```", *SAID, "```"]  # fmt: skip
        write_section("replay", body)


if __name__ == "__main__":
    main()

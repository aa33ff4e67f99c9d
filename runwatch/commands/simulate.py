"""`runwatch simulate`: a simulated cluster's events, to a file, to `runwatch serve`, or to
Kafka; live destinations are paced on the wall clock at `--speed`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from runwatch.commands.kafka_args import add_kafka_security_args, connect_check
from runwatch.dev.deliver import HttpSink, KafkaSink, send_live, write_file
from runwatch.dev.fleet import fleet_cluster, shared_cluster
from runwatch.dev.simulate import KINDS, Cluster, scaled_config
from runwatch.emitters import env
from runwatch.emitters.topics import Topics
from runwatch.exceptions import CommandError
from runwatch.logs import say
from runwatch.stream.timekeeping.timebounds import time_problem
from runwatch.timeparse import parse_time


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a cluster of RL jobs (with faults) and send their events",
        description="N concurrent RL jobs (trainer ranks, orchestrator, rollout worker, "
        "inference servers) with injectable faults, deterministic for a --seed.",
    )
    p.add_argument("--jobs", type=int, help="how many (default 8; 60 with --fleet)")
    p.add_argument("--fault", action="append", default=[], choices=KINDS,
                   help="inject into the next job (repeat: job 0, 1, ...)")  # fmt: skip
    p.add_argument("--fault-step", type=int, default=3, help="step at which faults begin")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    p.add_argument("--trajectories", type=int, default=32, help="per step")
    p.add_argument("--prefix", default="sim", help="run ids are PREFIX-SEED-jobNNN")
    p.add_argument("--fleet", action="store_true",
                   help="jobs that share reward servers, a sandbox pool and a rollout node; "
                   "one server hangs, the node dies, and 6 jobs fail the same minute for "
                   "reasons of their own (issue 45's trace: runwatch.dev.fleet; run ids "
                   "fleet-NNN)")  # fmt: skip
    p.add_argument("--shared-fault", action="store_true",
                   help="the jobs share two reward servers and a sandbox pool, and one of "
                   "the servers stops answering two thirds of the way through (for a sixth "
                   "of the time): a fleet incident")  # fmt: skip
    p.add_argument("--start", help="file output: clock start (ISO or epoch; default now)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="JSON Lines file ('-': standard output), written at once")
    where.add_argument("--url", help="runwatch serve base URL, e.g. http://127.0.0.1:8787")
    where.add_argument("--kafka", help="bootstrap servers (topic runwatch.events)")
    p.add_argument("--token", help="bearer token for --url (default $RUNWATCH_TOKEN)")
    p.add_argument("--topic", default=Topics().events, help="(default %(default)s)")
    add_kafka_security_args(p)
    p.set_defaults(func=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:

    if args.speed <= 0:
        raise CommandError("--speed must be > 0")
    if args.fleet and args.fault:
        raise CommandError("--fleet brings its own faults: no --fault with it")
    args.jobs = args.jobs if args.jobs is not None else 60 if args.fleet else 8
    try:
        if args.fleet:
            cluster, _ = fleet_cluster(runs=args.jobs, seed=args.seed, duration=args.duration)
        elif args.shared_fault:
            cluster = shared_cluster(
                args.jobs, hang=True, faults=args.fault, seed=args.seed,
                duration=args.duration, fault_step=args.fault_step, prefix=args.prefix,
                trajectories=args.trajectories,
            )  # fmt: skip
        else:
            cluster = Cluster(
                args.jobs, faults=args.fault, seed=args.seed, duration=args.duration,
                fault_step=args.fault_step, prefix=args.prefix, trajectories=args.trajectories,
            )  # fmt: skip
    except ValueError as err:
        raise CommandError(f"{err}") from None
    if args.out:
        t0 = parse_time(args.start) if args.start else time.time()
        if (problem := time_problem(t0)) is not None:  # its events would all be refused
            raise CommandError(f"--start {args.start}: {problem.replace(f'ts {t0!r} ', '')}")
        out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
        try:
            n = write_file(cluster, out, t0, args.speed)
        finally:
            if out is not sys.stdout.buffer:
                out.close()
        say(f"{n} events from {args.jobs} jobs")
        return 0
    sink: HttpSink | KafkaSink
    if args.url:
        sink = HttpSink(args.url, args.token or env.get(env.TOKEN))
    else:
        security = connect_check(args)
        sink = KafkaSink(args.kafka, args.topic, security)
    if (warning := short_silence(cluster, args.speed)) is not None:
        say(warning)
    say(
        f"{args.jobs} jobs for {args.duration:.0f} simulated s at {args.speed:g}x "
        f"({args.duration / args.speed:.0f} s; Ctrl-C ends them early)"
    )
    sent = send_live(cluster, sink, args.speed, progress=say)
    say(f"sent {sent} events from {args.jobs} jobs")
    return 0


#: Wall seconds under which a live path's silence checks meet the sender's own delays.
SHORT_SILENCE_S = 5.0


def short_silence(cluster: Cluster, speed: float) -> str | None:
    """A warning when `speed` makes the runs' heartbeat timeout a few wall seconds: the live
    paths (serve, the Kafka worker) judge silence on the wall clock, so a delay in sending
    (a loaded machine, a slow broker) longer than that fires heartbeat_lost on every run,
    which a replay of the same events never does. None when it is long enough."""
    timeout = scaled_config(speed, cluster.config).get("heartbeat_lost", {}).get("timeout")
    if timeout is None or timeout >= SHORT_SILENCE_S:
        return None
    return (
        f"warning: at {speed:g}x the runs' heartbeat timeout is {timeout:.1f} s of wall time; "
        "a delay in sending longer than that looks like silence to serve and the worker "
        f"(they judge silence on the wall clock). Use --speed {speed * timeout / 10:g} or "
        "less for 10 s."
    )

"""`runwatch watch [--run RUN] [--component NAME] -- CMD ARGS...`: watch a job from its output.

Runs the command with its standard output and error on pipes, copies every byte through to
ours unchanged, and emits the events `runwatch.emitters.logparse` reads from the lines: tqdm
bars, verl step lines, vLLM and SGLang engine stats. Heartbeats while the command lives,
`run.started` before it and `run.finished` with its exit status after (`--no-run-events`
when several processes of one run are watched). The exit status is the command's (128+N
for a command killed by signal N). SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1/2 are passed
on; SIGINT/SIGQUIT typed at a terminal already reach the command, so they are not sent twice.

A command that exits 0 whose output is older than it (`cat` of a saved console) and ends
inside a wait its framework declared that nothing ended, with no failure read (Horovod's
stall inspector, torch's store-based barrier, TensorFlow's CreateSession, vLLM's placement
group or message queue, ...), leaves its run open, not finished: the job the console shows
was still waiting when it ended, so the service's ranks_stalled (inference_stalled) decides
it, on its clock, as `runwatch diagnose` does on the file; watch says on exit which ranks
wait where and when the rule decides unless more of the run arrives. A job that exits
non-zero, or is stopped or killed, finishes its run as always, and so does one that exits 0
after a wait it printed itself (it lived through it).
"""

from __future__ import annotations

import argparse
from typing import Any

from runwatch.commands.kafka_args import add_kafka_security_args, security_from_args
from runwatch.emitters import Emitter, env
from runwatch.emitters.backlog import backlog
from runwatch.emitters.exceptions import KafkaSecurityError
from runwatch.emitters.watch import LeftOpen, run_id_for, utc, watch
from runwatch.exceptions import CommandError
from runwatch.logs import say


def register(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="run a command and emit events read from its output (tqdm, verl, vLLM, SGLang)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--run", help="run id (default $RUNWATCH_RUN, else made from the command)")
    p.add_argument("--component", default="trainer", help="component name (default trainer)")
    p.add_argument("--instance", help="instance name of this process (e.g. vllm-0)")
    p.add_argument("--server", help="server name for vLLM/SGLang stats (default vllm / sglang)")
    add_destination(p)
    p.add_argument(
        "--progress-every",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="at most one progress event per bar this often (default 1)",
    )
    p.add_argument("--heartbeat-interval", type=float, default=10.0, metavar="SECONDS")
    p.add_argument(
        "--no-run-events", action="store_true", help="emit no run.started / run.finished"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    p.set_defaults(func=run)


def add_destination(p: argparse.ArgumentParser) -> None:
    """--kafka / --url / --spool; without one, the environment decides (as for Emitter)."""
    dest = p.add_mutually_exclusive_group()
    dest.add_argument("--kafka", metavar="SERVERS", help="Kafka bootstrap servers")
    dest.add_argument("--url", metavar="URL", help="a `runwatch serve` service")
    dest.add_argument("--spool", metavar="DIR", help="write events to this directory")
    add_kafka_security_args(p)


def make_emitter(args: argparse.Namespace, run: str | None, **settings: Any) -> Emitter | str:
    """The Emitter the flags ask for, or a one-line reason for the user."""
    where = env.destination(args.kafka, args.url, args.spool)
    if not where:  # a command line is not a trainer: say so instead of keeping them
        return (
            "no destination for events: pass --kafka HOST:PORT, --url URL or --spool DIR, "
            "or set RUNWATCH_KAFKA, RUNWATCH_URL or RUNWATCH_SPOOL"
        )
    try:
        security = security_from_args(args) if where.kafka else None
        return Emitter(run=run, kafka=args.kafka, url=args.url, path=args.spool,
                       kafka_security=security, **settings)  # fmt: skip
    except KafkaSecurityError as err:
        return f"Kafka security: {err}"
    except ValueError as err:
        if str(err).startswith("no run id"):
            return "no run id: pass --run RUN or set RUNWATCH_RUN"
        return str(err)


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CommandError("no command given (runwatch watch -- CMD ARGS...)")
    run_id = args.run or env.get(env.RUN)
    if not run_id:
        run_id = run_id_for(command)
        say(f"run id {run_id} (set --run or RUNWATCH_RUN to choose)")
    emitter = make_emitter(
        args,
        run_id,
        component=args.component,
        instance=args.instance,
        heartbeat_interval=args.heartbeat_interval,
    )
    if isinstance(emitter, str):
        raise CommandError(f"{emitter}")
    if emitter.path is None:  # what earlier processes left for this destination, long ago
        left = backlog(emitter.spool_directory)
        if left is not None and (warning := left.warning()):
            say(f"warning: {warning}")
    with emitter:
        return watch(
            command,
            emitter,
            server=args.server,
            progress_every=args.progress_every,
            run_events=not args.no_run_events,
            left_open=lambda left: say(left_open_message(run_id, left)),
        )


def left_open_message(run: str, left: LeftOpen) -> str:
    """What `watch` left open and when the rule decides it, with the rules' default limits
    (the service's config may set others: its own decide)."""
    from runwatch.stream.rules.inference_stalled import InferenceStalledParams
    from runwatch.stream.rules.ranks_stalled import RanksParams

    decides = []
    if left.ranks_since is not None:
        timeout = RanksParams().timeout
        decides.append(f"ranks_stalled fires at {utc(left.ranks_since + timeout)} (its "
                       f"default timeout, {timeout:g} s)")  # fmt: skip
    if left.engine_since is not None:
        stalled_for = InferenceStalledParams().stalled_for
        decides.append(f"inference_stalled fires at {utc(left.engine_since + stalled_for)} "
                       f"(its default stalled_for, {stalled_for:g} s)")  # fmt: skip
    return (
        f"run {run} left open, not finished: the command exited 0 and its output ended "
        f"inside a wait it declared that nothing ended, with no failure read "
        f"({left.describe()}). Unless more of run {run} arrives, {' and '.join(decides)}; "
        f"a service configured otherwise decides by its own limits"
    )

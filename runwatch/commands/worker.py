"""`runwatch worker`: the live stream worker."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from runwatch import configfile
from runwatch.commands.kafka_args import add_kafka_security_args, connect_check
from runwatch.exceptions import CommandError

if TYPE_CHECKING:
    from runwatch.stream.config import RulesConfig

WORKER_HELP = """\
Consume runwatch.events from Kafka, run the rules live (event time, corrected for emitting
hosts' clock skew; the wall clock for conditions that ripen in silence) and publish alert
transitions to runwatch.alerts (key = run id). Invalid events go to runwatch.events.dlq
with the reason. Topics are created on start. Start several workers with the same --app-id
to split the partitions (and so the runs) between them.

Each live partition's state is checkpointed to runwatch.checkpoints (a compacted topic)
every --checkpoint-every seconds or --checkpoint-events events: a worker that starts,
restarts or takes over partitions loads the newest checkpoint and re-reads only the events
after it (all of them when there is no usable checkpoint -- the rules config changed, say),
then publishes only the transitions that are missing. The group's positions are committed
so kafka-consumer-groups.sh --describe shows the worker's lag.

Fleet incidents (shared_cause: many runs stalled on one service, node or inference server)
need every run: each worker tells runwatch.fleet what its runs use and how their incidents
open and close, and one fleet stage -- run by every worker, judged by one of them, another
taking over when it dies -- publishes the fleet's transitions to runwatch.alerts, and
tells the workers on runwatch.fleet.members which run incidents belong to which fleet
incident: they stamp its id on those runs' transitions (incident.fleet).
"""


def register(sub: Any) -> None:
    w = sub.add_parser(
        "worker",
        help="run the rules live over Kafka and publish alerts",
        description=WORKER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_group_args(w, stage=False)
    w.add_argument(
        "--tick", type=float, default=0.5, help="seconds between wall-clock checks (0.5)"
    )
    w.add_argument(
        "--session-timeout",
        type=float,
        default=10.0,
        help="seconds before the group gives a dead worker's partitions away (10)",
    )
    w.add_argument(
        "--fetch-wait",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="the broker holds a fetch up to this long to fill it (0.1): fewer, larger "
        "batches, less CPU per event, for up to this much more alert delay; 0: at once",
    )
    w.add_argument(
        "--checkpoint-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="checkpoint each live partition this often (30; 0: by count only); a forked "
        "child pickles it, so a short interval costs the live path little",
    )
    w.add_argument(
        "--checkpoint-events",
        type=int,
        default=1_000_000,
        metavar="N",
        help="... or after this many events (1000000; 0: by time only)",
    )
    w.add_argument(
        "--checkpoint-fork",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pickle checkpoints in a forked child while events go on being applied, so "
        "the live path stops only for the fork (default, where the platform can fork); "
        "--no-checkpoint-fork: in place, the live path waits (bench/checkpoint.py)",
    )
    w.add_argument("--log-level", default="warning", help="Faust's log level (warning)")
    w.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus /metrics on this port (default: off; e.g. 9464)",
    )
    w.add_argument(
        "--metrics-detailed-runs",
        type=int,
        default=500,
        metavar="N",
        help="while the worker tracks more runs than this, /metrics shows every series only "
        "for runs with a firing alert or an open incident, and 6 series for each other run "
        "(500; the budget of a large fleet: docs/metrics.md)",
    )
    w.add_argument(
        "--fleet-stage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the fleet stage, which judges fleet incidents (shared_cause) across "
        "every worker's runs from runwatch.fleet; the workers' stages form one group and one "
        "of them judges (default); --no-fleet-stage: this worker only feeds it",
    )
    w.set_defaults(func=run_worker)

    f = sub.add_parser(
        "fleet",
        help="judge fleet incidents over Kafka in a process of its own",
        description=FLEET_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_group_args(f, stage=True)
    f.set_defaults(func=run_fleet)


def add_group_args(p: Any, *, stage: bool) -> None:
    """What `runwatch worker` and `runwatch fleet` share: where the cluster is, how to sign
    in, the rules, the topics and the group -- the stage takes the workers' own."""
    p.add_argument("--kafka", required=True, metavar="HOST:PORT", help="bootstrap servers")
    p.add_argument(
        "--config",
        metavar="PATH",
        help="rules config (TOML)" + (", the workers' own" if stage else ""),
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=4,
        help="partitions of topics it creates"
        + (", should it start first" if stage else "")
        + " (default 4)",
    )
    p.add_argument(
        "--topic-prefix",
        default="",
        help="the workers' topic prefix"
        if stage
        else "prefix for the topic names, e.g. 'staging.'",
    )
    p.add_argument(
        "--app-id",
        default="runwatch-worker",
        help="the workers' --app-id: the stage's group is APP_ID-fleet"
        if stage
        else "consumer group: workers with the same id split the partitions",
    )
    add_kafka_security_args(p)


def checked(args: argparse.Namespace) -> RulesConfig:
    """The rules config of `add_group_args`' arguments, which are checked (a usage error
    before any broker is asked: `connect_check` comes after)."""
    config = configfile.rules(args.config)
    if args.partitions < 1:
        raise CommandError("--partitions must be at least 1")
    return config


FLEET_HELP = """\
Judge fleet incidents (shared_cause: the runs stalled on one service, node or inference
server) from what the workers publish on runwatch.fleet, and publish their transitions to
runwatch.alerts. Every `runwatch worker` runs this stage already (unless --no-fleet-stage);
the stages of a group of workers form one consumer group (APP_ID-fleet), of which one
judges and the others stand by. Run it on its own to keep it off the workers' processes:
give it the workers' --app-id, --topic-prefix and --config.
"""


# -- runwatch worker -------------------------------------------------------------------------


def run_worker(args: argparse.Namespace) -> int:
    config = checked(args)
    if args.checkpoint_every < 0 or args.checkpoint_events < 0:
        raise CommandError("--checkpoint-every and --checkpoint-events cannot be negative")
    if not 0 <= args.fetch_wait <= 5:
        raise CommandError("--fetch-wait must be between 0 and 5 seconds")
    if args.metrics_detailed_runs < 0:
        raise CommandError("--metrics-detailed-runs cannot be negative")
    security = connect_check(args)
    from runwatch.stream.kafka.host import run
    from runwatch.stream.kafka.settings import WorkerSettings
    from runwatch.stream.kafka.snapshot import CAN_FORK

    settings = WorkerSettings(
        bootstrap=args.kafka,
        config=config,
        partitions=args.partitions,
        topic_prefix=args.topic_prefix,
        app_id=args.app_id,
        tick_s=args.tick,
        session_timeout=args.session_timeout,
        fetch_wait_s=args.fetch_wait,
        metrics_port=args.metrics_port,
        metrics_detailed_runs=args.metrics_detailed_runs,
        security=security,
        checkpoint_every_s=args.checkpoint_every,
        checkpoint_every_events=args.checkpoint_events,
        checkpoint_fork=args.checkpoint_fork and CAN_FORK,
        fleet_stage=args.fleet_stage,
    )
    return run(settings, log_level=args.log_level)


def run_fleet(args: argparse.Namespace) -> int:
    config = checked(args)
    security = connect_check(args)
    from runwatch.emitters.topics import Topics
    from runwatch.stopping import stop_on_signals
    from runwatch.stream.kafka.fleet_stage import run_alone
    from runwatch.stream.rules.shared_cause import judged

    if not judged(config):
        raise CommandError("the rules config turns shared_cause off: no fleet incidents to judge")
    topics = Topics(args.topic_prefix)
    return run_alone(args.kafka, security, topics, args.app_id, config, args.partitions,
                     stop_on_signals())  # fmt: skip

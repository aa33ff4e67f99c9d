"""`WorkerSettings`: what `runwatch worker` runs with, every default resolved (built from the
command line in `runwatch.commands.worker`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.stream.config import RulesConfig
from runwatch.stream.kafka.snapshot import CAN_FORK
from runwatch.stream.live import DEFAULT_GRACE
from runwatch.stream.metrics.exporter import Limits


@dataclass
class WorkerSettings:
    """What `runwatch worker` is told on its command line."""

    bootstrap: str
    config: RulesConfig = field(default_factory=RulesConfig.default)
    partitions: int = 4
    topic_prefix: str = ""
    app_id: str = "runwatch-worker"
    tick_s: float = 0.5
    grace: float = DEFAULT_GRACE
    batch_max: int = 5000
    #: A worker that died is noticed by the group after this long (a restart waits for it).
    session_timeout: float = 10.0
    #: The broker holds a live fetch up to this long to fill it: fewer, larger batches cost
    #: less CPU per event at a fleet's steady trickle, for up to this much more alert delay
    #: (bench/fetch_wait.py); 0: answered as soon as a record is there.
    fetch_wait_s: float = 0.1
    say: Any = None  # callable(str) for status lines; default: stderr
    #: Serve Prometheus /metrics on this port (None: off; 0: a free port).
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    #: past this many runs, /metrics details only the runs with an alert (`Limits`)
    metrics_detailed_runs: int = Limits.detailed_runs
    #: TLS / SASL for every client: the Faust app's, the live and the rebuild consumers'.
    security: KafkaSecurity = PLAINTEXT
    #: Checkpoint each live partition this often, or after this many events (0: never).
    #: A stop or a rebalance hands partitions over checkpointed whatever the interval; it
    #: bounds what a crash costs (10 s: less, for three times the checkpoint CPU,
    #: docs/kubernetes.md)
    checkpoint_every_s: float = 30.0
    checkpoint_every_events: int = 1_000_000
    #: pickle checkpoints in a forked child while the live path goes on (`snapshot.py`),
    #: where the platform can fork; off (`--no-checkpoint-fork`), a checkpoint is made in
    #: place between polls and the live path waits for it (1.2 s at 5,000 runs:
    #: bench/checkpoint.py)
    checkpoint_fork: bool = CAN_FORK
    #: tell the fleet stage what it judges (`runwatch.stream.fleet.feed`); off when the
    #: config turns `shared_cause` off
    fleet_feed: bool = True
    #: run the fleet stage too (`fleet_stage.py`): the group of every worker's stage gives
    #: it to one of them
    fleet_stage: bool = True

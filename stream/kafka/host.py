"""What faust-streaming hosts of `runwatch worker`, and what it does not: the one place that
says so.

Faust hosts the worker process: its life cycle and signals (`faust.Worker`: SIGTERM and
Ctrl-C stop it cleanly, the stop hands partitions over through `on_before_shutdown`), the
task that runs the consuming loop, and the wall-clock timer that ticks the rules every
`tick_s`.

Faust does not host the producers: what a partition publishes -- alerts, dead letters, run
views, checkpoints -- goes out in transactions of an aiokafka producer of that partition's
own (`publish.py`), whose epoch fences the partition's previous owner. Faust's producer has
per-id transactional producers (`begin_transaction(transactional_id)`, the ids named after
the partition by `transactional_id_format`), but its `begin_transaction` and
`commit_transaction` catch `ProducerFenced` and every other error and only log them: a
fenced worker would go on as if it had published, its output silently lost, never knowing
to stop judging the partition. It also keeps those producers in a dict shared by every app
of the process. So the worker owns its producers, and the app starts no producer of its
own (`enable_kafka_producer`).

Faust does not host the per-event path, the state or the group: events come through the one
consuming loop (`consume.py`) from a plain aiokafka consumer in the worker's group, a
partition's batch at a time (Faust's own stream path -- `agent` + `stream.take_events` --
spends most of its time in its per-message machinery: bench/worker.py measures both);
the app starts no Faust consumer at all (it would subscribe to nothing and crash); the rules'
state is not in Faust tables but in checkpoints on a compacted topic of our own
(`checkpoints.py` says why); group membership and assignment are the consuming loop's
(`consume.py`). Faust's exactly-once processing (`processing_guarantee="exactly_once"`) is
driven by its own consumer's commit cycle, which the worker does not run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from typing import Any

import faust

from runwatch.stream.collector import large_blocks_returned, tuned_for_consuming
from runwatch.stream.exceptions import WorkerStartFailed
from runwatch.stream.kafka import clients
from runwatch.stream.kafka.admin import ensure_topics
from runwatch.stream.kafka.fleet_members import follow
from runwatch.stream.kafka.fleet_stage import FleetStageRole
from runwatch.stream.kafka.settings import WorkerSettings
from runwatch.stream.kafka.worker import StreamWorker
from runwatch.stream.rules.shared_cause import judged

#: Faust's data directory of a worker: `runwatch-worker-PID-...` in the temp directory.
DATADIR_PREFIX = "runwatch-worker-"


def build_app(worker: StreamWorker, datadir: str) -> faust.App:
    """The Faust app hosting `worker` (and publishing for it)."""
    s = worker.settings
    app = faust.App(
        s.app_id,
        broker=f"kafka://{s.bootstrap}",
        broker_credentials=clients.faust_credentials(s.security),
        value_serializer="raw",
        key_serializer="raw",
        web_enabled=False,
        datadir=datadir,
        topic_partitions=s.partitions,
        topic_disable_leader=True,
    )
    # No Faust consumer at all: it would subscribe to nothing and crash. No Faust producer:
    # the worker's partitions each have their own (the module's docstring says why).
    app.boot_strategy.enable_kafka_consumer = False
    app.boot_strategy.enable_kafka_producer = False
    app.task(worker.consume)
    if s.fleet_feed and judged(s.config):  # the stage's decisions: incident.fleet stamped

        async def members() -> None:
            await follow(worker.kafka, worker.topics, worker.membership)

        app.task(members)
    if s.fleet_stage and judged(s.config):  # one worker's stage judges, the others stand by
        stage = FleetStageRole(worker.kafka, worker.topics, s.app_id, s.config, say=worker.say,
                               session_timeout=s.session_timeout)  # fmt: skip
        if worker.metrics is not None:  # the open fleet incidents, where this one judges
            worker.metrics.collector.add_fleet(stage.fleet)

        async def fleet() -> None:  # (Faust hands a task that takes an argument the app)
            await stage.run()

        app.task(fleet)

    async def tick() -> None:
        await worker.tick(time.time())

    app.timer(s.tick_s, on_leader=False)(tick)

    async def on_shutdown(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
        await worker.shutdown()

    app.on_before_shutdown.connect(on_shutdown)
    worker.app = app
    return app


async def prepare(worker: StreamWorker) -> None:
    """Create the topics before anything subscribes (so they get our settings), and start
    the worker's /metrics."""
    s, topics = worker.settings, worker.topics
    counts = await ensure_topics(s.bootstrap, topics, s.partitions, security=s.security)
    worker.checkpointing.store.partitions = counts.get(topics.checkpoints) or 1
    if worker.metrics is not None:
        await worker.metrics.start()
        worker.say(f"serving /metrics on port {worker.metrics.server.port}")
    worker.say(f"consuming {topics.events} ({counts.get(topics.events)} partitions) as group "
               f"{s.app_id}; alerts to {topics.alerts}")  # fmt: skip


def sweep_datadirs(root: str | None = None) -> list[str]:
    """Remove the data directories of workers that are gone (killed with SIGKILL, a worker
    cannot clean up after itself); those of live processes stay. Returns what went."""
    root = root or tempfile.gettempdir()
    gone = []
    for entry in os.scandir(root):
        name = entry.name
        if not name.startswith(DATADIR_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        pid = name[len(DATADIR_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        gone.append(entry.path)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def run(settings: WorkerSettings, *, log_level: str = "warning") -> int:
    """Run a worker until SIGTERM / Ctrl-C (Faust's `Worker` handles the signals); the exit
    status. Raises WorkerStartFailed when Kafka cannot be reached to create the topics."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    sweep_datadirs()
    datadir = tempfile.mkdtemp(prefix=f"{DATADIR_PREFIX}{os.getpid()}-")
    try:
        worker = StreamWorker(settings)
        app = build_app(worker, datadir)
        try:
            loop.run_until_complete(asyncio.wait_for(prepare(worker), 60))
        except Exception as err:
            why = settings.security.scrub(f"{type(err).__name__}: {err}")
            raise WorkerStartFailed(f"cannot reach Kafka at {settings.bootstrap}: {why}") from None
        runner = faust.Worker(app, loop=loop, loglevel=log_level.upper(), quiet=True,
                              redirect_stdouts=False)  # fmt: skip
        runner.spinner = None  # no terminal escape codes in logs
        large_blocks_returned()  # freed fetches and checkpoints leave no resident holes
        try:
            with tuned_for_consuming():
                runner.execute_from_commandline()
        except SystemExit as done:
            return int(done.code or 0)
        return 0
    finally:
        shutil.rmtree(datadir, ignore_errors=True)

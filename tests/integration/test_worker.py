"""`runwatch worker` against the real broker: end to end, kill -9 and restart, two workers
splitting the runs, and emitters whose clocks are two minutes off.

Workers run as subprocesses (`runwatch worker ...`), each test with its own topic prefix and
consumer group, small thresholds (heartbeat_lost.timeout = 3 s) and short incidents played
in real time. Every test stops the workers it started.
"""

from __future__ import annotations

import os
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from helpers import group_committed, http_get, make_event, terminate

from runwatch.dev.broker import free_port
from runwatch.emitters import Emitter
from runwatch.emitters.topics import BATCH_HEADER
from runwatch.stream import checkpoint
from runwatch.stream.alerts import transition_id
from runwatch.stream.kafka.checkpoints import PENDING, checkpoint_key

pytestmark = pytest.mark.integration

RUNWATCH = str(Path(sys.executable).with_name("runwatch"))
RULES = """\
[rules.heartbeat_lost]
timeout = 3
[rules.zero_reward]
steps = 2
"""
BEAT = 0.5
SILENCE = 5.0  # > timeout 3 + grace 0.5 + tick 0.5, with margin
#: how long past a condition's due time a test waits for it (a loaded 2-core machine)
LONG = 90.0


class WorkerProcess:
    """One `runwatch worker` subprocess and the status lines it writes on stderr."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        group: str,
        config: Path,
        parts: int,
        metrics_port: int | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        cmd = [RUNWATCH, "worker", "--kafka", bootstrap, "--topic-prefix", prefix]
        cmd += ["--app-id", group, "--config", str(config), "--partitions", str(parts), *extra]
        if metrics_port is not None:
            cmd += ["--metrics-port", str(metrics_port)]
        self.metrics_port = metrics_port
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name="worker-stderr")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())

    @property
    def name(self) -> str:
        return f"{os.uname().nodename}/{self.proc.pid}"

    def live(self) -> set[int]:
        """Partitions of the latest assignment, once all of them are live."""
        assigned: set[int] | None = None
        live: set[int] = set()
        for line in self.lines:
            if m := re.search(r"assigned partitions \[([\d, ]*)\]", line):
                assigned = {int(x) for x in m.group(1).split(",") if x.strip()}
                live &= assigned
            elif m := re.search(r"live on partitions \[([\d, ]*)\]", line):
                live |= {int(x) for x in m.group(1).split(",") if x.strip()}
        return live if assigned is not None and live == assigned else set()

    def wait_live(self, timeout: float = 60) -> set[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if parts := self.live():
                return parts
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("worker not live:\n" + "\n".join(self.lines[-30:]))

    def readyz(self) -> tuple[int, str] | None:
        """(status, reason) from the worker's /readyz; None while nothing listens yet."""
        assert self.metrics_port is not None
        answer = http_get(self.metrics_port, "/readyz")
        return None if answer is None else (answer[0], answer[1].strip())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def stop(self) -> None:
        terminate(self.proc)
        self._close()


class Setup:
    """A test's topics, group, config, and the workers it started."""

    def __init__(self, bootstrap: str, tmp: Path) -> None:
        self.bootstrap = bootstrap
        self.prefix = f"t{uuid.uuid4().hex[:10]}."
        self.group = f"rw-{uuid.uuid4().hex[:10]}"
        self.config = tmp / "rules.toml"
        self.config.write_text(RULES)
        self.workers: list[WorkerProcess] = []

    @property
    def events(self) -> str:
        return f"{self.prefix}runwatch.events"

    def worker(
        self, partitions: int = 2, metrics_port: int | None = None, *extra: str
    ) -> WorkerProcess:
        w = WorkerProcess(
            self.bootstrap, self.prefix, self.group, self.config, partitions, metrics_port,
            extra,
        )  # fmt: skip
        self.workers.append(w)
        return w

    def emitter(self, run: str) -> Emitter:
        return Emitter(run=run, component="trainer", kafka=self.bootstrap, topic=self.events,
                       heartbeat=False)  # fmt: skip

    def records(self, topic: str) -> list[Any]:
        """Every record on `<prefix>topic` now, in partition order (checkpoints included:
        records up to 64 MiB)."""
        from kafka import KafkaConsumer, TopicPartition

        name = f"{self.prefix}{topic}"
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            max_partition_fetch_bytes=64 << 20,
            isolation_level="read_committed",
        )  # as every consumer reads
        try:
            parts = consumer.partitions_for_topic(name) or set()
            tps = [TopicPartition(name, p) for p in sorted(parts)]
            if not tps:
                return []
            consumer.assign(tps)
            consumer.seek_to_beginning()
            ends = consumer.end_offsets(tps)
            out = []
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                for records in consumer.poll(timeout_ms=200).values():
                    out += records
            return out
        finally:
            consumer.close()

    def read(self, topic: str) -> list[tuple[dict[str, Any], dict[str, bytes]]]:
        """Everything on `<prefix>topic` now: (value, headers) in partition order."""
        return [(orjson.loads(r.value), dict(r.headers or [])) for r in self.records(topic)]

    def committed(self, partitions: int) -> dict[int, list[str]]:
        """Once the test's group has committed every events record: a worker commits its
        offsets in the transaction that publishes what it made of them, so all it will ever
        publish for them is on the output topics then (the rows by partition)."""
        return group_committed(self.bootstrap, self.group, self.events, partitions)

    def checkpoints(self) -> dict[int, bytes]:
        """The newest checkpoint of each events partition this test's group stored."""
        out = {}
        for r in self.records("runwatch.checkpoints"):
            if r.key is not None and r.key.startswith(f"{self.group}|".encode()):
                out[int(r.key.rsplit(b"|", 1)[1])] = r.value
        return out

    def wait_checkpoint(self, partition: int, timeout: float = 30) -> bytes:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (found := self.checkpoints().get(partition)) is not None:
                return found
            time.sleep(0.3)
        raise AssertionError(f"no checkpoint of partition {partition}")

    def wait_alerts(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 30
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            alerts = [a for a, _ in self.read("runwatch.alerts")]
            if done(alerts) or time.monotonic() > deadline:
                return alerts
            time.sleep(0.3)


@pytest.fixture
def setup(kafka_broker: str, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(kafka_broker, tmp_path)
    try:
        yield s
    finally:
        for w in s.workers:
            w.stop()


class Beater:
    """A process's heartbeats, which the test can stop (the process hangs or dies)."""

    def __init__(self, em: Emitter) -> None:
        self.em = em
        self.on = threading.Event()
        self.sent = 0  # heartbeats emitted
        self._sent_changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-beater")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.on.is_set():
                self.em.emit("heartbeat")
                with self._sent_changed:
                    self.sent += 1
                    self._sent_changed.notify_all()
            self._stop.wait(BEAT)

    def wait_sent(self, more: int, timeout: float = 60) -> None:
        """Until `more` heartbeats more than now were emitted (the beats flow again)."""
        with self._sent_changed:
            target = self.sent + more
            sent = self._sent_changed.wait_for(lambda: self.sent >= target, timeout)
            assert sent, f"{self.sent} heartbeats emitted, waited for {target}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def sequence(alerts: list[dict[str, Any]], run: str) -> list[tuple[str, str]]:
    return [(a["rule"], a["state"]) for a in alerts if a["run"] == run]


def assert_alternating_with_deterministic_ids(alerts: list[dict[str, Any]]) -> None:
    by_key: dict[str, list[dict[str, Any]]] = {}
    for a in alerts:
        by_key.setdefault(a["key"], []).append(a)
    for key, transitions in by_key.items():
        assert [a["id"] for a in transitions] == [
            transition_id(key, n) for n in range(1, len(transitions) + 1)
        ], f"{key}: a transition lost or repeated"
        states = [a["state"] for a in transitions]
        assert states == [("firing", "resolved")[n % 2] for n in range(len(states))], key


#: The incident both the plain and the crash test play: zero reward, a process that goes
#: silent, comes back, reward recovers, silent again.
EXPECTED = [
    ("zero_reward", "firing"),
    ("heartbeat_lost", "firing"),
    ("heartbeat_lost", "resolved"),
    ("zero_reward", "resolved"),
    ("heartbeat_lost", "firing"),
]


def play_incident(
    s: Setup, runs: str | list[str], crash: Callable[[], None], restart: Callable[[], None]
) -> None:
    """The incident of EXPECTED in each of `runs` at once; `crash` once every run's
    heartbeat_lost fired, `restart` while the trainers are back."""
    names = [runs] if isinstance(runs, str) else runs
    emitters = [s.emitter(run) for run in names]
    beaters = [Beater(em) for em in emitters]

    def until(count: int) -> None:  # every run's first `count` transitions published
        alerts = s.wait_alerts(lambda a: all(len(sequence(a, run)) >= count for run in names),
                               SILENCE + LONG)  # fmt: skip
        for run in names:
            assert sequence(alerts, run)[:count] == EXPECTED[:count], (run, sequence(alerts, run))

    def beating(on: bool) -> None:
        for beater in beaters:
            (beater.on.set if on else beater.on.clear)()

    # each step waits for what the one before made, never for a while, and fails if it does
    # not come: on a loaded machine a 10 s wait ran out and the play went on, out of order
    try:
        for em in emitters:
            em.emit("run.started")
            em.emit("reward", step=0, mean=0.0)
            em.emit("reward", step=1, mean=0.0)
        beating(True)
        until(1)  # zero_reward fired: the runs' events are applied
        beating(False)  # the trainers hang
        until(2)  # heartbeat_lost fired
        crash()
        beating(True)  # they are back
        for beater in beaters:
            beater.wait_sent(2)  # (with no worker running, where `crash` stopped it)
        restart()
        until(3)  # heartbeat_lost resolved
        for em in emitters:
            em.emit("reward", step=2, mean=1.0)
        until(4)  # zero_reward resolved
        beating(False)  # and hang again
        until(5)
    finally:
        for beater in beaters:
            beater.close()
        for em in emitters:
            em.close()


def test_end_to_end_alert_and_dead_letter(setup: Setup) -> None:
    worker = setup.worker()
    worker.wait_live()
    play_incident(setup, "e2e-1", crash=lambda: None, restart=lambda: None)
    alerts = setup.wait_alerts(lambda a: len(a) >= len(EXPECTED))
    assert sequence(alerts, "e2e-1") == EXPECTED
    assert_alternating_with_deterministic_ids(alerts)
    fired = alerts[1]
    assert fired["subject"].startswith("trainer@")
    assert "no heartbeat" in fired["summary"]
    # the lost trainer would explain the zero reward, but that was reported as a root
    # already: an incident never changes its root, so the loss roots one of its own
    numbers = [a["incident"]["id"].rsplit("|", 1)[1] for a in alerts]
    assert numbers == ["1", "2", "2", "1", "3"]
    assert {a["incident"]["role"] for a in alerts} == {"root"}
    assert [a["incident"]["open"] for a in alerts[1:4]] == [True, False, False]
    # the hang asked the run's processes for their stacks where emitters read the breaker
    views = [v for v, _ in setup.read("runwatch.breaker") if v["run"] == "e2e-1"]
    asked = [v["stacks"]["request"] for v in views if "stacks" in v]
    assert asked[:1] == ["incident|e2e-1|2"], views
    # an invalid event lands on the dead-letter topic with its reason
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=setup.bootstrap)
    producer.send(setup.events, b'{"v": 1, "run": "e2e-1"}', key=b"e2e-1")
    producer.flush()
    producer.close()
    deadline = time.monotonic() + 15
    while not (dead := setup.read("runwatch.events.dlq")) and time.monotonic() < deadline:
        time.sleep(0.3)
    ((letter, _),) = dead
    assert letter["raw"] == '{"v": 1, "run": "e2e-1"}'
    assert "id" in letter["reason"]
    assert letter["topic"] == setup.events
    # and `runwatch alerts` prints them readably
    out = subprocess.run(
        [RUNWATCH, "alerts", "--kafka", setup.bootstrap, "--topic-prefix", setup.prefix],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = out.stdout.splitlines()
    assert len(lines) == len(EXPECTED)
    assert "FIRING" in lines[1]
    assert "heartbeat_lost  run=e2e-1 [trainer@" in lines[1]
    assert lines[1].endswith("(incident 2: root cause)")


def test_a_batch_record_reads_as_its_events_and_a_bad_line_alone_is_dead_lettered(
    setup: Setup,
) -> None:
    """Contract section 8 through a real broker: one run's events sent one per record, and
    another's as one batch record with two bad lines among them, alert alike; each bad line
    is a dead letter of its own, at the batch's offset, its reason naming the line."""
    from kafka import KafkaProducer

    worker = setup.worker(1)
    worker.wait_live()
    now = time.time() - 1

    def zero_rewards(run: str) -> list[bytes]:
        events = [make_event("run.started", now, run=run, total_steps=10)]
        events += [make_event("reward", now, run=run, step=s, mean=0.0) for s in (1, 2)]
        return [orjson.dumps(e) for e in events]

    producer = KafkaProducer(bootstrap_servers=setup.bootstrap)
    try:
        for value in zero_rewards("single-1"):
            producer.send(setup.events, value, key=b"single-1")
        good = zero_rewards("batch-1")
        lines = [good[0], good[1], b'{"v": 1, "run": "batch-1"}', good[2], b"[]"]
        producer.send(setup.events, b"\n".join(lines), key=b"batch-1",
                      headers=[BATCH_HEADER])  # fmt: skip
        producer.flush(30)
    finally:
        producer.close(10)
    alerts = setup.wait_alerts(lambda a: len(a) >= 2)
    assert sequence(alerts, "single-1") == sequence(alerts, "batch-1") == [
        ("zero_reward", "firing")
    ]  # fmt: skip
    deadline = time.monotonic() + 15
    while len(dead := setup.read("runwatch.events.dlq")) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    letters = [letter for letter, _ in dead]
    assert [(x["raw"], x["reason"].split(":")[0]) for x in letters] == [
        ('{"v": 1, "run": "batch-1"}', "line 3 of 5 of a batch"), ("[]", "line 5 of 5 of a batch")
    ]  # fmt: skip
    assert len({(x["partition"], x["offset"]) for x in letters}) == 1


def test_kafka_lag_tools_show_the_worker_group_lag(setup: Setup) -> None:
    """Kafka's own kafka-consumer-groups --describe shows the worker's group, each events
    partition with its committed offset and a lag that falls to 0 once it is caught up."""

    worker = setup.worker(2)
    worker.wait_live()
    backlog(setup, 2_000)
    rows = setup.committed(2)
    assert sorted(rows) == [0, 1], rows
    for cols in rows.values():  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
        assert cols[0] == setup.group
        assert int(cols[3]) > 0, rows
        assert cols[3] == cols[4], rows
        assert cols[5] == "0", rows


def partition_of(run: str, partitions: int) -> int:
    from kafka.partitioner.default import murmur2

    return (murmur2(run.encode()) & 0x7FFFFFFF) % partitions


def _damaged(data: bytes) -> bytes:
    return (
        data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1 :]
    )


def _older(data: bytes) -> bytes:
    return data[:4] + struct.pack(">H", checkpoint.FORMAT - 1) + data[6:]


@pytest.mark.parametrize(
    ("spoil", "said"),
    [(None, "from the checkpoint at offset"), (_damaged, "checkpoint not used (damaged"),
     (_older, "checkpoint not used (format version")],
    ids=["checkpoint", "damaged-checkpoint", "older-checkpoint"],
)  # fmt: skip
def test_kill_9_and_restart_loses_and_repeats_no_transition(
    setup: Setup, spoil: Callable[[bytes], bytes] | None, said: str
) -> None:
    """Killed between two checkpoints in the middle of the incident, restarted: the alert
    sequence is the uninterrupted one. From the checkpoint it re-reads only the tail; from a
    checkpoint it cannot use (damaged, an older format) it rebuilds the whole partition."""
    first = setup.worker(2, None, "--checkpoint-every", "1")
    first.wait_live()
    run = "crash-1"
    p = partition_of(run, 2)
    state: dict[str, WorkerProcess] = {}

    def crash() -> None:
        setup.wait_checkpoint(p)
        first.kill()
        if spoil is not None:  # the newest checkpoint on the topic is one it cannot use
            from kafka import KafkaProducer

            producer = KafkaProducer(bootstrap_servers=setup.bootstrap, max_request_size=64 << 20)
            key = checkpoint_key(setup.group, setup.events, p)
            producer.send(f"{setup.prefix}runwatch.checkpoints", key=key,
                          value=spoil(setup.checkpoints()[p]), partition=p)  # fmt: skip
            producer.flush(30)
            producer.close(10)

    def restart() -> None:
        state["second"] = w = setup.worker()
        w.wait_live()
        assert any("rebuilt from" in line for line in w.lines)

    play_incident(setup, run, crash=crash, restart=restart)
    setup.wait_alerts(lambda a: len(a) >= len(EXPECTED))
    setup.committed(2)  # a repeated transition is on the topic by now
    alerts = [a for a, _ in setup.read("runwatch.alerts")]
    print("\n".join(state["second"].lines))  # shown if it fails
    for a in alerts:
        print(a["id"], a["rule"], a["state"], a["ts"])
    assert sequence(alerts, run) == EXPECTED
    assert_alternating_with_deterministic_ids(alerts)
    # the resolve made while no worker ran was published by the restarted one
    rebuilt = next(line for line in state["second"].lines if "rebuilt from" in line)
    assert "1 missing alert transitions published" in rebuilt
    (line,) = [x for x in state["second"].lines if x.startswith(f"runwatch worker: partition {p}:")]
    assert said in line


def covered(data: bytes) -> int:
    """The offset a checkpoint covers up to (one this test's worker wrote: trusted)."""
    body = data[checkpoint._HEAD.size :]
    state = pickle.loads(zstandard.ZstdDecompressor().decompress(body))
    return int(state["position"]["offset"])


def test_a_takeover_does_not_read_again_the_dead_letters_its_checkpoint_covers(
    setup: Setup,
) -> None:
    """A flood of invalid events, dead-lettered and checkpointed, then a SIGKILL: the
    successor reads the output topics from where they ended when the checkpoint was made,
    not the flood again, and publishes the letter of a record that came after the kill, once."""
    from kafka import KafkaProducer

    flood = 500
    first = setup.worker(1, None, "--checkpoint-every", "1")
    first.wait_live()
    producer = KafkaProducer(bootstrap_servers=setup.bootstrap)

    def send(*values: bytes) -> None:
        for value in values:
            producer.send(setup.events, value, key=b"flood")
        producer.flush(30)

    def checkpointed(offset: int) -> None:
        deadline = time.monotonic() + 60
        while covered(setup.wait_checkpoint(0)) != offset:
            assert time.monotonic() < deadline, f"no checkpoint at offset {offset}"
            time.sleep(0.3)

    try:
        send(*(b"not json %d" % i for i in range(flood)))
        checkpointed(flood)
        deadline = time.monotonic() + 60
        while len(setup.records("runwatch.events.dlq")) < flood:
            assert time.monotonic() < deadline, "the flood not dead-lettered"
            time.sleep(0.3)
        # a checkpoint made after the flood's letters are on the topic (its ends cover them)
        send(orjson.dumps({"v": 1, "id": "h1", "ts": time.time(), "run": "flood",
                           "kind": "heartbeat", "src": {"component": "trainer", "host": "h",
                                                           "pid": 1}}))  # fmt: skip
        checkpointed(flood + 1)
        first.kill()
        send(b"after the kill")
    finally:
        producer.close(10)
    second = setup.worker(1)
    second.wait_live()
    deadline = time.monotonic() + 30
    while len(setup.records("runwatch.events.dlq")) < flood + 1:
        assert time.monotonic() < deadline, "the letter after the kill not published"
        time.sleep(0.3)
    setup.committed(1)  # a repeated letter is on the topic by now
    offsets = [orjson.loads(r.value)["offset"] for r in setup.records("runwatch.events.dlq")]
    assert offsets == [*range(flood), flood + 1], offsets[-5:]
    (line,) = [x for x in second.lines if x.startswith("runwatch worker: partition 0:")]
    assert f"from the checkpoint at offset {flood + 1} " in line, second.lines
    rebuilt = next(x for x in second.lines if "rebuilt from" in x)
    assert "(0 alert and dead-letter records read)" in rebuilt, rebuilt


def test_events_written_in_transactions_are_taken_over(setup: Setup) -> None:
    """An exactly-once pipeline writes the events: each transaction's commit marker takes an
    offset no consumer gets, the partition's last one here. A worker that takes the
    partition over reads to its end past it and goes live, instead of waiting for ever for a
    record at that offset; what it read alerts as usual."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    first = setup.worker(1, None, "--checkpoint-every", "0")
    first.wait_live()

    async def write() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=setup.bootstrap,
                                    transactional_id=f"pipeline-{uuid.uuid4().hex}")  # fmt: skip
        await producer.start()
        try:
            async with producer.transaction():
                for step, loss in ((1, 0.5), (2, "NaN")):
                    value = {"v": 1, "id": f"t{step}", "ts": time.time(), "run": "txn-1",
                             "kind": "step.metrics", "step": step, "metrics": {"loss": loss},
                             "src": {"component": "trainer", "host": "h", "pid": 1}}  # fmt: skip
                    raw = orjson.dumps(value).replace(b'"NaN"', b"NaN")
                    await producer.send_and_wait(setup.events, raw, key=b"txn-1")
        finally:
            await producer.stop()

    asyncio.run(write())
    alerts = setup.wait_alerts(lambda a: len(a) >= 1)
    assert sequence(alerts, "txn-1") == [("non_finite_metric", "firing")]
    first.stop()
    second = setup.worker(1)
    second.wait_live(60)
    rebuilt = next(x for x in second.lines if "rebuilt from" in x)
    assert "0 missing alert transitions published" in rebuilt, second.lines


def test_a_rebalance_mid_incident_loses_and_repeats_no_transition(setup: Setup) -> None:
    """A second worker joins while incidents run in both partitions: the partition that moves
    is taken over from the first worker's checkpoint, and both sequences stay whole."""
    first = setup.worker(2, None, "--checkpoint-every", "1")
    first.wait_live()
    runs = [rs[0] for rs in _runs_per_partition(2, 1).values()]
    state: dict[str, WorkerProcess] = {}

    def join() -> None:
        for p in (0, 1):
            setup.wait_checkpoint(p)
        state["second"] = second = setup.worker(2, None, "--checkpoint-every", "1")
        wait_split(first, second, {0, 1})

    play_incident(setup, runs, crash=join, restart=lambda: None)
    setup.wait_alerts(lambda a: len(a) >= 2 * len(EXPECTED))
    setup.committed(2)
    alerts = [a for a, _ in setup.read("runwatch.alerts")]
    for run in runs:
        assert sequence(alerts, run) == EXPECTED, run
    assert_alternating_with_deterministic_ids(alerts)
    said = state["second"].lines
    assert any("from the checkpoint at offset" in x for x in said), "\n".join(said[-30:])


def test_a_partition_that_moves_starts_from_its_old_owner_s_handover(setup: Setup) -> None:
    """A worker joins between two checkpoints: on the revoke, the first promises a
    checkpoint of each partition with something new and rejoins; once the assignment says
    which moved, it keeps the promise. The newcomer starts from that checkpoint and
    re-reads nothing, and no promise is left open on the topic."""
    first = setup.worker(2, None, "--checkpoint-every", "0")  # none due meanwhile
    first.wait_live()
    backlog(setup, 2_000)
    setup.committed(2)
    second = setup.worker(2, None, "--checkpoint-every", "0")
    _, moved = wait_split(first, second, {0, 1})
    (p,) = moved
    said = second.lines
    assert any(f"partition {p}: from the checkpoint at offset" in x for x in said), said
    rebuilt = next(x for x in said if "rebuilt from" in x)
    assert "rebuilt from 0 records (0 events applied)" in rebuilt, said
    assert_promises_kept(setup)


def assert_promises_kept(setup: Setup) -> None:
    """The revoke promised handovers on the real topic, and each promise was kept: a
    PENDING marker is followed by its partition's checkpoint or a SETTLED marker."""
    open_: dict[int, int] = {}  # events partition -> offset of its open promise
    words = []
    for r in setup.records("runwatch.checkpoints"):
        key = r.key or b""
        if key.startswith(b"handover|" + f"{setup.group}|".encode()):
            p = int(key.rsplit(b"|", 1)[1])
            words.append((p, r.value))
            if r.value == PENDING:
                open_.setdefault(p, r.offset)
            else:
                open_.pop(p, None)
        elif key.startswith(f"{setup.group}|".encode()):
            open_.pop(int(key.rsplit(b"|", 1)[1]), None)
    assert any(word == PENDING for _, word in words), words
    assert not open_, f"promises left open: {open_}"


def _runs_per_partition(partitions: int, per: int) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(v) < per for v in out.values()):
        run = f"split-{i}"
        p = partition_of(run, partitions)
        if len(out[p]) < per:
            out[p].append(run)
        i += 1
    return out


def test_two_workers_split_the_runs(setup: Setup) -> None:
    a = setup.worker(partitions=4)
    a.wait_live()
    b = setup.worker(partitions=4)
    pa, _ = wait_split(a, b)
    runs = _runs_per_partition(4, 2)
    emitters = [setup.emitter(run) for rs in runs.values() for run in rs]
    try:
        for em in emitters:
            em.emit("reward", step=0, mean=0.0)
            em.emit("reward", step=1, mean=0.0)
        for em in emitters:
            em.flush(10)
    finally:
        for em in emitters:
            em.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = setup.read("runwatch.alerts")
        if len(got) >= len(emitters):
            break
        time.sleep(0.3)
    owner = {p: (a.name if p in pa else b.name) for p in range(4)}
    by_run: dict[str, set[str]] = {}
    for alert, headers in got:
        by_run.setdefault(alert["run"], set()).add(headers["runwatch-worker"].decode())
    assert sorted(by_run) == sorted(r for rs in runs.values() for r in rs)
    for p, rs in runs.items():
        for run in rs:
            assert by_run[run] == {owner[p]}, f"{run} (partition {p})"
    assert {w for ws in by_run.values() for w in ws} == {a.name, b.name}


def wait_split(
    a: WorkerProcess, b: WorkerProcess, every: set[int] | None = None
) -> tuple[set[int], set[int]]:
    """The partitions each of two workers is live on, once they split all (four)."""
    every = {0, 1, 2, 3} if every is None else every
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pa, pb = a.live(), b.live()
        if pa and pb and not (pa & pb) and pa | pb == every:
            return pa, pb
        time.sleep(0.2)
    raise AssertionError(f"no split: {a.lines[-5:]} {b.lines[-5:]}")


def backlog(setup: Setup, n: int) -> None:
    """`n` heartbeats of 200 runs (so every partition gets some) on the events topic."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=setup.bootstrap, linger_ms=20)
    try:
        now = time.time()
        for i in range(n):
            run = f"r{i % 200}"
            value = {"v": 1, "id": f"b{i}", "ts": now, "run": run, "kind": "heartbeat",
                     "src": {"component": "trainer", "host": "h", "pid": 1}}  # fmt: skip
            producer.send(setup.events, key=run.encode(), value=orjson.dumps(value))
        producer.flush(60)
    finally:
        producer.close(10)


def test_a_dead_worker_s_partitions_go_to_the_survivors_who_keep_their_own(
    setup: Setup,
) -> None:
    """Three workers split six partitions; one is killed. The group gives its partitions to
    the two survivors, one each, and each keeps what it held: nothing moves between the
    survivors (each move a handover), and neither takes the whole of the dead one's share
    to re-read. (aiokafka's sticky assignor kept a member's assignment in class attributes,
    shared by the worker's events and fleet stage consumers: the group then dealt all six
    out anew, round robin by member id.)"""
    workers = [setup.worker(6, None, "--session-timeout", "6") for _ in range(3)]
    held: dict[int, set[int]] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        held = {i: w.live() for i, w in enumerate(workers)}
        if all(len(p) == 2 for p in held.values()) and set().union(*held.values()) == set(range(6)):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no three-way split: {held}")
    workers[0].kill()
    after: dict[int, set[int]] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        after = {i: workers[i].live() for i in (1, 2)}
        if all(len(p) == 3 for p in after.values()) and after[1] | after[2] == set(range(6)):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the survivors did not take over: {after}")
    assert held[1] < after[1], (held, after)
    assert held[2] < after[2], (held, after)


def test_readiness_follows_a_live_rebalance(setup: Setup) -> None:
    """/readyz (the chart's readiness probe): 503 until the partitions are assigned and
    rebuilt, then 200 naming them; when a second worker joins, the first one's answer follows
    the rebalance to the partitions it keeps."""
    a = setup.worker(partitions=4, metrics_port=free_port())
    assert a.wait_live() == {0, 1, 2, 3}
    assert a.readyz() == (200, "live on partitions [0, 1, 2, 3]")
    backlog(setup, 40_000)  # what the second worker rebuilds before it is ready

    b = setup.worker(partitions=4, metrics_port=free_port())
    answers: list[tuple[int, str]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (answer := b.readyz()) is not None:
            answers.append(answer)
            if answer[0] == 200:
                break
        time.sleep(0.05)
    assert answers, "the second worker never answered /readyz"
    assert answers[0][0] == 503, answers[:3]  # it joins the group before it is ready
    first = answers[0][1]
    assert first.startswith(("waiting for a partition assignment", "rebuilding")), first
    assert any(reason.startswith("rebuilding partitions") for _, reason in answers), answers

    pa, pb = wait_split(a, b)
    assert a.readyz() == (200, f"live on partitions {sorted(pa)}")
    assert b.readyz() == (200, f"live on partitions {sorted(pb)}")


SKEWED = textwrap.dedent(
    """
    import sys, time
    import runwatch.emitters.wire as module  # where the emitter reads the clock
    from runwatch.emitters import Emitter

    skew, run, kafka, topic = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    class SkewedClock:
        def __getattr__(self, name):
            return getattr(time, name)

        def time(self):
            return time.time() + skew

    module.time = SkewedClock()
    # one clock per host: each skewed emitter stands for a machine of its own
    em = Emitter(run=run, component="trainer", kafka=kafka, topic=topic, heartbeat=False,
                 host=f"host-{run}")

    def beat(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            em.emit("heartbeat")
            time.sleep(0.5)

    em.emit("run.started")
    beat(4)
    print("silent", time.time(), flush=True)
    time.sleep(float(sys.argv[5]))
    beat(2)
    em.close()
    """
)


def test_emitters_with_clocks_two_minutes_off_raise_neither_false_nor_missed_alerts(
    setup: Setup,
) -> None:
    worker = setup.worker()
    worker.wait_live()
    procs = {
        skew: subprocess.Popen(
            [
                sys.executable,
                "-c",
                SKEWED,
                str(skew),
                f"skew{skew:+.0f}",
                setup.bootstrap,
                setup.events,
                str(SILENCE),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for skew in (-120.0, 0.0, 120.0)
    }
    silent_at = {}
    try:
        for skew, proc in procs.items():
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0
            silent_at[skew] = float(out.split()[1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            with proc:  # its pipe closed (unread when an earlier one failed), and waited
                pass
    alerts = setup.wait_alerts(lambda a: len(a) >= 6, timeout=10)
    time.sleep(1)
    alerts = [a for a, _ in setup.read("runwatch.alerts")]
    for skew, silent in silent_at.items():
        run = f"skew{skew:+.0f}"
        assert sequence(alerts, run) == [
            ("heartbeat_lost", "firing"),
            ("heartbeat_lost", "resolved"),
        ], run
        fired = next(a for a in alerts if a["run"] == run)
        # on the broker's clock: fired ~3 s after the last beat, not 2 minutes off
        assert silent + 2 < fired["ts"] < silent + SILENCE, (run, fired["ts"] - silent)


def test_a_guarded_training_loop_pauses_on_kafka_and_resumes_on_runwatch_resume(
    setup: Setup,
) -> None:
    """The circuit breaker through Kafka: the worker publishes the run view to
    `runwatch.breaker`; the trainer's guard reads its run's partition of it."""
    setup.worker(partitions=2).wait_live()
    run = "breaker-kafka"
    em = setup.emitter(run)
    try:
        guard = em.guard(rules={"zero_reward"}, poll_interval=0.2)
        em.emit("run.started")
        em.emit("reward", step=0, mean=1.0)
        em.emit("reward", step=1, mean=0.0)
        assert em.flush(timeout=30)
        assert not em.should_pause()
        em.emit("reward", step=2, mean=0.0)  # the second zero step: zero_reward fires
        assert em.flush(timeout=30)
        deadline = time.monotonic() + 60
        while not em.should_pause():
            assert time.monotonic() < deadline, f"never paused: {guard.decision}"
            time.sleep(0.05)
        assert [a.rule for a in guard.decision.alerts] == ["zero_reward"]

        done = subprocess.run(
            [RUNWATCH, "resume", run, "--kafka", setup.bootstrap, "--topic-prefix",
             setup.prefix, "--rule", "zero_reward"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "resumed (1 firing alert lifted)" in done.stderr
        assert guard.wait(timeout=60).action == "run"
        assert guard.decision.resumed is not None
        assert guard.decision.resumed.rule == "zero_reward"
    finally:
        em.close(timeout=5)
    # on the topic: the views in order, keyed by the run
    views = [v for v, _ in setup.read("runwatch.breaker") if v["run"] == run]
    assert [len(v["alerts"]) for v in views] == [1, 0]
    assert views[-1]["lifted"] == 1


def test_a_worker_killed_mid_rebuild_leaves_a_checkpoint_its_successor_goes_on_from(
    setup: Setup,
) -> None:
    """A long rebuild stores checkpoints as it goes: killed half-way, its successor re-reads
    only the rest, and still publishes the transitions the first re-read had made (held,
    unpublished, in the checkpoint) -- once."""
    from kafka import KafkaProducer

    run = "gap-1"
    # another run beats until the backlog is under way: the partition's appends have no gap,
    # whose window a re-read would wait on before it judges the silence
    # (`reading.interrupted`); and the backlog's producer is ready before it is needed
    producer = KafkaProducer(bootstrap_servers=setup.bootstrap, linger_ms=20)
    neighbour = setup.emitter("beating-1")
    neighbour.emit("run.started")
    beater = Beater(neighbour)
    beater.on.set()
    em = setup.emitter(run)
    try:  # an incident while no worker runs: heartbeat_lost fires and resolves in the log
        em.emit("run.started")
        for _ in range(4):
            em.emit("heartbeat")
            time.sleep(BEAT)
        time.sleep(SILENCE)
        for _ in range(3):
            em.emit("heartbeat")
            time.sleep(BEAT)
        em.emit("run.finished", status="ok")
        # then a long backlog of runs that end (no silence left to judge), one run after
        # another, each run's events 0.1 ms apart from when its block began: a producer that
        # stalls on a loaded machine leaves no run silent in event time (stamped by the
        # clock, 200 runs beating in turn went silent together in one 3 s stall and raised
        # 400 transitions); the neighbour ends once the backlog is under way
        base = time.time()
        for i in range(150_000):
            if i == 1000:
                beater.close()
                neighbour.emit("run.finished", status="ok")
            k, j = divmod(i, 750)  # run k's j-th event
            if j == 0:
                base = time.time()
            r = f"fill-{k}"
            kind = "run.finished" if j == 749 else "heartbeat"
            value = {"v": 1, "id": f"f{i}", "ts": base + j * 1e-4, "run": r, "kind": kind,
                     "src": {"component": "trainer", "host": "h", "pid": 1}}  # fmt: skip
            if kind == "run.finished":
                value["status"] = "ok"
            producer.send(setup.events, key=r.encode(), value=orjson.dumps(value))
        producer.flush(120)
    finally:
        beater.close()
        em.close()
        neighbour.close()
        producer.close(10)

    first = setup.worker(1, None, "--checkpoint-events", "20000")
    deadline = time.monotonic() + 120
    while not any("checkpoint stored at offset" in x for x in first.lines):
        assert time.monotonic() < deadline, first.lines[-20:]
        assert first.proc.poll() is None, first.lines[-20:]
        time.sleep(0.02)
    first.kill()
    said = next(x for x in first.lines if "checkpoint stored at offset" in x)
    stored = int(said.rsplit(" ", 1)[1])
    assert not any("live on partitions" in x for x in first.lines), "killed too late"
    assert setup.read("runwatch.alerts") == [], "the rebuild published before the kill"

    second = setup.worker(1)
    second.wait_live(120)
    (line,) = [x for x in second.lines if x.startswith("runwatch worker: partition 0:")]
    assert f"from the checkpoint at offset {stored} " in line, second.lines
    setup.committed(1)  # a repeated transition is on the topic by now
    alerts = [a for a, _ in setup.read("runwatch.alerts")]
    assert sequence(alerts, run) == [("heartbeat_lost", "firing"), ("heartbeat_lost", "resolved")]
    assert [a["id"] for a in alerts] == [
        transition_id(alerts[0]["key"], 1),
        transition_id(alerts[0]["key"], 2),
    ]


def test_each_simulated_fault_s_incident_names_its_root_through_the_worker(setup: Setup) -> None:
    """The simulated cluster, live through Kafka and one worker: each fault yields an
    incident whose root is the one replay and serve name (EXPECTED_ROOT)."""
    from runwatch.dev.simulate import EXPECTED_ROOT, FAULTS

    worker = setup.worker(2)
    worker.wait_live()
    faults = [*FAULTS, "slow_but_healthy"]
    cmd = [sys.executable, "-m", "runwatch.cli", "simulate", "--kafka", setup.bootstrap,
           "--topic", setup.events, "--jobs", str(len(faults)), "--seed", "3", "--duration",
           "800", "--speed", "40", "--fault-step", "2"]  # fmt: skip
    cmd += [f"--fault={f}" for f in faults]
    subprocess.run(cmd, check=True, timeout=180, capture_output=True)
    runs = {f"sim-3-job{i:03d}": fault for i, fault in enumerate(faults)}

    def rooted(alerts: list[dict[str, Any]]) -> bool:
        fired = {a["run"] for a in alerts if a["state"] == "firing"}
        return all(run in fired for run, fault in runs.items() if fault in EXPECTED_ROOT)

    alerts = setup.wait_alerts(rooted, timeout=120)
    for run, fault in runs.items():
        mine = [a for a in alerts if a["run"] == run]
        if fault not in EXPECTED_ROOT:
            assert mine == [], (fault, [a["summary"] for a in mine])
            continue
        first = mine[0]["incident"]["id"]
        last = [a for a in mine if a["incident"]["id"] == first][-1]["incident"]
        assert last["root_rule"] == EXPECTED_ROOT[fault][0], (fault, last)

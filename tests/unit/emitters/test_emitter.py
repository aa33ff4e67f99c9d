"""The Emitter without a broker: spool-dir destination, argument checks, heartbeats, spooling
when Kafka is unreachable, the hard disk limit, fork safety and clean shutdown."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from pydantic import ValidationError

from runwatch.dev.broker import free_port
from runwatch.emitters import Emitter, validate
from runwatch.emitters import emitter as emitter_module
from runwatch.emitters.checks import FIELD_CHECKS
from runwatch.emitters.events import KNOWN_KINDS
from runwatch.emitters.spool import Spool

#: Every kind's fields with every optional field set, from its model (`Event.examples`).
SAMPLES: dict[str, dict[str, Any]] = {k: dict(m.examples.full) for k, m in KNOWN_KINDS.items()}


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every event in a spool directory's segments, segment by segment in name order."""
    events = []
    for path in sorted(directory.glob("*.jsonl")):
        events += [json.loads(line) for line in path.read_text().splitlines()]
    return events


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNWATCH_KAFKA", "RUNWATCH_SPOOL", "RUNWATCH_RUN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def emitter(tmp_path: Path) -> Iterator[Emitter]:
    em = Emitter(run="run-1", component="trainer", path=tmp_path, heartbeat=False)
    yield em
    em.close()


def unreachable() -> str:
    """A loopback address nothing listens on."""
    return f"127.0.0.1:{free_port()}"


#: Give up on an unreachable broker quickly, so the tests stay fast.
QUICK = {"bootstrap_timeout_ms": 200}


# --- the file destination ------------------------------------------------------------------


def test_spool_dir_gets_valid_events_for_every_known_kind(tmp_path: Path) -> None:
    em = Emitter(run="run-1", component="rollout", path=tmp_path, rank=2, instance="w-0")
    for kind, fields in SAMPLES.items():
        em.emit(kind, **fields)
    for kind, model in KNOWN_KINDS.items():
        em.emit(kind, **model.examples.minimal)
    em.emit("step.metrics", step=1, metrics={"grad": float("nan"), "tokens": 7, "r": None})
    em.emit("custom.thing", anything=[1, "two", {"three": 3.0}])
    em.close()
    events = read_events(tmp_path)
    for event in events:
        validate(event)
    sent = [*SAMPLES, *SAMPLES, "step.metrics", "custom.thing"]
    assert [e["kind"] for e in events if e["kind"] != "heartbeat"] == [
        k for k in sent if k != "heartbeat"
    ]
    assert any(e.get("dropped_events") == 3 for e in kinds(events, "heartbeat"))
    assert len({e["id"] for e in events}) == len(events)
    assert all(uuid.UUID(e["id"]).version == 4 for e in events)
    assert all(e["run"] == "run-1" and e["v"] == 1 for e in events)
    src = {"component": "rollout", "host": os.uname().nodename, "pid": os.getpid(), "rank": 2,
           "instance": "w-0"}  # fmt: skip
    assert all(e["src"] == src for e in events)
    assert events[-1]["kind"] == "heartbeat"
    assert events[-1]["final"] is True
    step_done = kinds(events, "step.done")[0]
    assert step_done["timing"] == SAMPLES["step.done"]["timing"]
    assert math.isnan(kinds(events, "step.metrics")[-1]["metrics"]["grad"])
    assert abs(step_done["ts"] - time.time()) < 60


def test_emit_converts_numpy_like_scalars(emitter: Emitter, tmp_path: Path) -> None:
    class Scalar:  # what numpy / torch hand over: not JSON, but has .item()
        def item(self) -> int:
            return 7

    emitter.emit("step.done", step=Scalar(), duration_s=1.0)
    emitter.close()
    assert kinds(read_events(tmp_path), "step.done")[0]["step"] == 7


def test_segments_rotate_and_stay_in_order(tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False, segment_bytes=2000)
    for i in range(200):
        em.emit("step.done", step=i)
        if i % 50 == 0:
            em.flush(5)
    em.close()
    assert len(list(tmp_path.glob("*.jsonl"))) > 3
    assert [e["step"] for e in kinds(read_events(tmp_path), "step.done")] == list(range(200))


def test_a_full_queue_spills_in_order(tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False, max_queue=3)
    for i in range(5000):
        em.emit("step.done", step=i)
    em.close()
    assert [e["step"] for e in kinds(read_events(tmp_path), "step.done")] == list(range(5000))


def test_emit_after_close_still_lands_in_the_spool(emitter: Emitter, tmp_path: Path) -> None:
    emitter.close()
    emitter.emit("step.done", step=9)
    assert kinds(read_events(tmp_path), "step.done")[0]["step"] == 9


def test_flush_waits_until_events_are_on_disk(emitter: Emitter, tmp_path: Path) -> None:
    emitter.emit("step.started", step=1)
    assert emitter.flush(timeout=5)
    assert kinds(read_events(tmp_path), "step.started")


# --- bad arguments raise at once -----------------------------------------------------------


@pytest.mark.parametrize("run", ["", "has space", "ünïcode", "x" * 201, "new\nline", "trailing\n"])
def test_bad_run_id_raises(tmp_path: Path, run: str) -> None:
    with pytest.raises(ValueError, match="run id"):
        Emitter(run=run, component="trainer", path=tmp_path)


def test_the_fleet_s_run_id_is_reserved(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="run id '@fleet' is reserved"):
        Emitter(run="@fleet", component="trainer", path=tmp_path)


@pytest.mark.parametrize("component", ["", "Trainer", "has space", "9lives"])
def test_bad_component_raises(tmp_path: Path, component: str) -> None:
    with pytest.raises(ValueError, match="component"):
        Emitter(run="r", component=component, path=tmp_path)


@pytest.mark.parametrize("kind", ["", "Step.done", "step..done", "step.", "step done", 3, None])
def test_bad_kind_raises(emitter: Emitter, kind: Any) -> None:
    with pytest.raises(ValueError, match="kind"):
        emitter.emit(kind, step=1)


def test_unserialisable_field_raises(emitter: Emitter) -> None:
    with pytest.raises(TypeError, match="JSON"):
        emitter.emit("custom.thing", value=object())
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(TypeError, match="JSON"):
        emitter.emit("custom.thing", value=loop)


def test_oversized_event_raises(emitter: Emitter) -> None:
    with pytest.raises(ValueError, match="65536"):
        emitter.emit("custom.blob", data="x" * 65536)
    emitter.emit("custom.blob", data="x" * 60000)  # under the limit: fine


def test_envelope_fields_cannot_be_overridden(emitter: Emitter) -> None:
    with pytest.raises(ValueError, match="envelope"):
        emitter.emit("step.done", step=1, ts=5.0)


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("step.done", {}),
        ("step.done", {"step": "3"}),
        ("step.done", {"step": True}),
        ("step.done", {"step": 1.5}),
        ("run.finished", {"status": "great"}),
        ("trajectory.done", {"traj": "", "status": "ok"}),
        ("inference.stats", {"server": "s", "running": 0, "waiting": 0, "kv_cache_usage": 1.5}),
        ("step.metrics", {"step": 1, "metrics": {"loss": "low"}}),
        ("heartbeat", {"final": "yes"}),
    ],
)
def test_invalid_fields_of_a_known_kind_raise(
    emitter: Emitter, kind: str, fields: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match=f"invalid {kind} event"):
        emitter.emit(kind, **fields)


def test_bad_settings_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        Emitter(run="r", component="trainer", path=tmp_path, kafka="127.0.0.1:9092")
    with pytest.raises(ValueError, match="no run id"):
        Emitter(component="trainer", path=tmp_path)
    with pytest.raises(ValueError, match="heartbeat_interval"):
        Emitter(run="r", component="trainer", path=tmp_path, heartbeat_interval=0)
    with pytest.raises(ValueError, match="max_queue"):
        Emitter(run="r", component="trainer", path=tmp_path, max_queue=0)
    with pytest.raises(ValueError, match="topic"):
        Emitter(run="r", component="trainer", kafka="127.0.0.1:9", topic="no spaces")
    with pytest.raises(ValueError, match="lingr_ms"):
        Emitter(run="r", component="trainer", kafka="127.0.0.1:9", kafka_options={"lingr_ms": 5})
    with pytest.raises(ValueError, match="rank"):
        Emitter(run="r", component="trainer", path=tmp_path, rank="0")  # type: ignore[arg-type]


@pytest.mark.parametrize("example", ["full", "minimal"])
@pytest.mark.parametrize("kind", sorted(KNOWN_KINDS))
def test_cheap_checks_are_never_laxer_than_the_models(kind: str, example: str) -> None:
    """Whatever the cheap check accepts, pydantic must accept on the wire: each field of the
    kind's example (and one more) set to each value, and left out."""
    values: list[Any] = [0, 1, -1, 2**70, 0.5, 1.5, float("nan"), float("inf"), True, False,
                         None, "", "ok", "error", "failed", "x" * 201, "word", [], [1],
                         {}, {"a": 1}, {"a": 1.5}, {"a": None}, {"a": "s"}, {"a": {"b": 1}},
                         {"a": [1]}, {1: 2.0}]  # fmt: skip
    check = FIELD_CHECKS[kind]
    fields = dict(getattr(KNOWN_KINDS[kind].examples, example))
    envelope = {"v": 1, "id": "i", "ts": 1.0, "run": "r", "kind": kind,
                "src": {"component": "trainer"}}  # fmt: skip
    for name in [*SAMPLES[kind], "extra"]:
        for value in values:
            candidate = {**fields, name: value}
            if check(candidate):
                wire = json.loads(json.dumps({**envelope, **candidate}))
                validate(wire)  # raises if the cheap check was too lax
        if name in fields:
            without = {k: v for k, v in fields.items() if k != name}
            if check(without):
                validate({**envelope, **without})
    assert check(fields)


def test_a_field_the_check_once_forgot_is_checked() -> None:
    """The hand-kept checks had no `exit_code` or `dropped_events`: an emitter sent what
    every consumer refused. Made from the models, the checks know every field."""
    assert not FIELD_CHECKS["run.finished"]({"status": "ok", "exit_code": "1"})
    assert not FIELD_CHECKS["heartbeat"]({"dropped_events": "3"})
    envelope = {"v": 1, "id": "i", "ts": 1.0, "run": "r", "src": {"component": "trainer"}}
    with pytest.raises(ValidationError):
        validate({**envelope, "kind": "run.finished", "status": "ok", "exit_code": "1"})


# --- destination from the environment ------------------------------------------------------


def test_env_selects_spool_dir_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNWATCH_SPOOL", str(tmp_path))
    monkeypatch.setenv("RUNWATCH_RUN", "env-run")
    em = Emitter(component="trainer", heartbeat=False)
    assert em.path == tmp_path
    assert em.kafka is None
    em.emit("step.started", step=1)
    em.close()
    assert {e["run"] for e in read_events(tmp_path)} == {"env-run"}


def test_env_kafka_wins_over_spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = unreachable()
    monkeypatch.setenv("RUNWATCH_KAFKA", address)
    monkeypatch.setenv("RUNWATCH_SPOOL", str(tmp_path))
    em = Emitter(run="r", component="trainer", heartbeat=False, kafka_options=QUICK)
    assert em.kafka == address
    assert em.path is None
    em.emit("step.started", step=1)
    em.close()
    # The spool directory holds Kafka's fallback, apart from a file destination's segments.
    assert not list(tmp_path.glob("*.jsonl"))
    assert kinds(read_events(next(tmp_path.glob("kafka-*"))), "step.started")


def test_explicit_arguments_win_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNWATCH_KAFKA", unreachable())
    monkeypatch.setenv("RUNWATCH_RUN", "env-run")
    em = Emitter(run="mine", component="trainer", path=tmp_path, heartbeat=False)
    assert em.kafka is None
    assert em.run == "mine"
    em.close()


# --- heartbeats ----------------------------------------------------------------------------


def test_heartbeats_then_final_on_close(tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat_interval=0.05)
    wait_for(lambda: sum(p.read_bytes().count(b"\n") for p in tmp_path.glob("*.jsonl")) >= 3,
             "three beats written")  # fmt: skip
    em.close()
    beats = kinds(read_events(tmp_path), "heartbeat")
    assert len(beats) >= 3
    assert all("final" not in b for b in beats[:-1])
    assert beats[-1]["final"] is True
    assert all(b["src"]["pid"] == os.getpid() for b in beats)


def test_no_heartbeat_when_disabled(emitter: Emitter, tmp_path: Path) -> None:
    emitter.emit("step.started", step=1)
    emitter.close()
    assert [e["kind"] for e in read_events(tmp_path)] == ["step.started"]


def test_close_is_idempotent_and_leaves_no_threads(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat_interval=0.05)
    assert {t.name for t in set(threading.enumerate()) - before} == {
        "runwatch-sender-trainer",
        "runwatch-heartbeat-trainer",
    }
    em.close()
    em.close()
    assert set(threading.enumerate()) <= before


# --- Kafka unreachable: everything goes to the spool ---------------------------------------


def test_unreachable_kafka_never_raises_and_spools(tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", kafka=unreachable(), spool=tmp_path,
                 heartbeat_interval=0.05, max_queue=50, kafka_options=QUICK)  # fmt: skip
    started = time.perf_counter()
    for i in range(3000):
        em.emit("step.done", step=i)
    assert time.perf_counter() - started < 5  # not one emit waited for the network
    em.close(timeout=1)
    events = read_events(next(tmp_path.glob("kafka-*")))
    assert [e["step"] for e in kinds(events, "step.done")] == list(range(3000))
    assert kinds(events, "heartbeat")[-1]["final"] is True
    assert all(path.name.startswith("events-") and f"-{os.getpid()}-" in path.name
               for path in tmp_path.glob("kafka-*/*.jsonl"))  # fmt: skip
    assert em.dropped == 0


# --- the hard disk limit -------------------------------------------------------------------


def test_hard_limit_drops_and_counts(tmp_path: Path) -> None:
    limit = 20_000
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat_interval=3600,
                 max_spool_bytes=limit)  # fmt: skip
    for i in range(1000):
        em.emit("step.done", step=i, duration_s=1.0)
    em.flush(5)
    dropped = em.dropped
    assert dropped > 0
    em.close()
    events = read_events(tmp_path)
    kept = kinds(events, "step.done")
    assert len(kept) + dropped == 1000
    assert [e["step"] for e in kept] == list(range(len(kept)))  # the newest were dropped
    final = kinds(events, "heartbeat")[-1]
    assert final["final"] is True
    assert final["dropped_events"] == dropped
    heartbeat_bytes = sum(len(json.dumps(b)) + 1 for b in kinds(events, "heartbeat"))
    assert sum(p.stat().st_size for p in tmp_path.glob("*.jsonl")) <= limit + heartbeat_bytes


@pytest.mark.slow
def test_room_made_by_a_reader_is_used_again(tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", path=tmp_path, heartbeat=False,
                 max_spool_bytes=5_000, segment_bytes=1_000)  # fmt: skip
    for i in range(100):
        em.emit("step.done", step=i)
    em.flush(5)
    assert em.dropped > 0
    for path in tmp_path.glob("*.jsonl"):  # the embedded service consumed them
        path.unlink()
    time.sleep(1.1)  # the spool trusts the disk again at most once a second
    em.emit("step.done", step=1000)
    em.close()
    assert [e["step"] for e in kinds(read_events(tmp_path), "step.done")] == [1000]


def test_spool_counts_disk_errors_as_drops(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = Spool(blocker / "spool")
    spool.append(["{}", "{}"])
    assert spool.dropped == 2


def test_segments_of_exited_processes_are_adopted(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # now a pid no process has
    spool = Spool(tmp_path)
    host = spool.prefix.split("-")[1]
    orphan = tmp_path / f"events-{host}-{pid}-0-0000000003.jsonl"
    orphan.write_text('{"a":1}\n{"a":2}\n')
    other_host = tmp_path / f"events-elsewhere-{pid}-0-0000000000.jsonl"
    other_host.write_text('{"b":1}\n')
    with spool.lock:
        assert spool.adopt_orphans() == 1
        backlog = spool.backlog()
    assert [p.name.startswith(spool.prefix) for p in backlog] == [True]
    assert Spool.read(backlog[0]) == ['{"a":1}', '{"a":2}']
    assert not orphan.exists()
    assert spool.size == 16
    assert other_host.exists()  # another host's processes are not ours to judge


# --- fork ----------------------------------------------------------------------------------


def test_forked_child_emits_under_its_own_pid(tmp_path: Path) -> None:
    em = Emitter(run="r", component="rollout", path=tmp_path, heartbeat_interval=0.05)
    em.emit("step.done", step=1)
    pid = os.fork()
    if pid == 0:  # the child: emit, close, leave without running the parent's cleanup
        code = 1
        try:
            em.emit("trajectory.started", traj="from-child")
            em.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    em.emit("step.done", step=2)
    em.close()
    events = read_events(tmp_path)
    child = [e for e in events if e["src"]["pid"] == pid]
    parent = [e for e in events if e["src"]["pid"] == os.getpid()]
    assert [e["traj"] for e in kinds(child, "trajectory.started")] == ["from-child"]
    assert kinds(child, "heartbeat")[-1]["final"] is True
    assert not kinds(parent, "trajectory.started")
    assert [e["step"] for e in kinds(parent, "step.done")] == [1, 2]
    assert kinds(parent, "heartbeat")[-1]["final"] is True
    assert len({e["id"] for e in events}) == len(events)
    names = {p.name for p in tmp_path.glob("*.jsonl")}
    assert any(f"-{pid}-" in n for n in names)
    assert any(f"-{os.getpid()}-" in n for n in names)


def test_forked_child_with_unreachable_kafka_spools_under_its_pid(tmp_path: Path) -> None:
    em = Emitter(run="r", component="rollout", kafka=unreachable(), spool=tmp_path,
                 heartbeat=False, kafka_options=QUICK)  # fmt: skip
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            em.emit("trajectory.started", traj="from-child")
            em.close(timeout=0.5)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    em.close(timeout=0.5)
    events = read_events(next(tmp_path.glob("kafka-*")))
    assert [e["src"]["pid"] for e in kinds(events, "trajectory.started")] == [pid]


def test_a_fork_waits_for_the_sender_to_finish_what_it_is_doing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child inherits every lock as it was at the fork: one the sender held mid-write (a
    log handler's stream, say) would be held in the child for good, and its first log line
    would hang it. So a fork waits until the sender is between two pieces of work."""
    monkeypatch.setattr(emitter_module, "FORK_WAIT_S", 60.0)
    em = Emitter(run="r", component="rollout", path=tmp_path, heartbeat=False)
    held, entered, once = threading.Lock(), threading.Event(), []
    destination = em._sender.destination
    tick = destination.tick

    def busy_tick() -> None:  # the sender's next piece of work holds `held` for a while
        if not once:
            once.append(True)
            with held:
                entered.set()
                time.sleep(0.3)
        tick()

    monkeypatch.setattr(destination, "tick", busy_tick)
    em.emit("trajectory.started", traj="t")  # starts the sender
    assert entered.wait(60)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if held.acquire(timeout=10) else 3)
    _, status = os.waitpid(pid, 0)
    em.close()
    assert os.waitstatus_to_exitcode(status) == 0, "the child inherited the lock held"


def _worker(em: Emitter, n: int) -> None:
    em.emit("trajectory.started", traj=f"worker-{n}")  # no close(): the worker just returns


def test_multiprocessing_fork_workers_deliver_without_close(tmp_path: Path) -> None:
    em = Emitter(run="r", component="rollout", path=tmp_path, heartbeat=False)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_worker, args=(em, n)) for n in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert [w.exitcode for w in workers] == [0, 0]
    em.close()
    started = kinds(read_events(tmp_path), "trajectory.started")
    assert sorted(e["traj"] for e in started) == ["worker-0", "worker-1"]
    assert {e["src"]["pid"] for e in started} == {w.pid for w in workers}


def test_no_destination_keeps_the_events_on_disk_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing variable must not kill a training job at its start."""
    for name in ("RUNWATCH_KAFKA", "RUNWATCH_URL", "RUNWATCH_SPOOL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with caplog.at_level("WARNING", logger="runwatch.emitters"):
        for _ in range(2):
            em = Emitter(run="r", component="trainer", heartbeat=False)
            em.emit("step.done", step=1)
            em.close()
    said = [r.getMessage() for r in caplog.records if "no destination" in r.getMessage()]
    assert len(said) == 1, said
    assert "runwatch spool flush" in said[0]
    unsent = tmp_path / "cache" / "runwatch" / "spool" / "unsent"
    lines = [json.loads(line) for f in sorted(unsent.glob("events-*.jsonl"))
             for line in f.read_text().splitlines()]  # fmt: skip
    assert [e["kind"] for e in lines].count("step.done") == 2


def test_spool_alone_is_a_destination(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNWATCH_KAFKA", "RUNWATCH_URL", "RUNWATCH_SPOOL"):
        monkeypatch.delenv(name, raising=False)
    em = Emitter(run="r", component="trainer", spool=tmp_path, heartbeat=False)
    em.emit("step.done", step=1)
    em.close()
    assert [json.loads(line)["kind"] for f in tmp_path.glob("events-*.jsonl")
            for line in f.read_text().splitlines()] == ["step.done"]  # fmt: skip


def test_a_bad_emit_is_dropped_counted_and_said_once_unless_strict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    em = Emitter(run="r", component="trainer", path=tmp_path, strict=False, heartbeat=False)
    with caplog.at_level("WARNING", logger="runwatch.emitters"):
        em.emit("no.such.kind!", step=1)
        em.emit("step.done", step="three")
        em.emit("step.done", step="four")  # the same kind and fields: not said again
        em.emit("step.done", step=2)
    assert em.refused == 3
    assert em.dropped == 3  # what heartbeats report
    said = [r.getMessage() for r in caplog.records if "dropped a" in r.getMessage()]
    assert len(said) == 2, said
    em.close()
    kinds = [json.loads(line) for f in tmp_path.glob("events-*.jsonl")
             for line in f.read_text().splitlines()]  # fmt: skip
    assert [e.get("step") for e in kinds if e["kind"] == "step.done"] == [2]
    strict = Emitter(run="r", component="trainer", path=tmp_path, strict=True, heartbeat=False)
    with pytest.raises(ValueError, match="step"):
        strict.emit("step.done", step="three")
    strict.close()


def test_a_forked_child_draws_other_event_ids_than_its_parent() -> None:
    """Otherwise a child's events share ids with its parent's next ones, and consumers,
    which apply an id once, drop one of each pair."""
    from runwatch.emitters.wire import _RNG

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(_RNG.getrandbits(128)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        child = int(f.read())
    assert _RNG.getrandbits(128) != child


def test_each_destination_spools_in_a_directory_of_its_own(tmp_path: Path) -> None:
    """Brokers, topic (so the topic prefix) and identity, or the service's URL, pick the
    directory: leftovers are only ever adopted by an emitter with the same destination."""
    from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
    from runwatch.emitters.spool import destination_dir, read_destination
    from runwatch.emitters.where import identity

    def where(kafka: str | None, topic: str = "runwatch.events", url: str | None = None,
              security: KafkaSecurity = PLAINTEXT) -> Path:  # fmt: skip
        return destination_dir(tmp_path, identity(kafka, topic, security, url))

    a = where("b1:9092,b2:9092")
    assert where("b2:9092, b1:9092") == a  # the same brokers, listed otherwise
    assert where("b1:9092,b2:9092", topic="staging.runwatch.events") != a  # another prefix
    assert where("b3:9092") != a
    assert where(None, url="http://h:8787/") == where(None, url="http://h:8787")
    assert where(None, url="http://other:8787") != where(None, url="http://h:8787")
    em = Emitter(run="r", component="trainer", kafka="127.0.0.1:1", spool=tmp_path,
                 heartbeat=False, close_timeout=0.2)  # fmt: skip
    em.emit("step.done", step=1)
    em.close()
    (spooled,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert read_destination(spooled) == {
        "kind": "kafka",
        "bootstrap": "127.0.0.1:1",
        "topic": "runwatch.events",
        "security": "PLAINTEXT",
    }


def test_emit_from_stamps_another_process_and_refuses_a_bad_source(tmp_path: Path) -> None:
    em = Emitter(run="r1", component="watch", path=tmp_path, heartbeat=False, strict=False)
    em.emit_from({"component": "inference", "pid": 7, "host": "10.0.0.2"}, "progress",
                 name="gen", n=1)  # fmt: skip
    em.emit_from({"component": "Not A Word", "pid": 8}, "progress", name="gen", n=2)
    em.emit("progress", name="gen", n=3)
    em.close()
    events = [e for e in read_events(tmp_path) if e["kind"] == "progress"]
    assert [(e["n"], e["src"]) for e in events] == [
        (1, {"component": "inference", "host": "10.0.0.2", "pid": 7}),
        (3, {"component": "watch", "host": events[1]["src"]["host"], "pid": os.getpid()}),
    ]
    assert em.refused == 1
    strict = Emitter(run="r1", component="watch", path=tmp_path, heartbeat=False, strict=True)
    with pytest.raises(ValueError, match="makes invalid events"):
        strict.emit_from({"component": "Not A Word"}, "progress", name="gen", n=1)
    strict.close()

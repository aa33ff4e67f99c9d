"""Checkpoints of a live driver: a restart from one, replaying only the tail, publishes the
same alert sequence as a run that never stopped; anything unusable is refused with a reason
and changes nothing."""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import zstandard

from runwatch.dev.scenarios import SCENARIOS
from runwatch.stream import checkpoint
from runwatch.stream import tracked as tracked_module
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import decode
from runwatch.stream.exceptions import CheckpointError
from runwatch.stream.live import LiveDriver
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.timekeeping.skew import ClockOffsets

Record = tuple[bytes, float, int]
CONFIG = RulesConfig.default()


def partition() -> list[Record]:
    """Every scenario (the incidents of DESIGN.md) in one partition, interleaved in time, as
    records that reach the broker 50 ms after their time stamp."""
    events = sorted((e for make in SCENARIOS.values() for e in make()), key=lambda e: e["ts"])
    return [(orjson.dumps(e), e["ts"] + 0.05, i) for i, e in enumerate(events)]


RECORDS = partition()


def driver() -> LiveDriver:
    return LiveDriver(CONFIG, topic="runwatch.events", partition=0)


def live(d: LiveDriver, records: list[Record]) -> Iterator[Alert]:
    """The worker's live path: a tick at each record's arrival, then the record."""
    for record in records:
        yield from d.tick(record[1])
        yield from d.feed([record])[0]


def uninterrupted() -> list[Alert]:
    return list(live(driver(), RECORDS))


def test_the_incidents_make_transitions_to_compare() -> None:
    alerts = uninterrupted()
    assert {a.rule for a in alerts} >= {"inference_idle_with_pending", "zero_reward",
                                        "ranks_stalled", "heartbeat_lost"}  # fmt: skip
    assert any(not a.firing for a in alerts)


@pytest.mark.parametrize("cut", [0.2, 0.5, 0.8])
@pytest.mark.slow
def test_a_restart_from_a_checkpoint_publishes_what_an_uninterrupted_run_does(cut: float) -> None:
    """Checkpoint at `cut`, crash (kill -9) a while later with what it made since published,
    restart: load the checkpoint, re-read only the records after it, reconcile with what
    the topic holds, go on live. The sequence on the topic is the uninterrupted one."""
    at = int(len(RECORDS) * cut)
    crash = at + len(RECORDS) // 10
    before = driver()
    published = list(live(before, RECORDS[:at]))
    data = checkpoint.dump(before, {"offset": at})
    published += live(before, RECORDS[at:crash])  # ... then the worker is killed

    after = driver()
    position = checkpoint.load(data, after)
    assert position == {"offset": at}
    topic = PublishedAlerts()
    for alert in published:
        topic.add(alert)
    after.start_replay()
    after.feed(RECORDS[position["offset"] : crash])
    missing, _ = after.finish_replay(topic, RECORDS[crash - 1][1])
    assert missing == []  # everything made before the crash was published
    published += live(after, RECORDS[crash:])
    assert [(a.id, a.state, a.ts) for a in published] == [
        (a.id, a.state, a.ts) for a in uninterrupted()
    ]


def test_transitions_lost_with_the_worker_are_published_once_after_a_restart() -> None:
    """Killed after making transitions and before publishing them: the re-read of the tail
    makes them again and they go out, once, under the same ids."""
    at, crash = len(RECORDS) // 3, 2 * len(RECORDS) // 3
    before = driver()
    published = list(live(before, RECORDS[:at]))
    data = checkpoint.dump(before, at)
    lost = list(live(before, RECORDS[at:crash]))
    assert lost, "the window must make transitions for this test to mean anything"
    after = driver()
    checkpoint.load(data, after)
    topic = PublishedAlerts()
    for alert in published:
        topic.add(alert)
    after.start_replay()
    after.feed(RECORDS[at:crash])
    missing, _ = after.finish_replay(topic, RECORDS[crash - 1][1])
    assert [a.id for a in missing] == [a.id for a in lost]


def test_the_checkpoint_keeps_only_live_runs() -> None:
    """Bounded state: runs that finished and left are not in the checkpoint, whose size
    follows the live runs, not the history."""
    d = driver()
    list(live(d, RECORDS))
    full = checkpoint.dump(d, 0)
    finished, _ = d.evict(RECORDS[-1][1] + 2 * 3600)
    assert finished
    trimmed = checkpoint.dump(d, 0)
    assert len(trimmed) < len(full)
    restored = driver()
    checkpoint.load(trimmed, restored)
    assert set(restored.engine.runs) == set(d.engine.runs)
    assert set(restored.gone) == set(finished)


# -- what cannot be used is refused ---------------------------------------------------------


@pytest.fixture(scope="module")
def good() -> bytes:
    d = driver()
    list(live(d, RECORDS[:5000]))
    return checkpoint.dump(d, 5000)


def _refused(data: bytes, why: str, config: RulesConfig = CONFIG) -> None:
    d = LiveDriver(config)
    with pytest.raises(CheckpointError, match=why):
        checkpoint.load(data, d)
    assert d.engine.runs == {}  # nothing was taken over
    assert d.position is None


def test_a_damaged_checkpoint_is_refused(good: bytes) -> None:
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    _refused(bytes(flipped), "damaged")
    _refused(good[: len(good) // 2], "damaged")
    _refused(good[:10], "too short")
    _refused(b"X" + good[1:], "not a runwatch checkpoint")


def test_another_format_version_is_refused(good: bytes) -> None:
    older = good[:4] + struct.pack(">H", checkpoint.FORMAT - 1) + good[6:]
    _refused(older, f"format version {checkpoint.FORMAT - 1}")


def test_a_checkpoint_of_another_state_layout_is_refused(
    good: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that adds a field to a state class cannot read older checkpoints: the
    layout fingerprint comes from the classes themselves."""
    from runwatch.stream.state.steps import Step

    monkeypatch.setattr(Step, "__slots__", (*Step.__slots__, "new_field"))
    _refused(good, "other fields")


def test_a_checkpoint_made_under_other_rules_is_refused(good: bytes) -> None:
    other = RulesConfig.from_mapping({"rules": {"zero_reward": {"steps": 7}}})
    _refused(good, "other rules", other)


def _forged(state: object) -> bytes:
    return _forged_raw(pickle.dumps(state, protocol=5))


def _forged_raw(pickled: bytes) -> bytes:
    return _forged_body(zstandard.ZstdCompressor().compress(pickled))


def _forged_body(body: bytes) -> bytes:
    head = struct.pack(">4sH16s16sI", checkpoint.MAGIC, checkpoint.FORMAT,
                       checkpoint.layout_fingerprint(), checkpoint.rules_fingerprint(CONFIG),
                       zlib.crc32(body))  # fmt: skip
    return head + body


def test_a_body_of_no_size_or_over_the_bound_is_refused_before_it_is_inflated(
    good: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zstd frame says how large its content is: one that does not say, or says more than
    a checkpoint may be, is refused before anything is allocated for it; so is one with
    bytes after it."""
    pickled = zstandard.ZstdDecompressor().decompress(good[checkpoint._HEAD.size :])
    checkpoint.load(_forged_raw(pickled), LiveDriver(CONFIG))  # (forged alike, it loads)
    stream = zstandard.ZstdCompressor().compressobj()
    unsized = stream.compress(pickled) + stream.flush()  # (no content size in its frame)
    _refused(_forged_body(unsized), "over .* bytes or of no size")
    _refused(_forged_body(zstandard.ZstdCompressor().compress(pickled) + b"more"), "unreadable")
    monkeypatch.setattr(checkpoint, "MAX_STATE_BYTES", len(pickled) - 1)
    _refused(_forged_raw(pickled), "over .* bytes or of no size")


class _Runs:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, ("touch /tmp/runwatch-checkpoint-pwned",))


def test_a_forged_checkpoint_cannot_run_code(tmp_path: object) -> None:
    import os

    _refused(_forged({"position": 0, "driver": _Runs()}), "names posix.system")
    assert not os.path.exists("/tmp/runwatch-checkpoint-pwned")


def test_a_forged_checkpoint_of_the_wrong_shape_is_refused() -> None:
    _refused(_forged({"position": 0, "driver": {"engine": 1}}), "unreadable")
    _refused(_forged([1, 2, 3]), "unreadable")


def test_the_dedup_window_survives_a_restart() -> None:
    """An emitter's retry of an event from before the checkpoint, arriving after the
    restart, is dropped as the uninterrupted worker would drop it."""
    d = driver()
    list(live(d, RECORDS[:1000]))
    restored = driver()
    checkpoint.load(checkpoint.dump(d, 1000), restored)
    raw, arrival, _ = RECORDS[500]
    restored.feed([(raw, arrival + 60, 1000)])
    assert restored.duplicates == d.duplicates + 1


def test_the_hosts_clock_samples_survive_a_restart() -> None:
    """Each host's samples (a flat array of doubles) come back: the restored driver
    corrects a host's clock as the uninterrupted one does, and forgets as it does."""
    d = driver()
    for k in range(120):  # host "a" 90 s behind, "b" on time; a sample a second
        for host, behind in (("a", 90.0), ("b", 0.0)):
            d.clocks.observe(host, 1000.0 + k - behind, 1000.0 + k + 0.05 * (k % 3))
    restored = driver()
    checkpoint.load(checkpoint.dump(d, 0), restored)
    for host in ("a", "b"):
        held, back = d.clocks._hosts[host], restored.clocks._hosts[host]
        assert back.samples == held.samples
        assert len(back.samples) == 3 * 60
        assert restored.clocks.offset(host) == d.clocks.offset(host)
        # the next sample forgets the oldest second in both
        assert restored.clocks.observe(host, 1119.0, 1121.0) == d.clocks.observe(
            host, 1119.0, 1121.0
        )
        assert back.samples == held.samples


def _host_fields(clocks: ClockOffsets) -> dict[object, tuple[Any, ...]]:
    return {name: (*state, *(getattr(state, slot) for slot in type(state).__slots__))
            for name, state in clocks._hosts.items()}  # fmt: skip


def test_the_clock_offsets_come_back_whole() -> None:
    """Every host -- named, or a process's (component, instance, pid) -- with its samples,
    its run's shift and the shifts of the other runs it serves comes back, and goes on
    shifting as the uninterrupted one does."""
    d = driver()
    hosts: list[object] = ["a", "b", ("trainer", "0", 42)]
    for k in range(90):
        for n, host in enumerate(hosts):
            for run in ("r1", "r2", "r3")[: n + 1]:  # "b" serves two runs, the process three
                d.clocks.shift(host, run, 1000.0 + k - 30 * n, 1000.2 + k + 0.01 * n, 1.0)
    d.clocks.forget(["r2"])
    restored = driver()
    checkpoint.load(checkpoint.dump(d, 0), restored)
    assert _host_fields(restored.clocks) == _host_fields(d.clocks)
    assert (restored.clocks.window, restored.clocks.gap) == (d.clocks.window, d.clocks.gap)
    for host in hosts:
        for run in ("r1", "r2", "r3"):
            assert restored.clocks.shift(host, run, 1085.0, 1091.0, 1.0) == d.clocks.shift(
                host, run, 1085.0, 1091.0, 1.0
            )
    assert _host_fields(restored.clocks) == _host_fields(d.clocks)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_event_ids_with_any_characters_survive_a_checkpoint(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window comes back with the ids it held (any characters: a newline, none, a lone
    surrogate) and their age: the oldest is the first to go, both ways."""
    if not native:
        monkeypatch.setattr(tracked_module, "IdWindow", None)
    d = driver()
    held = ["plain", "with\nnewline", "", "lone \ud800"]
    for ident in held:
        d.engine.seen.add(ident)
    restored = driver()
    checkpoint.load(checkpoint.dump(d, 0), restored)
    seen = restored.engine.seen
    assert type(seen) is type(d.engine.seen)
    assert type(seen).__name__ == ("IdWindow" if native else "RecentIds")
    assert [i in seen for i in [*held, "other"]] == [True] * 4 + [False]
    for n in range(seen.capacity - len(held) + 1):  # one more than there is room for
        seen.add(f"new-{n}")
    assert [i in seen for i in held] == [False, True, True, True]


def test_a_native_window_s_checkpoint_is_refused_where_no_native_part_was_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Digests cannot give back the ids a Python window holds: an install without the C part
    refuses such a checkpoint, as any it cannot use (its caller rebuilds from the input),
    rather than take it up with an empty window."""
    d = driver()
    d.engine.seen.add("evt-1")
    assert type(d.engine.seen).__name__ == "IdWindow"
    data = checkpoint.dump(d, 0)
    monkeypatch.setattr(tracked_module, "IdWindow", None)
    with pytest.raises(CheckpointError, match="native part's digests"):
        checkpoint.load(data, driver())


def test_a_new_field_of_the_run_state_changes_the_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """RunState's fingerprint comes from its slots: one more is another layout."""
    from runwatch.stream.state.run import RunState

    before = checkpoint.layout_fingerprint()
    monkeypatch.setattr(RunState, "__slots__", (*RunState.__slots__, "new_field"))
    assert checkpoint.layout_fingerprint() != before


def test_two_fields_of_a_struct_swapped_are_another_layout() -> None:
    """A msgspec struct (StateConfig, Condition, ...) pickles its fields by position: their
    order is part of the layout, so an older checkpoint is refused, not loaded with two values
    swapped."""
    import msgspec

    class Before(msgspec.Struct):
        keep_steps: int = 20
        metric_steps: int = 16

    class After(msgspec.Struct):
        metric_steps: int = 16
        keep_steps: int = 20

    assert checkpoint._fields(Before) != checkpoint._fields(After)


def _records() -> list[Any]:
    """One instance of each `Compact` state record, from a replayed scenario's runs."""
    from runwatch.stream.state.compact import BLANKS, Compact

    driver = LiveDriver()
    events = [e for n in ("sandbox_hang", "rank_divergence", "orchestrator_dies")
              for e in SCENARIOS[n]()]  # fmt: skip
    last = events[-1]
    events.append({**last, "id": "pending", "run": "pending", "kind": "trajectory.started",
                   "traj": "t1"})  # fmt: skip
    for e in events:
        driver.engine.apply(decode(orjson.dumps(e)))
    found: dict[type, Any] = {}

    class Finder(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            blank = any(obj is b for b in BLANKS.values())  # (named, not written)
            if isinstance(obj, Compact) and not blank:
                found.setdefault(type(obj), obj)
            return NotImplemented

    Finder(io.BytesIO(), protocol=5).dump(driver.dump_state())
    for tracked in driver.engine.runs.values():  # (pickled as columns: `Inference`)
        for record in tracked.state.inference.pending.values():
            found.setdefault(type(record), record)
    return list(found.values())


@pytest.mark.parametrize("ids", [["t1", "t2", "t3"], ["", "t2"], [""], []])
def test_pending_trajectories_come_back_whole(ids: list[str]) -> None:
    """A run's pending trajectories go as columns (ids joined where they can be) and come
    back as they were: ids in order, every slot, the ended ones still known."""
    from runwatch.stream.state.inference import Inference

    inf = Inference()
    for i, traj in enumerate(ids):
        inf.started(traj, 100.0 + i, i if i % 2 else None, group="g" if i else None)
        inf.phase(traj, "tool", 101.0 + i, dep="sandbox" if i else None)
    inf.started("over", 99.0, 7)
    inf.done("over")
    back = pickle.loads(pickle.dumps(inf, protocol=5))
    assert list(back.pending) == ids
    for traj in ids:
        a, b = inf.pending[traj], back.pending[traj]
        assert [getattr(a, n) for n in a.__slots__] == [getattr(b, n) for n in b.__slots__]
    assert back.has_ended("over")
    assert not back.has_ended("never")
    assert back.pending_since == inf.pending_since


def test_pending_trajectories_columns_of_unequal_length_are_refused() -> None:
    import copyreg

    from runwatch.stream.state.inference import Inference

    class Uneven(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, Inference):  # two ids, one value in each column
                columns = ("a\nb", [None], [None], ["generate"], [1.0], [1.0], [None])
                return (
                    copyreg.__newobj__,
                    (Inference,),
                    (  # type: ignore[attr-defined]
                        {},
                        0,
                        columns,
                        None,
                        None,
                        bytearray(8),
                        0,
                        {},
                        {},
                    ),
                )
            return NotImplemented

    buf = io.BytesIO()
    Uneven(buf, protocol=5).dump({"position": 0, "driver": [Inference()]})
    _refused(_forged_raw(buf.getvalue()), "unreadable")


def test_state_records_pickle_as_their_slot_values_and_come_back_equal() -> None:
    """`Compact`: a record's pickled state is the tuple of its slots, in order, and what
    loads pickles the same again."""
    from runwatch.stream.state.run import RunState

    records = _records()
    assert {type(r).__name__ for r in records} >= {"PendingTrajectory", "Step", "Rank", "Process"}
    for record in records:
        names = type(record).__slots__
        _, _, values = record.__reduce_ex__(5)
        unsaved = type(record)._unsaved  # (caches, written empty)
        assert values == tuple({} if n in unsaved else getattr(record, n) for n in names)
        if isinstance(record, RunState):  # (its config's frozensets may reload reordered)
            continue
        written = pickle.dumps(record, protocol=5)  # records inside compare the same way
        assert pickle.dumps(pickle.loads(written), protocol=5) == written


def test_a_forged_record_of_the_wrong_length_is_refused() -> None:
    import copyreg

    from runwatch.stream.state.inference import PendingTrajectory

    class Short(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, PendingTrajectory):  # two values for five slots
                return copyreg.__newobj__, (PendingTrajectory,), (1.0, 2)  # type: ignore[attr-defined]
            return NotImplemented

    buf = io.BytesIO()
    Short(buf, protocol=5).dump({"position": 0, "driver": [PendingTrajectory(1.0, 2)]})
    _refused(_forged_raw(buf.getvalue()), "unreadable")


def _values(obj: Any) -> bytes:
    """`obj` pickled without the memo: equal for equal values, whichever objects they share
    (names loaded from a checkpoint are copies, not the interned strings)."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True
    pickler.dump(obj)
    return buf.getvalue()


def _beat(run: str, ts: float, pid: int, **more: Any) -> Any:
    src = {"component": "trainer", "host": "n0", "pid": pid, "rank": 0}
    return decode(orjson.dumps({"v": 1, "id": f"b{ts}-{pid}", "ts": ts, "run": run,
                                "kind": "heartbeat", "src": src, **more}))  # fmt: skip


def test_a_restored_run_folds_its_next_beats_as_one_never_checkpointed() -> None:
    """The heartbeat ledger is left out of a checkpoint (a cache of the processes and
    their restart slots): after a load, each process's next beat finds its entry again
    the long way, and what it makes -- the deadline it puts off, the slot's spans, a
    restart, a dropped count -- is what the run that was never checkpointed makes."""
    from runwatch.stream.state.run import RunState

    kept = RunState("r")
    for ts, pid in ((1.0, 7), (2.0, 7), (3.0, 8), (4.0, 7), (5.0, 8)):
        kept.apply(_beat("r", ts, pid))
    assert kept.ledger
    restored = pickle.loads(pickle.dumps(kept, protocol=5))
    assert restored.ledger == {}  # nothing of it written
    later = [(6.0, 8, {}), (7.0, 7, {}), (8.0, 8, {"dropped_events": 3}), (20.0, 9, {}),
             (21.0, 8, {"final": True}), (22.0, 9, {})]  # fmt: skip
    for ts, pid, more in later:
        kept.apply(_beat("r", ts, pid, **more))
        restored.apply(_beat("r", ts, pid, **more))
        assert (restored.postponed, restored.begun) == (kept.postponed, kept.begun)
        assert _values(restored) == _values(kept)
    assert restored.ledger.keys() == kept.ledger.keys()
    assert restored.restarts.slots["trainer@n0/rank 0"].restarts()


def test_parts_a_run_never_wrote_are_the_shared_blanks_named_by_a_checkpoint() -> None:
    """A run with no ranks, weights, stacks... holds the one blank record of each kind
    (`compact.blank`): a checkpoint names it rather than copying it, a load shares it
    again, the blank refuses every write, and a run's first write makes its own."""
    from runwatch.stream.state.compact import BLANKS
    from runwatch.stream.state.ranks import NO_RANKS
    from runwatch.stream.state.run import RunState

    fresh = RunState("r")
    blanks = {name: getattr(fresh, name) for name in RunState.__slots__
              if any(getattr(fresh, name) is b for b in BLANKS.values())}  # fmt: skip
    assert set(blanks) >= {"ranks", "weights", "stacks", "holds", "failures", "collectives",
                           "progress"}  # fmt: skip
    loaded = pickle.loads(pickle.dumps(fresh, protocol=5))
    assert all(getattr(loaded, name) is part for name, part in blanks.items())
    data = checkpoint.pack([fresh], CONFIG, 0)
    (back,), _ = checkpoint.unpack(data, CONFIG)  # through the restricted unpickler
    assert all(getattr(back, name) is part for name, part in blanks.items())
    with pytest.raises(TypeError):
        NO_RANKS.world_size = 4
    with pytest.raises(TypeError):
        NO_RANKS.status(0, 8, "step", None, 1, 1.0)
    back.apply(decode(orjson.dumps({"v": 1, "id": "r1", "ts": 1.0, "run": "r",
        "kind": "rank.status", "src": {"component": "trainer", "rank": 0}, "rank": 0,
        "world_size": 8, "phase": "step"})))  # fmt: skip
    assert back.ranks is not NO_RANKS
    assert back.ranks.world_size == 8
    assert NO_RANKS.world_size == 0
    assert not NO_RANKS.by_rank


def test_dicts_nothing_was_written_to_are_the_shared_empty_one() -> None:
    """A run's parameters, the services it waited on... start as the one read-only
    `EMPTY` dict; the first write makes the run its own, and a checkpoint names it, so a
    load shares it again."""
    from runwatch.stream.state.compact import EMPTY

    d = driver()
    fired = resolved = False
    for alerts in map(d.feed, ([r] for r in RECORDS)):
        for alert in alerts[0]:
            fired = fired or alert.firing
            resolved = resolved or not alert.firing
    assert fired
    assert resolved
    runs = d.engine.runs.values()
    assert all(t.overrides is EMPTY for t in runs if not t.overrides)
    assert any(t.overrides is EMPTY for t in runs)
    assert all(t.state.deps is EMPTY for t in runs if not t.state.deps)
    restored = driver()
    checkpoint.load(checkpoint.dump(d, {"offset": 1}), restored)
    for run, t in d.engine.runs.items():
        back = restored.engine.runs[run]
        assert (back.overrides is EMPTY) == (t.overrides is EMPTY)
        assert (back.state.deps is EMPTY) == (t.state.deps is EMPTY)
    from runwatch.stream.state.run import RunState

    state = RunState("r")
    state.apply(decode(orjson.dumps({"v": 1, "id": "p1", "ts": 1.0, "run": "r",
        "kind": "trajectory.phase", "src": {"component": "rollout"}, "traj": "t",
        "phase": "tool", "dep": "reward"})))  # fmt: skip
    assert state.deps == {"reward": 1.0}
    assert RunState("other").deps is EMPTY
    with pytest.raises(TypeError):
        EMPTY["x"] = 1
    with pytest.raises(TypeError):
        EMPTY.update(x=1)
    assert EMPTY == {}

"""A spool backlog that cannot be sent does not grow unseen: `runwatch spool status` and
`runwatch watch` warn of one older than a threshold, naming where it was going and how to
send or drop it; `runwatch spool drop DEST` gives one up when asked -- counted, recorded, and
only what exited processes left. Nothing is dropped unasked; a maximum age, off by default,
lets an emitter drop what is older than it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runwatch import cli
from runwatch.emitters.backlog import WARN_AFTER_S, backlog, drop
from runwatch.emitters.http import HttpDestination
from runwatch.emitters.spool import Spool, destination_dir, segment_writer, this_host

KAFKA = {"kind": "kafka", "bootstrap": "gone:9092", "topic": "runwatch.events"}
DEAD_PID = 2**22 + 12345  # above the kernel's pid_max: no such process


def segment(directory: Path, pid: int, events: int, age: float, seq: int = 0) -> Path:
    """A segment as process `pid` of this host left it, last written `age` seconds ago."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "destination.json").write_text(json.dumps(KAFKA))
    path = directory / f"events-{this_host()}-{pid}-0-{seq:010d}.jsonl"
    path.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(events)))
    then = time.time() - age
    os.utime(path, (then, then))
    return path


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "runwatch" / "spool"


def test_a_writer_is_read_from_its_segments_name() -> None:
    assert segment_writer("events-gpu-node-7-4242-0-0000000003.jsonl") == ("gpu-node-7", 4242)
    assert segment_writer("destination.json") == (None, None)


def test_an_old_backlog_is_warned_of_naming_its_destination_and_the_way_out(base: Path) -> None:
    directory = destination_dir(base, KAFKA)
    segment(directory, DEAD_PID, 3, age=2 * WARN_AFTER_S)
    found = backlog(directory)
    assert found is not None
    assert (found.events, found.segments) == (3, 1)
    warning = found.warning()
    assert warning is not None
    assert "3 events for Kafka at gone:9092, topic runwatch.events have waited 20m" in warning
    assert f"runwatch spool flush --dir {directory}" in warning
    assert f"runwatch spool drop {directory.name}" in warning
    fresh = destination_dir(base, {**KAFKA, "bootstrap": "b:9092"})
    segment(fresh, DEAD_PID, 1, age=1)
    assert backlog(fresh).warning() is None  # type: ignore[union-attr]


def test_status_warns_and_drop_gives_up_what_exited_processes_left(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = destination_dir(base, KAFKA)
    segment(directory, DEAD_PID, 5, age=3600)
    mine = segment(directory, os.getpid(), 2, age=3600, seq=1)  # a running process's
    assert cli.main(["spool", "status", "--dir", str(base)]) == 0
    out, err = capsys.readouterr()
    assert "7 events in 2 segments" in out
    assert "warning: 7 events for Kafka at gone:9092" in err
    assert cli.main(["spool", "drop", directory.name[:-1], "--dir", str(base)]) == 2
    assert f"did you mean {directory.name}?" in capsys.readouterr().err
    assert backlog(directory).events == 7  # type: ignore[union-attr]  # nothing dropped
    assert cli.main(["spool", "drop", directory.name, "--dir", str(base)]) == 1
    err = capsys.readouterr().err
    assert "dropped 5 events (1 segments" in err
    assert "1 segments of running processes kept" in err
    assert [p.name for p in directory.iterdir() if p.suffix == ".jsonl"] == [mine.name]
    (record,) = [json.loads(line) for line in (base / "dropped.log").read_text().splitlines()]
    assert (record["events"], record["destination"]) == (5, "Kafka at gone:9092, topic "
                                                              "runwatch.events")  # fmt: skip
    mine.unlink()
    assert cli.main(["spool", "status", "--dir", str(base)]) == 0
    assert capsys.readouterr().out == "nothing waits\n"


def test_drop_removes_a_destination_left_empty(base: Path) -> None:
    directory = destination_dir(base, KAFKA)
    segment(directory, DEAD_PID, 2, age=60)
    done = drop(directory, base)
    assert (done.events, done.segments, done.kept) == (2, 1, 0)
    assert not directory.exists()


def test_nothing_expires_unless_a_max_age_is_set(tmp_path: Path) -> None:
    for max_age, expired in ((None, 0), (3600.0, 4)):
        spool = Spool(tmp_path / str(max_age), max_age=max_age)
        spool.append(['{"n":1}'] * 4)
        spool.seal()
        (path,) = spool.backlog()
        then = time.time() - 86_400
        os.utime(path, (then, then))
        assert spool.expire() == expired
        assert spool.dropped == expired  # counted: the heartbeats report it
        assert path.exists() == (expired == 0)


def test_an_emitter_says_once_that_its_backlog_grows_old(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(tmp_path / "http-x")
    spool.append(['{"v":1}'])
    destination = HttpDestination("http://127.0.0.1:9", spool)  # nothing answers there
    with caplog.at_level(logging.WARNING, logger="runwatch.emitters"):
        destination._went_down("no answer")  # down now: nothing to say yet
        assert not [r for r in caplog.records if "spool drop" in r.getMessage()]
        destination._down_since = time.monotonic() - WARN_AFTER_S - 1  # ... for 10 minutes
        destination._went_down("no answer")
        destination._went_down("no answer")
    said = [r.getMessage() for r in caplog.records if "spool drop" in r.getMessage()]
    assert len(said) == 1, said
    assert "http://127.0.0.1:9 has not answered for 10m" in said[0]
    assert f"runwatch spool drop {spool.directory.name}" in said[0]
    spool.close()


def test_watch_warns_of_what_earlier_runs_left_for_its_destination() -> None:
    def watch() -> str:  # nobody at that port: its events wait in the spool
        argv = ["watch", "--kafka", "127.0.0.1:1", "--run", "r1", "--", "true"]
        done = subprocess.run([sys.executable, "-m", "runwatch.cli", *argv], timeout=60,
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stderr

    assert "warning:" not in watch()  # what it left is young
    base = Path(os.environ["XDG_CACHE_HOME"]) / "runwatch" / "spool"
    left = list(base.glob("kafka-*/events-*.jsonl"))  # (one or two segments: as it went)
    assert left
    then = time.time() - 34 * 60
    for path in left:
        os.utime(path, (then, then))
    err = watch()
    assert "events for Kafka at 127.0.0.1:1, topic runwatch.events have waited 34m" in err
    assert f"runwatch spool drop {left[0].parent.name}" in err

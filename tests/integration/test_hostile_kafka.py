"""The hostile corpus through the Kafka roles on a real broker: the worker dead-letters each
refused record with its reason and goes on raising alerts; the sink stores the valid ones,
keeps the refused ones in `invalid_events` with the reason, and goes on consuming."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from helpers import terminate
from hostile import CORPUS
from kafka import KafkaProducer
from test_worker import RUNWATCH, Setup, sequence
from test_worker import setup as setup  # the fixture

from runwatch.emitters.topics import Topics
from runwatch.stream.kafka.admin import ensure_topics

pytestmark = pytest.mark.integration

REFUSED = sum(refused for _, _, refused in CORPUS)
#: Refused by the rules (the worker), but well-formed events: the history keeps them (the
#: sink cannot know the worker's rules, whose custom ids a run.started.config may name).
RULES_ONLY = {"bad run.started.config parameter", "unknown rule in run.started.config"}


def produce_corpus(s: Setup) -> None:
    producer = KafkaProducer(bootstrap_servers=s.bootstrap, max_request_size=4 << 20)
    try:
        now = time.time()
        for _, line, _ in CORPUS:
            producer.send(s.events, line(now), key=b"hostile-run")
        producer.flush()
    finally:
        producer.close()


def test_the_worker_dead_letters_each_hostile_record_and_goes_on(setup: Setup) -> None:
    s = setup
    worker = s.worker()
    worker.wait_live()
    produce_corpus(s)
    em = s.emitter("after-hostile")  # a run that starts after the corpus, same broker
    try:
        em.emit("run.started")
        em.emit("reward", step=0, mean=0.0)
        em.emit("reward", step=1, mean=0.0)
        em.flush(10)
        alerts = s.wait_alerts(lambda a: ("zero_reward", "firing") in sequence(a, "after-hostile"))
    finally:
        em.close()
    assert ("zero_reward", "firing") in sequence(alerts, "after-hostile"), worker.lines[-20:]
    deadline = time.monotonic() + 30
    while len(dead := s.read("runwatch.events.dlq")) < REFUSED and time.monotonic() < deadline:
        time.sleep(0.3)
    assert len(dead) == REFUSED
    for letter, _ in dead:
        assert letter["reason"].strip()
        assert letter["reason"].isprintable()
        assert letter["topic"] == s.events
    assert worker.proc.poll() is None, "the worker is still running"


def test_the_sink_keeps_each_refused_record_with_its_reason_and_goes_on(
    setup: Setup, tmp_path: Path
) -> None:
    s = setup
    # the topics as a worker makes them: broker append times, against which a ts is judged
    asyncio.run(ensure_topics(s.bootstrap, Topics(s.prefix), 2))
    produce_corpus(s)
    db = tmp_path / "h.duckdb"
    cmd = [RUNWATCH, "sink", "--kafka", s.bootstrap, "--db", str(db), "--topic-prefix",
           s.prefix, "--group", s.group + "-sink", "--flush-interval", "0.2"]  # fmt: skip
    sink = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        refused = REFUSED - len(RULES_ONLY)
        valid = len(CORPUS) - refused

        def counts() -> tuple[int, int]:
            try:
                with duckdb.connect(str(db), read_only=True) as con:
                    (events,) = con.execute("SELECT count(*) FROM events").fetchone() or (0,)
                    (bad,) = con.execute("SELECT count(*) FROM invalid_events").fetchone() or (0,)
                    return int(events), int(bad)
            except duckdb.Error:  # not created yet, or held by the sink for a batch
                return -1, -1

        deadline = time.monotonic() + 60
        while counts() != (valid, refused) and time.monotonic() < deadline:
            assert sink.poll() is None, sink.stderr.read() if sink.stderr else ""
            time.sleep(0.3)
        assert counts() == (valid, refused)
        with duckdb.connect(str(db), read_only=True) as con:
            reasons = [r for (r,) in con.execute("SELECT reason FROM invalid_events").fetchall()]
        assert all(r.strip() and r.isprintable() for r in reasons)
        assert any("milliseconds" in r for r in reasons)
        assert any("64 bits" in r for r in reasons)
        assert sink.poll() is None, "the sink is still consuming"
    finally:
        terminate(sink)
        if sink.stderr is not None:
            sink.stderr.close()

"""Restart-to-ready with history retained, with and without checkpoints (issue 16).

Worker (`restart_worker`). One events partition (CreateTime, record time = event time, no
retention limit) holds weeks of incidents in waves 4 h apart (`long_history`, ending an hour
ago): most runs finished or went silent long ago, a day's worth are live. It is measured
with each retained size, largest first, the oldest records deleted in between:

- without a checkpoint: a `runwatch worker` in a fresh group re-reads the whole partition,
  the only way before checkpoints; spawn to "live" is timed;
- with one: that worker checkpoints as soon as it is live, is stopped (SIGTERM, a rolling
  update), and a worker of the same group starts; it loads the checkpoint and re-reads
  only what follows it. (After a kill -9 both wait the group's session timeout, 10 s, for
  the dead member to be noticed; that wait is Kafka's and the same either way.)

The checkpoint's own cost (`checkpoint_cost`), in process on the same history: time and
bytes to make one, per live run, and the live path's events/s with a checkpoint every 100k
events against none, over the same events in the same run.

Serve (`restart_serve`): a service's event log of each size (the same history, in requests
of 500 events); restart time (`Service.recover`) from its checkpoint, and with the checkpoint
removed (the whole log replayed, as before).

Under traffic (`restart_under_traffic`, run this file): the events topic (4 partitions)
receives heartbeats of 200 runs at 1,000 and 10,000 events/s and a probe run every 4 s that
goes silent 8 s later (bench/faults.py's traffic); one worker is live on it, checkpointing
every 5 s. It is restarted -- SIGTERM then a new one (a rolling update), and kill -9 then a
new one (it waits the session timeout, 6 s) -- while the producer goes on; spawn to live,
and each probe's delay from its condition (last beat + 5 s) to its alert, for the probes
whose condition ripened while the worker was down or rebuilding. Beside it, the same
restart with the producer stopped (a static topic, what the history restart above sees).

    .venv/bin/python bench/restart.py [--rates 1000,10000]

Figures only: nothing here asserts. They are in bench/RESULTS.md, "A live worker restarted
under traffic" (the history restarts of 2026-11-24 at its end).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import re
import shutil
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from benchinfo import SAID, long_history, machine, say, write_section

#: Where the history ends: an hour ago, so its last wave is live.
AGO = 3600.0


def _history(n: int, end: float) -> Iterator[tuple[float, str, bytes]]:
    return long_history(n, end)


# -- the worker ----------------------------------------------------------------------------


def restart_worker(bootstrap: str, sizes: list[int], worker: Callable[..., object]) -> list[str]:
    """Restart-to-ready at each retained size; `worker(bootstrap, prefix, app_id, cpu)` is
    bench/worker.py's subprocess wrapper. The largest history is produced once (it ends an
    hour ago); the smaller ones are its newest events, the older ones deleted (DeleteRecords)
    so that what is retained is always recent."""
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    prefix = f"restart-{uuid.uuid4().hex[:8]}."
    topic = f"{prefix}runwatch.events"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
        "message.timestamp.type": "CreateTime", "retention.ms": "-1"})])  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                             max_request_size=16 << 20, acks=1)  # fmt: skip
    total = max(sizes)
    started = time.perf_counter()
    for ts, run, raw in _history(total, time.time() - AGO):
        producer.send(topic, raw, key=run.encode(), timestamp_ms=int(ts * 1000))
    producer.flush()
    producer.close()
    print(f"(history of {total:,} events produced in {time.perf_counter() - started:.0f}s)",
          flush=True)  # fmt: skip
    out: list[str] = []
    try:
        for size in sorted(sizes, reverse=True):
            if size < total:
                admin.delete_records({TopicPartition(topic, 0): total - size})
            out.append(_restart_at(bootstrap, prefix, size, worker))
            print(out[-1], flush=True)
    finally:
        admin.close()
    return out


def _restart_at(bootstrap: str, prefix: str, size: int, worker: Callable[..., object]) -> str:
    group = f"restart-{uuid.uuid4().hex[:8]}"
    t = time.perf_counter()
    first = worker(bootstrap, prefix, group, None)
    line = first.wait_live(timeout=3600)  # type: ignore[attr-defined]
    without = time.perf_counter() - t
    rebuilt = re.search(r"rebuilt from \d+ records \((\d+) events applied\) in ([\d.]+)s", line)
    _wait_checkpoint(bootstrap, prefix, group)
    first.stop()  # type: ignore[attr-defined]  # SIGTERM: it leaves the group at once
    t = time.perf_counter()
    second = worker(bootstrap, prefix, group, None)
    line2 = second.wait_live(timeout=3600)  # type: ignore[attr-defined]
    with_ = time.perf_counter() - t
    loaded = next((x for x in second.lines if "from the checkpoint at offset" in x), "?")  # type: ignore[attr-defined]
    second.stop()  # type: ignore[attr-defined]
    tail = re.search(r"rebuilt from \d+ records \((\d+) events applied\)", line2)
    cp = re.search(r"\((\d+) runs, ([\d,]+) bytes\)", loaded)
    runs, size_b = (int(cp.group(1)), int(cp.group(2).replace(",", ""))) if cp else (0, 0)
    return (
        f"worker restart with {size:,} events retained: without a checkpoint ready in "
        f"{without:.1f}s (re-read {rebuilt.group(1) if rebuilt else '?'} events in "
        f"{rebuilt.group(2) if rebuilt else '?'}s); from a checkpoint ready in {with_:.1f}s "
        f"(re-read {tail.group(1) if tail else '?'} events; checkpoint {size_b / 1024:,.0f} KiB "
        f"with {runs} live runs); ratio {without / with_:.1f}x"
    )


def _wait_checkpoint(bootstrap: str, prefix: str, group: str, timeout: float = 300) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = f"{prefix}runwatch.checkpoints"
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      max_partition_fetch_bytes=64 << 20,
                      isolation_level="read_committed")  # fmt: skip
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic) or set()
            if parts:
                c.assign([TopicPartition(topic, p) for p in parts])
                c.seek_to_beginning()
                for records in c.poll(timeout_ms=500).values():
                    if any((r.key or b"").startswith(group.encode()) for r in records):
                        return
            time.sleep(0.5)
    finally:
        c.close()
    raise TimeoutError(f"no checkpoint of group {group}")


# -- the checkpoint's own cost, in process ---------------------------------------------------


def checkpoint_cost(n: int, every: int = 250_000) -> list[str]:
    from runwatch.stream import checkpoint
    from runwatch.stream.live import LiveDriver

    end = time.time() - AGO
    records = [(raw, ts + 0.05, i) for i, (ts, _, raw) in enumerate(_history(n, end))]
    rates: dict[int, float] = {}
    for dump_every in (0, every, 0, every):  # alternated, the best of two each
        driver = LiveDriver()
        started = time.perf_counter()
        for i in range(0, len(records), 5000):
            driver.feed(records[i : i + 5000])
            if dump_every and (i + 5000) % dump_every < 5000:
                checkpoint.dump(driver, {"offset": i + 5000})
        rate = len(records) / (time.perf_counter() - started)
        rates[dump_every] = max(rates.get(dump_every, 0.0), rate)
    driver.evict(time.time())
    times = []
    for _ in range(5):
        t = time.perf_counter()
        data = checkpoint.dump(driver, {"offset": n})
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    checkpoint.load(data, LiveDriver())
    load_s = time.perf_counter() - t
    runs = len(driver.engine.runs)
    states = len(zlib.compress(pickle.dumps(driver.dump_state()["engine"]["runs"], 5), 1))
    base, with_ = rates[0], rates[every]
    return [
        f"checkpoint after {n:,} events: {len(data) / 1024:,.0f} KiB, of which the run states "
        f"{states / 1024:,.0f} KiB for {runs} live runs ({states / max(1, runs) / 1024:.1f} "
        f"KiB per live run) and the rest mostly the dedup window ({len(driver.engine.seen):,} "
        f"event ids); made in {min(times) * 1000:.0f} ms, loaded in {load_s * 1000:.0f} ms",
        f"live path in process (LiveDriver.feed, batches of 5,000): {base:,.0f} events/s "
        f"without checkpoints, {with_:,.0f} with one every {every:,} events "
        f"({(with_ / base - 1) * 100:+.1f}%); at the worker's defaults (every 30 s or "
        f"1,000,000 events) one checkpoint per {min(30.0, 1e6 / base):.1f}s of full-speed "
        f"input costs {min(times) / min(30.0, 1e6 / base) * 100:.1f}% of it",
    ]


# -- serve ----------------------------------------------------------------------------------


def restart_serve(sizes: list[int]) -> list[str]:
    from runwatch.service.core import Service

    out = []
    for size in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="runwatch-bench-restart-"))
        try:
            clock = [time.time()]
            service = Service(tmp / "h.duckdb", tmp / "wal", clock=lambda c=clock: c[0])  # type: ignore[misc]
            service.recover()
            batch: list[bytes] = []
            for ts, _, raw in _history(size, time.time() - AGO):
                batch.append(raw)
                if len(batch) == 500:
                    clock[0] = ts + 0.05
                    service.ingest(batch)
                    batch = []
            if batch:
                service.ingest(batch)
            wal_mb = service.events.size / 1e6
            service.close()  # a clean stop: checkpointed
            ckpt_kb = (tmp / "wal" / "state.ckpt").stat().st_size / 1024
            with_ = _recover(tmp)
            (tmp / "wal" / "state.ckpt").unlink()
            without = _recover(tmp)
            out.append(
                f"serve restart with {size:,} events in its log ({wal_mb:,.0f} MB): from the "
                f"checkpoint ({ckpt_kb:,.0f} KiB) {with_:.2f}s; replaying the whole log "
                f"{without:.2f}s; ratio {without / with_:.0f}x"
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _recover(tmp: Path) -> float:
    from runwatch.service.core import Service

    t = time.perf_counter()
    service = Service(tmp / "h.duckdb", tmp / "wal")
    service.recover()
    elapsed = time.perf_counter() - t
    service.close()
    return elapsed


# -- restart under traffic -------------------------------------------------------------------


def restart_under_traffic(
    bootstrap: str, rate: int, kill: bool, traffic: bool, every: float = 5.0
) -> dict[str, float]:
    """One restart of a live worker (SIGTERM, or kill -9) with the producer at `rate` events/s
    going on (`traffic`) or stopped just before, checkpoints every `every` seconds;
    spawn-to-live and the worst probe delay."""
    from faults import TIMEOUT, Traffic, firings
    from processes import Worker

    from runwatch.emitters.topics import Topics
    from runwatch.stream.kafka.admin import ensure_topics

    topics = Topics(f"rt{uuid.uuid4().hex[:8]}.")
    asyncio.run(ensure_topics(bootstrap, topics, 4))
    tmp = Path(tempfile.mkdtemp(prefix="runwatch-bench-restart-"))
    (tmp / "rules.toml").write_text(f"[rules.heartbeat_lost]\ntimeout = {TIMEOUT}\n")
    group = f"rt-{uuid.uuid4().hex[:8]}"
    extra = ("--partitions", "4", "--config", str(tmp / "rules.toml"), "--session-timeout",
             "6", "--checkpoint-every", str(every))  # fmt: skip
    first = Worker(bootstrap, topics.prefix, group, None, *extra)
    second = None
    feed = Traffic(bootstrap, topics.events, rate)
    try:
        first.wait_live(timeout=300)
        time.sleep(12)  # steady, with checkpoints behind it
        if not traffic:
            feed.close()
        down = time.time()
        if kill:
            first.proc.kill()
        first.stop()
        spawned = time.monotonic()
        second = Worker(bootstrap, topics.prefix, group, None, *extra)
        second.wait_live(timeout=300)
        to_live = time.monotonic() - spawned
        live_at = time.time()
        if traffic:
            time.sleep(PROBE_WINDOW)  # probes whose silence ripens after it went live too
            feed.close()
        time.sleep(TIMEOUT + 5)
    finally:
        feed.close()
        for w in (first, second):
            if w is not None:
                w.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    fired = firings(bootstrap, topics.alerts)
    delays = []
    for run, last in feed.probes.items():
        due = last + TIMEOUT
        if down <= due <= live_at + PROBE_WINDOW:
            at = [t for a, t in fired if a["run"] == run and a["rule"] == "heartbeat_lost"]
            delays.append(min(at) - due if at else float("inf"))
    return {"to_live": to_live, "worst": max(delays, default=float("nan")),
            "probes": len(delays)}  # fmt: skip


#: After the restart, the probes whose silence ripens this long after it went live count too.
PROBE_WINDOW = 10.0


def main() -> None:
    from runwatch.dev.broker import KafkaBroker

    p = argparse.ArgumentParser(description="A live worker restarted under traffic.")
    p.add_argument("--rates", default="1000,10000", help="events/s, comma-separated")
    p.add_argument("--checkpoint-every", type=float, default=5.0, metavar="SECONDS",
                   help="the workers' checkpoint interval (5)")  # fmt: skip
    args = p.parse_args()
    say(machine())
    say(f"checkpoints every {args.checkpoint_every:g} s")
    with KafkaBroker(progress=lambda _: None) as broker:
        for rate in [int(r) for r in args.rates.split(",")]:
            for kill in (False, True):
                how = "kill -9 " if kill else "SIGTERM "
                busy = restart_under_traffic(broker.bootstrap, rate, kill, True,
                                             args.checkpoint_every)  # fmt: skip
                idle = restart_under_traffic(broker.bootstrap, rate, kill, False,
                                             args.checkpoint_every)  # fmt: skip
                say(f"{rate:>6,} events/s, {how}: spawn to live {busy['to_live']:.1f}s under "
                    f"traffic, {idle['to_live']:.1f}s on a static topic (ratio "
                    f"{busy['to_live'] / idle['to_live']:.1f}x); worst alert delay of the "
                    f"{busy['probes']} probes due across the restart "
                    f"{busy['worst']:.1f}s")  # fmt: skip
    write_section("restart-traffic", [
        "## A live worker restarted under traffic (`bench/restart.py`)", "", "```", *SAID, "```",
    ])  # fmt: skip


if __name__ == "__main__":
    main()

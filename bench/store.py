"""What the history costs: sink ingest rate, and the latency of the views people query most.

1. Sink ingest: the sink's own path without the broker -- raw Kafka values decoded and
   validated (`runwatch.stream.decode`), buffered in a `BatchWriter`, and flushed in batches
   (default 245,760, as the sink) with their positions on the writer thread while the next
   batch is decoded, each flush opening and closing the file, and the garbage collector tuned
   (`runwatch.stream.collector`), as the sink does. Best of
   `--ingest-repeat` runs, with the CPU time per event (the machine may be shared). Next to
   it, in the same run, a row-by-row baseline: one INSERT statement per event into the same
   table, through the same typing SQL (on a smaller sample: it is slow). Then the sink end to
   end: a local broker (`runwatch.dev.broker`) holds the same events in `--partitions`
   partitions, gzip-compressed as emitters send them, and `Sink.run` (what `runwatch sink`
   runs) reads them into a fresh history; the broker shares the machine's cores.
2. Views over a big history: N events (default 10M; `--quick`: 1M) generated with DuckDB SQL
   itself -- runs of 100 steps, 256 trajectories per step (started, sandbox, done), an
   inference server's stats every 10 s, three processes' heartbeats, rewards and metrics --
   stored through the same typing SQL as the sink, then `idle_gaps` and `runs` are queried on
   a read-only connection (as `runwatch sql` does): best and median of `--repeat` rounds.

Figures only; nothing here asserts a timing.

    .venv/bin/python bench/store.py [--quick] [--events N] [--ingest N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
from benchinfo import SAID, say, write_section

from runwatch.dev import scenarios
from runwatch.store import Store, schema
from runwatch.store.writer import BATCH_SIZE, BatchWriter, Flushed
from runwatch.stream.collector import tuned_for_consuming
from runwatch.stream.decode import decode

# -- 1. ingest ---------------------------------------------------------------------------


def sample_values(n: int) -> list[bytes]:
    """`n` Kafka values with the kind mix of the scenarios, each with its own id."""
    base = [e for build in scenarios.SCENARIOS.values() for e in build()]
    out = []
    for i in range(n):
        e = dict(base[i % len(base)])
        e["id"] = f"bench-{i:09d}"
        out.append(json.dumps(e).encode())
    return out


def bench_sink_path(
    values: list[bytes], db: Path, batch: int, tuned: bool = True
) -> tuple[float, float, float]:
    """(events/s through decode + batched flushes, seconds waited on flushes, CPU seconds).

    As in the sink, flushes run on the writer thread while the next batch is decoded, and
    the garbage collector is tuned (`tuned=False`: Python's defaults, for comparison).
    """
    writer = BatchWriter(db, consumer="bench", background=True)
    waited = 0.0
    with tuned_for_consuming() if tuned else contextlib.nullcontext():
        started = time.perf_counter()
        cpu = time.process_time()
        for offset, value in enumerate(values):
            writer.add_event(value, decode(value))
            if len(writer.events) >= batch:
                writer.advance("runwatch.events", 0, offset + 1)
                t = time.perf_counter()
                writer.flush(wait=False)
                waited += time.perf_counter() - t
        writer.advance("runwatch.events", 0, len(values))
        t = time.perf_counter()
        writer.flush()
        writer.close()
        waited += time.perf_counter() - t
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    with Store.reader(db) as store:
        assert store.count_events() == len(values)
    return len(values) / elapsed, waited, cpu


def bench_row_by_row(values: list[bytes], db: Path) -> float:
    """events/s inserting one event per statement (each decoded first, as the sink must)."""
    sql = schema.insert_events_sql("(SELECT CAST(? AS BIGINT) AS seq, ? AS raw)")
    with Store.writer(db) as store:
        started = time.perf_counter()
        store.con.execute("BEGIN")
        for i, value in enumerate(values, 1):
            decode(value)
            store.con.execute(sql, [i, value.decode()]).fetchall()
        store.con.execute("COMMIT")
        elapsed = time.perf_counter() - started
    return len(values) / elapsed


# -- 1b. the sink end to end, through a real broker -------------------------------------


async def _produce(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes]) -> None:
    """Fill `topic` fast: batches built by aiokafka's C record builder, gzip as emitters send."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type="gzip", enable_idempotence=True,
        max_request_size=16 << 20, max_batch_size=512 << 10,
    )  # fmt: skip
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
        pending = []
        for part in partitions:
            batch = producer.create_batch()
            for key, value in zip(keys, values, strict=True):
                if hash(key) % len(partitions) != part:
                    continue
                if batch.append(key=key, value=value, timestamp=None) is None:
                    pending.append(await producer.send_batch(batch, topic, partition=part))
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            pending.append(await producer.send_batch(batch, topic, partition=part))
        for fut in pending:
            await fut
    finally:
        await producer.stop()


def bench_sink_kafka(values: list[bytes], tmp: Path, partitions: int) -> tuple[float, float, int]:
    """(events/s, CPU us/event, batches) of `runwatch sink`'s own loop (`Sink.run`, in this
    process) reading `values` from a local broker into a fresh history.

    The rate is the steady one: from the end of the first flush (the group join and the
    first fetch are behind it) to the end of the last."""
    import asyncio
    import threading

    from runwatch.dev.broker import KafkaBroker
    from runwatch.emitters.topics import Topics
    from runwatch.store.sink import Sink, SinkSettings
    from runwatch.stream.kafka.admin import ensure_topics

    broker = KafkaBroker(tmp / "kafka")
    bootstrap = broker.start()
    try:
        topics = Topics(prefix="bench.")
        asyncio.run(ensure_topics(bootstrap, topics, partitions))
        keys = [json.loads(v)["run"].encode() for v in values]
        asyncio.run(_produce(bootstrap, topics.events, values, keys))
        flushes: list[tuple[float, int]] = []
        stop = threading.Event()

        def on_flush(done: Flushed) -> None:
            flushes.append((time.perf_counter(), done.events))
            if sum(n for _, n in flushes) >= len(values):
                stop.set()

        config = SinkSettings(
            bootstrap, tmp / "sink-kafka.duckdb", group="bench-sink",
            events_topic=topics.events, alerts_topic=topics.alerts,
        )  # fmt: skip
        cpu, started = time.process_time(), time.perf_counter()
        Sink(config, stop=stop, on_flush=on_flush).run()
        cpu = time.process_time() - cpu
    finally:
        broker.stop()
    # the rate from the first flush on (past the consumer's start); a small history can go
    # in one flush, timed from the sink's start instead
    (t0, n0), (t1, _) = flushes[0], flushes[-1]
    if len(flushes) < 2:
        t0, n0 = started, 0
    return (len(values) - n0) / (t1 - t0), cpu / len(values) * 1e6, len(flushes)


# -- 2. a big history generated in SQL ------------------------------------------------------

TRAJ = 256
STEP_S = 600
GEN_S = 420  # the server is busy for 7 minutes of each 10-minute step


def _generated_sql(runs: int, steps: int) -> str:
    src_t = "json_object('component', 'trainer', 'host', 'n0', 'pid', 1)"
    src_r = "json_object('component', 'rollout', 'host', 'n1', 'pid', 2)"
    src_i = "json_object('component', 'inference', 'host', 'n2', 'pid', 3, 'instance', 'vllm-0')"

    def obj(kind: str, src: str, ts: str, id_: str, *fields: str) -> str:
        extra = (", " + ", ".join(fields)) if fields else ""
        return (
            f"json_object('v', 1, 'id', {id_}, 'ts', {ts}, 'run', 'run-' || r, "
            f"'kind', '{kind}', 'src', {src}{extra})"
        )

    sid = "'r' || r || 's' || s"
    return f"""
    WITH st AS (
        SELECT r, s, 1.77e9 + r * 37.0 + s * {STEP_S}.0 AS t0
        FROM range({runs}) a(r), range({steps}) b(s)
    ), tr AS (
        SELECT r, s, t0, k, t0 + (k % 7) AS ts_start,
               t0 + 60 + (k * 1.3) % ({GEN_S} - 61) AS ts_gen,
               t0 + 60 + (k * 1.3) % ({GEN_S} - 61) + 5 + (k % 11)
                 + CASE WHEN k = {TRAJ - 1} THEN {STEP_S - GEN_S - 90} ELSE 0 END AS ts_done
        FROM st, range({TRAJ}) c(k)
    ), ticks AS (
        SELECT r, s, t0, j, t0 + j * 10.0 AS ts FROM st, range({STEP_S // 10}) d(j)
    )
    SELECT ts, raw FROM (
        SELECT t0 AS ts, {obj("step.started", src_t, "t0", sid + " || 'a'", "'step', s")} AS raw
        FROM st
        UNION ALL
        SELECT t0 + {STEP_S - 5}, {
        obj(
            "step.done",
            src_t,
            f"t0 + {STEP_S - 5}",
            sid + " || 'b'",
            "'step', s",
            f"'duration_s', {STEP_S - 5}",
            f"'timing', json_object('gen', {GEN_S}, 'update_actor', 120)",
        )
    } FROM st
        UNION ALL
        SELECT t0 + {STEP_S - 6}, {
        obj("reward", src_t, f"t0 + {STEP_S - 6}", sid + " || 'c'", "'step', s", "'mean', 0.5")
    } FROM st
        UNION ALL
        SELECT t0 + {STEP_S - 6}, {
        obj(
            "step.metrics",
            src_t,
            f"t0 + {STEP_S - 6}",
            sid + " || 'd'",
            "'step', s",
            "'metrics', json_object('critic/score/mean', 0.5, 'actor/grad_norm', 0.8)",
        )
    } FROM st
        UNION ALL
        SELECT ts_start, {
        obj(
            "trajectory.started",
            src_r,
            "ts_start",
            sid + " || 't' || k || 'a'",
            "'traj', 's' || s || 't' || k",
            "'step', s",
        )
    } FROM tr
        UNION ALL
        SELECT ts_gen, {
        obj(
            "trajectory.phase",
            src_r,
            "ts_gen",
            sid + " || 't' || k || 'b'",
            "'traj', 's' || s || 't' || k",
            "'phase', 'sandbox'",
        )
    } FROM tr
        UNION ALL
        SELECT ts_done, {
        obj(
            "trajectory.done",
            src_r,
            "ts_done",
            sid + " || 't' || k || 'c'",
            "'traj', 's' || s || 't' || k",
            "'status', 'ok'",
            "'reward', 0.5",
        )
    } FROM tr
        UNION ALL
        SELECT ts, {
        obj(
            "inference.stats",
            src_i,
            "ts",
            sid + " || 'i' || j",
            "'server', 'vllm-0'",
            f"'running', CASE WHEN j * 10 < {GEN_S} THEN 32 ELSE 0 END",
            "'waiting', 0",
        )
    } FROM ticks
        UNION ALL
        SELECT ts, {obj("heartbeat", src_t, "ts", sid + " || 'h' || j")} FROM ticks
        UNION ALL
        SELECT ts, {obj("heartbeat", src_r, "ts", sid + " || 'g' || j")} FROM ticks
        UNION ALL
        SELECT ts, {obj("heartbeat", src_i, "ts", sid + " || 'f' || j")} FROM ticks
    )"""


def events_per_step() -> int:
    return 4 + 3 * TRAJ + 4 * (STEP_S // 10)


def generate(db: Path, events: int, steps: int = 100) -> tuple[int, float]:
    runs = max(1, round(events / (events_per_step() * steps)))
    with Store.writer(db) as store:
        started = time.perf_counter()
        store.con.execute(
            f"CREATE TEMP TABLE gen AS SELECT row_number() OVER (ORDER BY ts) AS seq, raw "
            f"FROM ({_generated_sql(runs, steps)})"
        )
        store.con.execute("BEGIN")
        store.con.execute(schema.insert_events_sql("gen")).fetchall()
        store.con.execute(schema.insert_marks_sql())  # what the writer folds per batch
        store.con.execute("COMMIT")
        store.con.execute("CHECKPOINT")
        elapsed = time.perf_counter() - started
        n = store.count_events()
    return n, elapsed


def time_query(db: Path, sql: str, repeat: int) -> tuple[float, float, float, int]:
    """(best, median, best CPU, rows) seconds for running `sql` to the last row, read-only.

    CPU seconds are of this process, all DuckDB threads together: on a shared machine they
    say more than the wall clock, which other jobs stretch."""
    times, cpus = [], []
    rows = 0
    with Store.reader(db) as store:
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            rows = len(store.con.execute(sql).fetchall())
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
    return min(times), statistics.median(times), min(cpus), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1M events for the views, 200k ingest")
    ap.add_argument("--events", type=int, help="events in the big history (default 10M)")
    ap.add_argument("--ingest", type=int, help="events through the sink path (default 1M)")
    ap.add_argument("--row-by-row", type=int, default=5000, help="events for the baseline")
    ap.add_argument("--batch", type=int, default=BATCH_SIZE)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ingest-repeat", type=int, default=3, help="sink-path runs (best counts)")
    ap.add_argument("--keep", metavar="DIR", help="keep the databases here")
    ap.add_argument("--no-kafka", action="store_true", help="skip the run through a real broker")
    ap.add_argument("--partitions", type=int, default=4, help="of runwatch.events, for --kafka")
    args = ap.parse_args()
    n_views = args.events or (1_000_000 if args.quick else 10_000_000)
    n_ingest = args.ingest or (200_000 if args.quick else 1_000_000)

    say(
        f"runwatch store bench: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, DuckDB {duckdb.__version__}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for old in root.glob("*.duckdb*"):
            if old.name.startswith(("sink", "rows", "big")):
                old.unlink()
        values = sample_values(n_ingest)
        rates = [bench_sink_path(values, root / f"sink{i}.duckdb", args.batch)
                 for i in range(args.ingest_repeat)]  # fmt: skip
        rate, flush_s, cpu = max(rates)
        untuned = [bench_sink_path(values, root / f"sink-gc{i}.duckdb", args.batch, tuned=False)
                   for i in range(args.ingest_repeat)]  # fmt: skip
        cpu_tuned = min(r[2] for r in rates)  # like with like: the least CPU of each
        cpu_untuned = min(r[2] for r in untuned)
        base = bench_row_by_row(values[: args.row_by_row], root / "rows.duckdb")
        say("")
        say("ingest (decode + store, per event)")
        say(
            f"  sink path, batches of {args.batch:,}: {rate:>12,.0f} events/s "
            f"(best of {args.ingest_repeat}; {n_ingest:,} events; CPU {cpu / n_ingest * 1e6:.1f} "
            f"us/event; {flush_s:.1f} s waiting for the writer thread)"
        )
        say(
            f"  the same, default gc thresholds: CPU {cpu_untuned / n_ingest * 1e6:.1f} us/event "
            f"against {cpu_tuned / n_ingest * 1e6:.1f} tuned (least of {args.ingest_repeat} runs)"
        )
        say(
            f"  row by row, one INSERT each:    {base:>12,.0f} events/s "
            f"({args.row_by_row:,} events)   -> batches are {rate / base:,.0f}x faster"
        )
        if not args.no_kafka:
            k_rate, k_cpu, k_batches = bench_sink_kafka(values, root, args.partitions)
            say(
                f"  runwatch sink through Kafka:    {k_rate:>12,.0f} events/s "
                f"({'steady, after the first of ' if k_batches > 1 else 'from the start, '}"
                f"{k_batches} batches; {args.partitions} partitions, "
                f"gzip; CPU {k_cpu:.1f} us/event)"
            )
        n, gen_s = generate(root / "big.duckdb", n_views)
        size = (root / "big.duckdb").stat().st_size
        say("")
        say(f"views over {n:,} stored events (generated + typed in {gen_s:.0f} s; "
              f"file {size / 1e9:.2f} GB)")  # fmt: skip
        queries = {
            "idle_gaps (all runs and steps)": "SELECT * FROM idle_gaps",
            "idle_gaps WHERE run = 'run-7'": "SELECT * FROM idle_gaps WHERE run = 'run-7'",
            "runs": "SELECT * FROM runs",
            "runs WHERE run = 'run-7'": "SELECT * FROM runs WHERE run = 'run-7'",
        }
        for name, sql in queries.items():
            best, med, cpu, rows = time_query(root / "big.duckdb", sql, args.repeat)
            say(f"  {name:<34} best {best * 1000:>7.0f} ms  median {med * 1000:>7.0f} ms"
                f"  CPU {cpu * 1000:>6.0f} ms  ({rows:,} rows)")  # fmt: skip
    if not args.quick:
        write_section("store", ["## The history: ingest and the views (`bench/store.py`)", "",
                                "```", *SAID, "```"])  # fmt: skip


if __name__ == "__main__":
    main()

"""`runwatch serve` as a user meets it: detection latency per fault, sustained events/s, and
memory and CPU per 1,000 concurrent simulated jobs. Figures only: nothing here asserts.

Detection latency. One job per fault (plus a healthy one) simulated at `--speed` against a
fresh `runwatch serve` over HTTP; the rules' time thresholds are scaled by the same factor
(`run.started.config`), so the latency is reported in *simulated* seconds, i.e. what a real
job would see: from the moment the fault begins (the simulator records it: the sandbox call
that never returns, the inference server's death, the orchestrator's death, the rank that
diverges) to the alert transition of the matching rule. It includes the rule's own threshold
(e.g. `heartbeat_lost.timeout` = 60 s) and the service's pipeline (HTTP, fsync, timer tick
every 0.25 s plus 0.5 s grace: ~0.75 wall seconds, i.e. x speed in simulated seconds).

Throughput. Pre-generated events POSTed in batches of `--batch` lines by `--clients`
threads as fast as the service acknowledges them (each request is fsynced before its 200).

Memory and CPU. `--jobs` (1,000) simulated jobs at real time against the service for
`--seconds`; the service's RSS and CPU seconds per wall second from /proc.

A reader on the history. Alert delay (from when heartbeat_lost is due to when /v1/alerts
shows it) and POST latency p50/p99 with nobody reading the history, and while another
process holds the DuckDB file open read-only (`runwatch sql`, a dashboard) the whole time.

A flood of run ids. `--flood` distinct run ids POSTed as fast as acknowledged, against the
default `--max-runs` and against a service with no cap (what it was before the cap): RSS
after, POST p99 during, and one /metrics scrape's size and time.

The HTTP front. POST p50/p99 and requests/s of the same app behind waitress (the front
`serve` uses) and behind the standard library's threading server (the obvious
alternative, and what `serve` used before), in process, same service.

    .venv/bin/python bench/serve.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from benchinfo import RESULTS, follow_alerts, machine, percentile, proc_stats, write_section
from restart import restart_serve

from harness.reader import HeldHistory
from runwatch.dev.deliver import HttpSink, KafkaSink, paced
from runwatch.dev.launch import ServeProcess
from runwatch.dev.simulate import EXPECTED_RULE, FAULTS, Cluster
from runwatch.emitters.kafka_security import PLAINTEXT


def _cluster(duration: float) -> Cluster:
    faults = [*FAULTS, "slow_but_healthy"]
    return Cluster(len(faults) + 1, faults=faults, seed=2, duration=duration, fault_step=2)


def latency(tmp: Path, speed: float, duration: float) -> list[str]:
    cluster, t0 = _cluster(duration), time.time() + 0.5
    seen: dict[str, float] = {}  # alert id -> wall time the JSON API first showed it
    with ServeProcess(tmp / "latency.duckdb") as serve:
        done = threading.Event()

        def poll() -> None:
            while not done.wait(0.05):
                for a in serve.get("/v1/alerts")["alerts"]:
                    seen.setdefault(a["id"], time.time())

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            sink = HttpSink(serve.url, None)
            for batch in paced(cluster.events(t0, speed)):
                sink.send(batch)
        finally:
            done.set()
            poller.join()
        alerts = serve.get("/v1/alerts")["alerts"]
    return report(f"through serve at {speed:g}x", cluster, t0, speed, alerts, seen)


def kafka_latency(tmp: Path, speed: float, duration: float) -> list[str]:
    """The same cluster through Kafka: a local broker, `runwatch worker`, runwatch.alerts."""

    from runwatch.dev.broker import KafkaBroker

    broker = KafkaBroker(tmp / "kafka")
    bootstrap = broker.start()
    prefix = f"lat{int(time.time())}."
    worker = subprocess.Popen(
        [sys.executable, "-m", "runwatch.cli", "worker", "--kafka", bootstrap,
         "--topic-prefix", prefix, "--app-id", prefix + "worker", "--partitions", "1"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(worker.stderr or ()), daemon=True)
    reader.start()
    alerts: list[dict[str, Any]] = []
    seen: dict[str, float] = {}
    done = threading.Event()

    def first_sight(a: dict[str, Any]) -> None:
        if a["id"] not in seen:
            seen[a["id"]] = time.time()
            alerts.append(a)

    def consume() -> None:
        follow_alerts(bootstrap, prefix + "runwatch.alerts", first_sight, done)

    consumer = threading.Thread(target=consume)
    try:
        deadline = time.monotonic() + 120
        while not any("live on partitions" in ln for ln in lines):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("worker did not go live: " + "".join(lines[-20:]))
            time.sleep(0.1)
        consumer.start()
        cluster, t0 = _cluster(duration), time.time() + 0.5
        sink = KafkaSink(bootstrap, prefix + "runwatch.events", PLAINTEXT)
        try:
            for batch in paced(cluster.events(t0, speed)):
                sink.send(batch)
        finally:
            sink.close()
        time.sleep(1.0)
    finally:
        done.set()
        if consumer.is_alive():
            consumer.join()
        worker.terminate()
        worker.wait(30)
        broker.stop()
    return report(
        f"through Kafka + runwatch worker at {speed:g}x", cluster, t0, speed, alerts, seen
    )


def report(
    where: str,
    cluster: Cluster,
    t0: float,
    speed: float,
    alerts: list[dict[str, Any]],
    seen: dict[str, float],
) -> list[str]:
    out = [
        f"detection latency {where}: simulated seconds from the fault's start until the "
        "alert is visible (the rule's threshold included); in brackets, wall seconds from "
        "the moment the condition ripened"
    ]
    for job in cluster.jobs:
        fault = job.spec.fault
        mine = [a for a in alerts if a["run"] == job.spec.run and a["state"] == "firing"]
        if fault not in EXPECTED_RULE:
            out.append(f"  {fault or 'healthy':<18} alerts: {len(mine)} (expected none)")
            continue
        rule = EXPECTED_RULE[fault]
        hits = [a for a in mine if a["rule"] == rule and a["id"] in seen]
        if job.fault_at is None or not hits:
            out.append(f"  {fault:<18} {rule}: not detected within {cluster.duration:g} s")
            continue
        onset = t0 + job.fault_at / speed
        hit = min(hits, key=lambda a: seen[a["id"]])
        lat = (seen[hit["id"]] - onset) * speed
        pipeline = seen[hit["id"]] - hit["ts"]
        first = min(mine, key=lambda a: seen.get(a["id"], a["ts"]))
        out.append(
            f"  {fault:<18} {rule}: {lat:4.0f} s  [{pipeline:.2f} s]  (first alert of "
            f"the run: {first['rule']})"
        )
    return out


def throughput(tmp: Path, seconds: float, clients: int, batch: int) -> list[str]:
    events = list(Cluster(200, seed=9, duration=1800.0).events(time.time() - 1800.0))
    bodies = [
        b"".join(orjson.dumps(e) + b"\n" for e in events[i : i + batch])
        for i in range(0, len(events), batch)
    ]
    sent = [0] * clients
    with ServeProcess(tmp / "throughput.duckdb") as serve:
        rss0, cpu0 = proc_stats(serve.pid)
        stop = time.monotonic() + seconds

        def client(k: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
            i = k
            while time.monotonic() < stop and i < len(bodies):
                conn.request("POST", "/v1/events", bodies[i])
                resp = conn.getresponse()
                body = json.loads(resp.read())
                sent[k] += body.get("accepted", 0)
                i += clients
            conn.close()

        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        rss1, cpu1 = proc_stats(serve.pid)
    total = sum(sent)
    return [
        f"sustained ingest: {total / elapsed:,.0f} events/s acknowledged ({total:,} events, "
        f"{clients} clients, {batch} lines per request, fsync per request); service CPU "
        f"{(cpu1 - cpu0) / elapsed:.2f} s/s, RSS {rss0:.0f} -> {rss1:.0f} MiB"
    ]


def per_jobs(tmp: Path, jobs: int, seconds: float) -> list[str]:
    with ServeProcess(tmp / "jobs.duckdb") as serve:
        sim = subprocess.Popen(
            [sys.executable, "-m", "runwatch.cli", "simulate", "--url", serve.url, "--jobs",
             str(jobs), "--duration", str(seconds + 120), "--trajectories", "16"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(min(20.0, seconds / 3))  # warm up: every job has started
            _, cpu0 = proc_stats(serve.pid)
            runs0 = len(serve.get("/v1/runs")["runs"])
            events0 = _accepted(serve)
            start = time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - start
            rss1, cpu1 = proc_stats(serve.pid)
            events1 = _accepted(serve)
            runs1 = len(serve.get("/v1/runs")["runs"])
        finally:
            sim.terminate()
            sim.wait()
    per_s = (events1 - events0) / elapsed
    return [
        f"{jobs:,} concurrent jobs at real time ({runs0}->{runs1} runs live, {per_s:,.0f} "
        f"events/s): service RSS {rss1:.0f} MiB, CPU {(cpu1 - cpu0) / elapsed:.2f} cores"
    ]


def _post(port: int, body: bytes) -> float:
    """One POST on a new connection; its latency in ms."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/events", body)
        conn.getresponse().read()
    finally:
        conn.close()
    return (time.perf_counter() - started) * 1000


def _probe_events(run: str, timeout: float) -> bytes:
    now = time.time()
    src = {"component": "trainer", "host": "bench", "pid": 1}
    out = [
        {"v": 1, "id": f"{run}-0", "ts": now, "run": run, "kind": "run.started", "src": src,
         "config": {"heartbeat_lost": {"timeout": timeout}}},
        {"v": 1, "id": f"{run}-1", "ts": now, "run": run, "kind": "heartbeat", "src": src},
    ]  # fmt: skip
    return b"".join(orjson.dumps(e) + b"\n" for e in out)


def _alert_delays(serve: ServeProcess, tag: str, probes: int) -> tuple[list[float], list[float]]:
    """(alert delays s, POST latencies ms) of `probes` runs whose heartbeat_lost is due 1 s
    after their POST, with background POSTs of 100 events every 50 ms meanwhile."""
    events = list(Cluster(50, seed=4, duration=600.0).events(time.time() - 600.0))
    posts: list[float] = []
    done = threading.Event()

    def background() -> None:  # the same load in every phase: new ids, stamped when sent
        for i in range(0, len(events), 100):
            if done.wait(0.05):
                return
            now = time.time()
            body = b"".join(
                orjson.dumps({**e, "id": f"{tag}-{e['id']}", "run": f"{tag}-{e['run']}",
                              "ts": now}) + b"\n"
                for e in events[i : i + 100]
            )  # fmt: skip
            posts.append(_post(serve.port, body))

    worker = threading.Thread(target=background)
    worker.start()
    delays = []
    try:
        for k in range(probes):
            run = f"probe-{tag}-{k}"
            sent = time.time()
            posts.append(_post(serve.port, _probe_events(run, 1.0)))
            while not any(a["run"] == run for a in serve.get("/v1/alerts?state=firing")["alerts"]):
                time.sleep(0.02)
            delays.append(time.time() - (sent + 1.0))
    finally:
        done.set()
        worker.join()
    return delays, posts


def reader_hold(tmp: Path, probes: int) -> list[str]:
    db = tmp / "reader.duckdb"
    out = []
    with ServeProcess(db) as serve:
        _post(serve.port, _probe_events("warmup", 3600.0))
        while not serve.get("/metrics").count("runwatch_serve_history_lag_bytes 0.0"):
            time.sleep(0.1)
        for label in ("no reader", "a reader holds the history"):
            holder = HeldHistory(db) if label != "no reader" else None
            try:
                delays, posts = _alert_delays(serve, label.split()[0], probes)
            finally:
                if holder is not None:
                    holder.release()
            out.append(
                f"{label}: alert delay p50 {percentile(delays, 0.5):.2f} s, p99 "
                f"{percentile(delays, 0.99):.2f} s ({len(delays)} alerts); POST p50 "
                f"{percentile(posts, 0.5):.1f} ms, p99 {percentile(posts, 0.99):.1f} ms "
                f"({len(posts)} POSTs)"
            )
    return out


def flood(tmp: Path, ids: int) -> list[str]:
    out = []
    now = time.time()
    src = {"component": "trainer"}
    bodies = [
        b"".join(orjson.dumps({"v": 1, "id": f"f-{i}", "ts": now, "run": f"flood-{i}",
                               "kind": "heartbeat", "src": src}) + b"\n"
                 for i in range(start, min(ids, start + 1000)))
        for start in range(0, ids, 1000)
    ]  # fmt: skip
    for label, cap in (("--max-runs 10000 (default)", 10_000), ("no cap", 10**9)):
        with ServeProcess(tmp / f"flood-{cap}.duckdb", args=["--max-runs", str(cap)]) as serve:
            posts = [_post(serve.port, body) for body in bodies]
            rss, _ = proc_stats(serve.pid)
            started = time.perf_counter()
            size = len(serve.get("/metrics"))
            scrape = time.perf_counter() - started
            runs = len(serve.get("/v1/runs")["runs"])
        out.append(
            f"flood of {ids:,} run ids, {label}: {runs:,} runs tracked, RSS {rss:.0f} MiB, "
            f"POST p99 {percentile(posts, 0.99):.0f} ms, /metrics {size / 1e6:.1f} MB in "
            f"{scrape:.2f} s"
        )
    return out


def http_front(tmp: Path, seconds: float) -> list[str]:
    """The same app behind waitress and behind the standard library's threading server."""
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    from runwatch.service.core import Service
    from runwatch.service.http import App, ServiceServer

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    class Threading(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True

    events = list(Cluster(100, seed=5, duration=600.0).events(time.time() - 600.0))
    bodies = [b"".join(orjson.dumps(e) + b"\n" for e in events[i : i + 100])
              for i in range(0, len(events), 100)]  # fmt: skip
    out = []
    for label in ("waitress", "stdlib ThreadingHTTPServer"):
        service = Service(tmp / f"front-{label[:5]}.duckdb", tmp / f"front-{label[:5]}.serve")
        service.recover()
        if label == "waitress":
            front: Any = ServiceServer(("127.0.0.1", 0), service, None)
            port = front.server_address[1]
            front.start()
        else:
            front = Threading(("127.0.0.1", 0), Quiet)
            front.set_app(App(service, None))
            port = front.server_address[1]
            runner = threading.Thread(target=front.serve_forever)
            runner.start()
        latencies: list[float] = []

        def client(k: int, port: int, stop: float, latencies: list[float]) -> None:
            i = k
            while time.monotonic() < stop:
                latencies.append(_post(port, bodies[i % len(bodies)]))
                i += 2

        started = time.monotonic()
        stop = started + seconds
        clients = [threading.Thread(target=client, args=(k, port, stop, latencies))
                   for k in range(2)]  # fmt: skip
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        elapsed = time.monotonic() - started
        if label == "waitress":
            front.stop()
        else:
            front.shutdown()
            runner.join()
            front.server_close()
        service.close()
        out.append(
            f"HTTP front {label}: {len(latencies) / elapsed:,.0f} POSTs/s of 100 events, "
            f"p50 {percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms"
        )
    return out


def _accepted(serve: ServeProcess) -> float:
    for line in serve.get("/metrics").splitlines():
        if line.startswith("runwatch_serve_accepted_events_total "):
            return float(line.split()[1])
    return 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--speed", type=float, default=20.0)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--no-kafka", action="store_true", help="skip the Kafka comparison")
    p.add_argument("--flood", type=int, default=200_000, help="run ids in the flood")
    p.add_argument("--retained", default="300000,1000000,3000000",
                   help="event-log sizes for the restart part, comma-separated")  # fmt: skip
    p.add_argument("--only", choices=["reader", "flood", "front", "jobs", "restart"],
                   help="run one part only (printed, not written)")  # fmt: skip
    p.add_argument("--dir", default=".cache/bench-serve", help="histories and service logs")
    p.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md")
    args = p.parse_args()
    where = machine()
    print(where)
    tmp = Path(args.dir)  # kept: the services' logs are there if something went wrong
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lines: list[str] = []
    sizes = [int(x) // (10 if args.quick else 1) for x in args.retained.split(",")]
    if args.only:
        part = {"reader": lambda: reader_hold(tmp, 5 if args.quick else 20),
                "flood": lambda: flood(tmp, args.flood // (4 if args.quick else 1)),
                "front": lambda: http_front(tmp, 5.0 if args.quick else 15.0),
                "jobs": lambda: per_jobs(tmp, args.jobs // (4 if args.quick else 1),
                                         15.0 if args.quick else 40.0),
                "restart": lambda: restart_serve(sizes),
                }[args.only]  # fmt: skip
        for line in part():
            print(line)
        return
    speed = args.speed * (2 if args.quick else 1)
    lines += latency(tmp, speed, 900.0)
    if not args.no_kafka:
        lines += kafka_latency(tmp, speed, 900.0)
    lines += throughput(tmp, 5.0 if args.quick else 15.0, args.clients, args.batch)
    lines += per_jobs(tmp, args.jobs // (4 if args.quick else 1), 15.0 if args.quick else 40.0)
    lines += reader_hold(tmp, 5 if args.quick else 20)
    lines += flood(tmp, args.flood // (4 if args.quick else 1))
    lines += http_front(tmp, 5.0 if args.quick else 15.0)
    lines += restart_serve(sizes)
    for line in lines:
        print(line)
    if not args.no_write:
        run = "quick run" if args.quick else "full run"
        head = ["## Embedded service (`bench/serve.py`)", "", where, "", f"One {run}:", ""]
        write_section("serve", [*head, "```", *lines, "```"])
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

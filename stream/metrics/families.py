"""The metric families one scrape of `RunwatchMetrics` fills, and their text rendering.

A scrape adds tens of thousands of samples; prometheus-client's own families and text
writer cost several times more per sample (`bench/exporter.py`; figures in
bench/RESULTS.md). `Family` keeps samples as plain tuples and renders the text exposition
format directly (label values escaped once per distinct value), so the worker's event loop
is held for far less per scrape. It also
converts to prometheus-client `Metric`s for any registry-based consumer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class Family:
    """One metric family: name, help, label names, and (label values, value) samples."""

    __slots__ = ("counter", "doc", "labels", "name", "samples")

    def __init__(
        self, name: str, doc: str, labels: Sequence[str] = (), *, counter: bool = False
    ) -> None:
        self.name = name
        self.doc = doc
        self.labels = tuple(labels)
        self.counter = counter
        self.samples: list[tuple[Sequence[str], float]] = []

    def add(self, values: Sequence[str], value: float) -> None:
        self.samples.append((values, value))

    def metric(self) -> Metric:
        """As a prometheus-client family (for `CollectorRegistry` / `generate_latest`)."""
        m: Metric
        if self.counter:
            m = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        else:
            m = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        for values, value in self.samples:
            m.add_metric(list(values), value)
        return m

    def render(self, out: list[str], escaped: dict[str, str]) -> None:
        """Append this family in the Prometheus text format (version 0.0.4) to `out`."""
        kind = "counter" if self.counter else "gauge"
        sample = f"{self.name}_total" if self.counter else self.name
        out.append(f"# HELP {sample} {_doc(self.doc)}\n")
        out.append(f"# TYPE {sample} {kind}\n")
        names = self.labels
        append = out.append
        if not names:
            for _, value in self.samples:
                append(f"{sample} {_number(value)}\n")
            return
        # a sample's line is its label values between the family's fixed parts: `heads[i]`
        # before value i (`sample{name="`, then `",name="`), `"} ` after the last
        heads = [f'{sample}{{{names[0]}="', *(f'",{n}="' for n in names[1:])]
        if len(names) == 1:  # (most families: per run; written out, no inner loop)
            head = heads[0]
            for (v,), value in self.samples:
                e = escaped.get(v)
                if e is None:
                    e = escaped[v] = _escape(v)
                if value == value and value != _INF and value != -_INF:  # (`_number`)
                    append(f'{head}{e}"}} {float(value)!r}\n')
                else:
                    append(f'{head}{e}"}} {_number(value)}\n')
            return
        for values, value in self.samples:
            if len(values) != len(names):
                raise ValueError(f"{sample}: {len(values)} label values for {len(names)} names")
            for head, v in zip(heads, values, strict=False):  # (lengths checked above)
                e = escaped.get(v)
                if e is None:
                    e = escaped[v] = _escape(v)
                append(head)
                append(e)
            append(f'"}} {_number(value)}\n')


def render(families: Sequence[Family]) -> bytes:
    out: list[str] = []
    escaped: dict[str, str] = {}
    for f in families:
        f.render(out, escaped)
    return "".join(out).encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _doc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


_INF = math.inf


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Families:
    """Every family one scrape yields (built fresh per scrape: no state between scrapes)."""

    def __init__(self) -> None:
        g = Family
        r = ["run"]
        self.info = g(
            "runwatch_run_info",
            "1 per visible run; status: running/ok/failed/killed",
            labels=[*r, "status"],
        )
        self.label = g(
            "runwatch_run_label",
            "run.started labels, one series each",
            labels=[*r, "name", "value"],
        )
        self.last_event = g(
            "runwatch_run_last_event_age_seconds", "seconds since the run's latest event", labels=r
        )
        self.started = g("runwatch_run_started_timestamp_seconds", "run.started time", labels=r)
        self.pending = g(
            "runwatch_trajectories_pending",
            "trajectories started and not finished, by current phase",
            labels=[*r, "phase"],
        )
        self.oldest = g(
            "runwatch_trajectory_oldest_pending_age_seconds",
            "age of the oldest pending trajectory (0: none)",
            labels=r,
        )
        self.oldest_phase = g(
            "runwatch_trajectory_oldest_pending_phase_seconds",
            "time the oldest pending trajectory has spent in its phase",
            labels=r,
        )
        self.running = g(
            "runwatch_inference_running",
            "requests running per inference server",
            labels=[*r, "server"],
        )
        self.waiting = g(
            "runwatch_inference_waiting",
            "requests waiting per inference server",
            labels=[*r, "server"],
        )
        self.kv = g(
            "runwatch_inference_kv_cache_usage",
            "KV-cache usage 0..1 per server",
            labels=[*r, "server"],
        )
        self.server_idle = g(
            "runwatch_inference_server_idle",
            "1 when the server is live and idle (nothing running or waiting)",
            labels=[*r, "server"],
        )
        self.idle_pending = g(
            "runwatch_inference_idle_with_pending",
            "1 while every server is idle and trajectories wait",
            labels=r,
        )
        self.idle_pending_s = g(
            "runwatch_inference_idle_with_pending_seconds",
            "how long every server has been idle while work waits",
            labels=r,
        )
        pl = [*r, "component", "name"]
        self.progress_n = g("runwatch_progress_n", "progress counter value", labels=pl)
        self.progress_total = g("runwatch_progress_total", "progress counter total", labels=pl)
        self.progress_stall = g(
            "runwatch_progress_stall_seconds", "seconds since the counter last advanced", labels=pl
        )
        self.step = g("runwatch_step", "highest training step seen", labels=r)
        self.step_total = g("runwatch_step_total", "run.started total_steps", labels=r)
        self.step_done = g("runwatch_step_last_done", "the last finished step", labels=r)
        self.step_duration = g(
            "runwatch_step_duration_seconds", "duration of the last finished step", labels=r
        )
        self.step_gap = g(
            "runwatch_step_idle_gap_seconds",
            "GPU-idle gap of the last finished step (idle while work waited)",
            labels=r,
        )
        self.step_phase = g(
            "runwatch_step_phase_seconds",
            "the last step.done's timing by phase",
            labels=[*r, "phase"],
        )
        self.reward = g("runwatch_step_reward", "reward of the latest step that has one", labels=r)
        self.reward_step = g(
            "runwatch_step_reward_step", "the step runwatch_step_reward is of", labels=r
        )
        self.heartbeat = g(
            "runwatch_heartbeat_age_seconds",
            "seconds since the last heartbeat of the component's stalest live process",
            labels=[*r, "component"],
        )
        self.processes = g(
            "runwatch_processes",
            "processes by component and alive/lost/exited",
            labels=[*r, "component", "state"],
        )
        self.dropped = g(
            "runwatch_emitter_dropped_events",
            "events the component's processes said (in heartbeats) they dropped: the monitor "
            "is missing that many",
            labels=[*r, "component"],
        )
        self.ranks = g("runwatch_ranks", "trainer ranks by current phase", labels=[*r, "phase"])
        self.ranks_change = g(
            "runwatch_ranks_since_change_seconds", "seconds since any rank changed phase", labels=r
        )
        self.alerts = g(
            "runwatch_alerts_firing",
            "firing alerts by rule and severity",
            labels=[*r, "rule", "severity"],
        )
        self.incidents = g(
            "runwatch_incidents_open",
            "open incidents of the run by the rule of their root cause",
            labels=[*r, "root_rule"],
        )
        self.alerts_total = g(
            "runwatch_alerts_firing_total_per_run", "firing alerts of the run, all rules", labels=r
        )
        self.fleet = g(
            "runwatch_fleet_incident_runs",
            "open fleet incidents (shared_cause): the runs each holds, by cause "
            "(dep:/host:/server: NAME) and its kind",
            labels=["cause", "kind"],
        )
        self.runs = g(
            "runwatch_runs", "runs exported, live or finished (within the grace)", labels=["state"]
        )
        self.events = Family(
            "runwatch_events", "events applied, by kind", labels=["kind"], counter=True
        )
        self.invalid = Family(
            "runwatch_events_invalid", "invalid events (dead-lettered)", counter=True
        )
        self.transitions = Family(
            "runwatch_alert_transitions",
            "alert transitions by rule, state, severity",
            labels=["rule", "state", "severity"],
            counter=True,
        )
        self.lag = g(
            "runwatch_processing_lag_seconds",
            "wall clock minus arrival time of the latest event processed",
        )

    def all(self) -> list[Family]:
        return [v for v in vars(self).values() if isinstance(v, Family)]

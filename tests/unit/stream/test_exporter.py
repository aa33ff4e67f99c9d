"""The Prometheus collector: values read from run states at scrape time, bounded labels,
finished runs dropping out after the grace, service counters."""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from typing import Any

import pytest
from helpers import ROLLOUT, VLLM, decoded, make_event
from prometheus_client import CollectorRegistry, generate_latest

from runwatch.dev import scenarios
from runwatch.stream.engine import Engine
from runwatch.stream.metrics.exporter import Limits, RunwatchMetrics
from runwatch.stream.metrics.worker import WorkerMetrics

SANDBOX = "grpo-qwen2.5-7b-sandbox"


def feed(engine: Engine, events: list[dict[str, Any]]) -> list[Any]:
    out = []
    for e in events:
        out += engine.apply(decoded(e))
    return out


def sandbox_mid_stall() -> list[dict[str, Any]]:
    events = scenarios.sandbox_hang()
    cut = events[-1]["ts"] - 40 * 60
    return [e for e in events if e["ts"] < cut]


def setup(**kw: Any) -> tuple[CollectorRegistry, RunwatchMetrics, Engine]:
    registry = CollectorRegistry()
    metrics = RunwatchMetrics(registry, **kw)
    engine = metrics.instrument(Engine())
    return registry, metrics, engine


def value(registry: CollectorRegistry, metric: str, /, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


def series(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_the_sandbox_hang_as_gauges() -> None:
    registry, _, engine = setup()
    feed(engine, sandbox_mid_stall())
    run = {"run": SANDBOX}
    assert value(registry, "runwatch_trajectories_pending", **run, phase="sandbox") == 1
    assert value(registry, "runwatch_trajectories_pending", **run, phase="generate") == 0
    assert value(registry, "runwatch_inference_running", **run, server="vllm-0") == 0
    assert value(registry, "runwatch_inference_server_idle", **run, server="vllm-0") == 1
    assert value(registry, "runwatch_inference_idle_with_pending", **run) == 1
    idle = value(registry, "runwatch_inference_idle_with_pending_seconds", **run)
    assert idle == pytest.approx(59 * 60, abs=60)
    oldest = value(registry, "runwatch_trajectory_oldest_pending_age_seconds", **run)
    assert oldest is not None
    assert oldest > idle
    rollout = {**run, "component": "rollout", "name": "Rollout"}
    assert value(registry, "runwatch_progress_n", **rollout) == 511
    assert value(registry, "runwatch_progress_total", **rollout) == 512
    assert value(registry, "runwatch_step", **run) == 4
    assert value(registry, "runwatch_step_last_done", **run) == 3
    assert value(registry, "runwatch_step_idle_gap_seconds", **run) == 26 * 60
    assert value(registry, "runwatch_step_reward", **run) == pytest.approx(0.45)
    assert value(registry, "runwatch_step_phase_seconds", **run, phase="update_actor") == 600
    assert value(registry, "runwatch_heartbeat_age_seconds", **run, component="trainer") == 0
    assert value(registry, "runwatch_run_label", **run, name="team", value="reasoning") == 1
    firing = {"run": SANDBOX, "rule": "inference_idle_with_pending", "severity": "critical"}
    assert value(registry, "runwatch_alerts_firing", **firing) == 1
    # the Grafana annotation of incidents: one open, named by its root cause
    root = {"run": SANDBOX, "root_rule": "inference_idle_with_pending"}
    assert value(registry, "runwatch_incidents_open", **root) == 1
    assert value(registry, "runwatch_runs", state="live") == 1


def test_step_reward_from_metrics_when_no_reward_event() -> None:
    """The zero-reward incident logs its reward only as step.metrics' critic/score/mean."""
    registry, _, engine = setup()
    events = [e for e in scenarios.zero_reward(last_step=160) if e["kind"] != "run.finished"]
    feed(engine, events)
    last = [e for e in events if e["kind"] == "step.metrics"][-1]
    run = {"run": last["run"]}
    assert value(registry, "runwatch_step_reward", **run) == last["metrics"]["critic/score/mean"]
    assert value(registry, "runwatch_step_reward", **run) > 0


def test_service_counters_match_what_the_engine_did() -> None:
    registry, metrics, engine = setup()
    events = scenarios.zero_reward(last_step=200)
    alerts = feed(engine, events)
    alerts += engine.advance(events[-1]["ts"] + 3600)
    assert value(registry, "runwatch_events_total", kind="step.done") == 51
    total = sum(
        v or 0
        for k in {e["kind"] for e in events}
        for v in [value(registry, "runwatch_events_total", kind=k)]
    )
    assert total == len(events)
    for rule in {a.rule for a in alerts}:
        for st in ("firing", "resolved"):
            made = [a for a in alerts if a.rule == rule and a.state == st]
            if made:
                labels = {"rule": rule, "state": st, "severity": made[0].severity}
                assert value(registry, "runwatch_alert_transitions_total", **labels) == len(made)
    metrics.record_invalid(3)
    metrics.record_lag(1.5)
    assert value(registry, "runwatch_events_invalid_total") == 3
    assert value(registry, "runwatch_processing_lag_seconds") == 1.5


def test_a_finished_run_disappears_after_the_grace() -> None:
    registry, metrics, engine = setup(finished_grace=300)
    events = scenarios.healthy_long_steps(steps=1)
    feed(engine, events)
    end = events[-1]["ts"]
    run = "grpo-qwen2.5-72b-healthy"
    assert value(registry, "runwatch_run_info", run=run, status="ok") == 1
    engine.advance(end + 299)
    assert value(registry, "runwatch_run_info", run=run, status="ok") == 1
    engine.advance(end + 301)
    assert not [s for s in series(registry) if run in s]
    assert value(registry, "runwatch_runs", state="finished") == 0
    assert run not in metrics.step_timing  # nothing kept for it any more


def test_a_silent_unfinished_run_goes_stale() -> None:
    registry, _, engine = setup(stale_after=3600)
    feed(engine, [make_event("run.started", 1000.0, run="gone")])
    engine.advance(1000.0 + 3599)
    assert value(registry, "runwatch_run_info", run="gone", status="running") == 1
    engine.advance(1000.0 + 3601)
    assert value(registry, "runwatch_run_info", run="gone", status="running") is None


def test_labels_stay_bounded() -> None:
    """Thousands of trajectories, requests and phases: the series count per run is capped."""
    registry, _, engine = setup(limits=Limits(phases=4, servers=3))
    events: list[dict[str, Any]] = [make_event("run.started", 0.0, run="big")]
    for i in range(2000):
        events.append(make_event("trajectory.started", 1.0, run="big", src=ROLLOUT, traj=f"t{i}"))
        events.append(
            make_event(
                "trajectory.phase", 2.0, run="big", src=ROLLOUT, traj=f"t{i}", phase=f"tool{i % 50}"
            )
        )
        events.append(
            make_event(
                "request.queued", 2.0, run="big", src=VLLM, req=f"q{i}", server=f"srv{i % 7}"
            )
        )
    feed(engine, events)
    lines = series(registry)
    pending = [s for s in lines if s.startswith("runwatch_trajectories_pending{")]
    assert len(pending) == 4
    assert sum(float(s.rsplit(" ", 1)[1]) for s in pending) == 2000
    assert any('phase="other"' in s for s in pending)
    running = [s for s in lines if s.startswith("runwatch_inference_running{")]
    assert len(running) == 4  # three servers by name, the rest as "other"
    assert not any("t1" in s.split("{", 1)[1] for s in lines if "traj" in s)
    assert len([s for s in lines if 'run="big"' in s]) < 40


def test_registries_are_independent_and_registration_does_not_scrape() -> None:
    r1, m1, e1 = setup()
    r2, _, _ = setup()
    feed(e1, [make_event("run.started", 1.0, run="only-here")])
    assert value(r1, "runwatch_run_info", run="only-here", status="running") == 1
    assert value(r2, "runwatch_run_info", run="only-here", status="running") is None
    assert m1.scrapes == 1


def test_instrument_twice_counts_once() -> None:
    registry, metrics, engine = setup()
    metrics.instrument(engine)
    feed(engine, [make_event("run.started", 1.0)])
    assert value(registry, "runwatch_events_total", kind="run.started") == 1


def test_unknown_kinds_are_capped() -> None:
    registry, _, engine = setup()
    feed(engine, [make_event(f"custom.k{i}", float(i)) for i in range(100)])
    kinds = [s for s in series(registry) if s.startswith("runwatch_events_total{")]
    assert len(kinds) == 65
    assert value(registry, "runwatch_events_total", kind="other") == 100 - 64


def test_scrapes_from_another_thread_while_events_are_applied() -> None:
    registry, metrics, engine = setup()
    events = scenarios.sandbox_hang()[:30_000]
    errors: list[BaseException] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            try:
                generate_latest(registry)
            except BaseException as err:  # pragma: no cover - the failure being tested
                errors.append(err)

    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        feed(engine, events)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert metrics.scrapes > 0


def test_a_scrape_that_reads_torn_state_is_redone() -> None:
    """Without a lock, another thread may change a run's state between two reads of it (an
    incident's root gone from its members: a KeyError, seen under load); the scrape is
    redone, as for a dict changed mid-iteration, and never fails."""
    registry, metrics, engine = setup()
    feed(engine, [make_event("run.started", 1.0, run="torn")])
    reads = []

    def torn() -> list[Engine]:
        reads.append(1)
        if len(reads) == 1:
            raise KeyError("inference_idle_with_pending|torn")
        return []

    metrics.add_source(torn)
    assert 'runwatch_run_info{run="torn",status="running"} 1.0' in series(registry)
    assert len(reads) == 2


def test_served_over_http() -> None:
    _, metrics, engine = setup()
    feed(engine, [make_event("run.started", 1.0, run="web")])
    server = metrics.serve(0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics") as resp:
            body = resp.read().decode()
    finally:
        server.close()
    assert 'runwatch_run_info{run="web",status="running"} 1.0' in body


class _Driver:
    """What WorkerMetrics reads of a partition's driver: its engine."""

    def __init__(self) -> None:
        self.engine = Engine()


def _worker_metrics() -> tuple[dict[int, _Driver], WorkerMetrics]:
    """A worker's metrics over one live partition that holds run `w` and saw one invalid
    record, the last of its records arriving at t=0."""
    drivers = {0: _Driver()}
    wm = WorkerMetrics(drivers.values, 0, "127.0.0.1")
    wm.live(drivers[0])
    feed(drivers[0].engine, [make_event("run.started", 1.0, run="w")])
    wm.batch(0.0, invalid=1)
    return drivers, wm


def test_worker_metrics_hooks_and_async_endpoint() -> None:
    drivers, wm = _worker_metrics()
    alerts = feed(drivers[0].engine, [])
    wm.published(alerts)

    async def scrape() -> str:
        await wm.start()
        try:
            url = f"http://127.0.0.1:{wm.server.port}/metrics"
            return await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())
        finally:
            await wm.close()

    body = asyncio.run(scrape())
    assert 'runwatch_run_info{run="w",status="running"} 1.0' in body
    assert "runwatch_events_invalid_total 1.0" in body
    assert 'runwatch_events_total{kind="run.started"} 1.0' in body
    assert "runwatch_processing_lag_seconds" in body
    del drivers[0]  # a partition taken away: its runs leave the scrape
    assert 'run="w"' not in generate_latest(wm.registry).decode()


def test_a_scrape_that_names_families_gets_only_those() -> None:
    """`/metrics?name[]=...` (how a bench samples the lag every 2 s): only the named
    families, and one of the service-wide ones alone visits no run."""
    _, wm = _worker_metrics()
    visited: list[str] = []
    full_run = wm.collector._run
    wm.collector._run = lambda f, run, *a: (visited.append(run), full_run(f, run, *a))[1]

    async def scrape(query: str) -> str:
        url = f"http://127.0.0.1:{wm.server.port}/metrics{query}"
        return await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())

    async def main() -> list[str]:
        await wm.start()
        try:
            lag = "?name[]=runwatch_processing_lag_seconds"
            return [
                await scrape(lag),
                await scrape("?name[]=runwatch_events_total&name[]=runwatch_run_info"),
                await scrape(""),
            ]
        finally:
            await wm.close()

    lag, two, whole = asyncio.run(main())
    samples = [line for line in lag.splitlines() if not line.startswith("#")]
    assert len(samples) == 1
    assert samples[0].startswith("runwatch_processing_lag_seconds ")
    assert 'runwatch_events_total{kind="run.started"} 1.0' in two
    assert 'runwatch_run_info{run="w",status="running"} 1.0' in two
    assert "runwatch_processing_lag_seconds" not in two
    assert "invalid" not in two
    assert visited == ["w", "w"]  # the named run family and the whole body; not the lag
    assert "runwatch_events_invalid_total 1.0" in whole
    assert "runwatch_run_info" in whole


def test_bad_grace_fails_early() -> None:
    with pytest.raises(ValueError, match="finished_grace"):
        RunwatchMetrics(finished_grace=-1)


def test_direct_text_equals_prometheus_client_rendering() -> None:
    """`exposition()` writes the families itself; it must say what generate_latest says."""
    from prometheus_client import Counter
    from prometheus_client.parser import text_string_to_metric_families

    registry, metrics, engine = setup()
    other = Counter("other_things", "a collector beside runwatch's", registry=registry)
    other.inc(2)
    events = sandbox_mid_stall()
    events.append(
        make_event("run.started", events[-1]["ts"], run="odd", labels={"k": 'a\\b "c"\nd'})
    )
    feed(engine, events)
    metrics.record_lag(float("inf"))

    def samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], str]]:
        return {
            (s.name, tuple(sorted(s.labels.items())), repr(s.value))
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if not s.name.endswith("_created")
        }

    fast = metrics.exposition().decode()
    slow = generate_latest(registry).decode()
    assert samples(fast) == samples(slow)
    assert fast.count("# TYPE runwatch_events_total counter") == 1
    assert "other_things_total 2.0" in fast


def busy_run(run: str, t: float) -> list[dict[str, Any]]:
    """A run with a server, a bar, pending trajectories and a step: many families each."""
    return [
        make_event("run.started", t, run=run, labels={"team": "rl"}),
        make_event("heartbeat", t, run=run, src=VLLM),
        make_event("heartbeat", t, run=run, src=ROLLOUT),
        make_event(
            "inference.stats",
            t + 1,
            run=run,
            src=VLLM,
            server="vllm-0",
            running=4,
            waiting=1,
            kv_cache_usage=0.5,
        ),
        make_event("trajectory.started", t + 1, run=run, src=ROLLOUT, traj="a"),
        make_event("progress", t + 1, run=run, src=ROLLOUT, name="Rollout", n=3, total=8),
        make_event("step.done", t + 2, run=run, step=1, duration_s=2.0),
    ]


def per_run(registry: CollectorRegistry) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in series(registry):
        if 'run="' in line:
            out.setdefault(line.split('run="', 1)[1].split('"', 1)[0], []).append(line)
    return out


def test_a_large_fleet_shows_quiet_runs_briefly_and_alerting_runs_in_full() -> None:
    """The cardinality budget: past `detailed_runs` tracked runs, a run with no firing alert
    shows 6 series; one with an alert keeps every family (what its drill-down needs)."""
    t = 1_800_000_000.0
    registry, _, engine = setup(limits=Limits(detailed_runs=3))
    events = [e for i in range(3) for e in busy_run(f"r{i}", t)]
    feed(engine, events)
    full = per_run(registry)
    assert all(len(full[f"r{i}"]) > 15 for i in range(3))  # within the budget: everything

    feed(engine, busy_run("r3", t))  # four runs: over it
    feed(engine, [make_event("step.metrics", t + 3, run="r3", step=1,
                             metrics={"loss": float("nan")})])  # fmt: skip
    shown = per_run(registry)
    assert len(shown["r3"]) > 15  # non_finite_metric fires: still in full
    assert "runwatch_alerts_firing{" in " ".join(shown["r3"])
    for quiet in ("r0", "r1", "r2"):
        names = sorted(line.split("{", 1)[0] for line in shown[quiet])
        assert names == sorted(["runwatch_run_info", "runwatch_run_last_event_age_seconds",
                                "runwatch_step", "runwatch_trajectories_pending",
                                "runwatch_inference_idle_with_pending_seconds",
                                "runwatch_alerts_firing_total_per_run"])  # fmt: skip
        assert value(registry, "runwatch_trajectories_pending", run=quiet, phase="other") == 1
        assert value(registry, "runwatch_step", run=quiet) == 1

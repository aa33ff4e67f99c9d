"""Properties of `runwatch.stream.replay.replay` that must hold for any input (contract §1, §2).

1. Shuffling events by less than the reorder window, and sending some of them twice, changes
   no alert transition: same transitions, same order, same ids, summaries and details.
2. Invalid lines anywhere in the input change no alert, and each one is reported exactly once
   through `on_invalid`, under its own line number.

Inputs are the incident streams of `runwatch.dev.scenarios` (the real shapes, thousands of
events each) and small generated multi-run streams with short per-run rule parameters, so
that every rule fires and resolves within a few dozen events.

Hypothesis runs derandomized with a bounded number of examples: CI sees the same inputs
every time.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from runwatch.dev.scenarios import SCENARIOS
from runwatch.emitters.events import MAX_EVENT_BYTES
from runwatch.stream.engine import Engine
from runwatch.stream.refused import Refused
from runwatch.stream.replay import DEFAULT_WINDOW, replay
from runwatch.stream.rules import CONTRACT_RULES

#: hypothesis over whole incidents: seconds each (make unit leaves them to make test)
pytestmark = pytest.mark.slow

Event = dict[str, Any]

#: Largest shift, in seconds of event time, between two events that may swap places.
#: Below the replay window (5 s) with a margin, so that every shuffle is one the window absorbs.
MAX_SHIFT = 3.9
assert MAX_SHIFT < DEFAULT_WINDOW

PROPERTY = settings(
    max_examples=int(os.environ.get("RUNWATCH_PROPERTY_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
INCIDENT_PROPERTY = settings(
    PROPERTY, max_examples=int(os.environ.get("RUNWATCH_INCIDENT_EXAMPLES", "6"))
)
#: A shuffle seed does not shrink into anything smaller, and each scenario replay takes
#: a while: report the failing seed as found.
INCIDENT_SHUFFLE = settings(INCIDENT_PROPERTY, phases=[Phase.explicit, Phase.generate])


# --- running replay -----------------------------------------------------------------------


def encode(event: Event) -> bytes:
    """What a Python emitter writes: stdlib json, so NaN metrics become the `NaN` token."""
    return json.dumps(event, separators=(",", ":")).encode()


def run_replay(
    raws: Sequence[bytes], until: float | None = None
) -> tuple[list[bytes], list[Refused]]:
    """Alert transitions as canonical JSON (NaN-safe comparison), and the reported lines."""
    bad: list[Refused] = []
    records = (("input", number, raw) for number, raw in enumerate(raws, 1))
    alerts = [
        orjson.dumps(a.to_dict(), option=orjson.OPT_SORT_KEYS)
        for a in replay(records, Engine(), until=until, on_invalid=bad.append)
    ]
    return alerts, bad


def rules_of(alerts: Iterable[bytes]) -> set[str]:
    return {orjson.loads(a)["rule"] for a in alerts}


# --- shuffling and duplicating ------------------------------------------------------------


def perturb(events: Sequence[Event], rng: random.Random, dup_rate: float) -> list[Event]:
    """Events in a new arrival order: each moves by less than MAX_SHIFT of event time, and
    about `dup_rate` of them are sent a second time, after the first copy.

    Each event is sorted by `ts + shift`, where the shift is drawn once per distinct `ts`.
    Two events swap only when their ts differ by less than MAX_SHIFT, so the window restores
    the order. Events with *equal* ts share a shift and keep their relative order: the
    window breaks ts ties by arrival, so swapping two same-ts events (a trajectory that
    starts and finishes at one instant, say) is a different input, not a shuffled one. For
    the same reason a duplicate arrives after its first copy (before it, it would become the
    first copy, at an earlier place among its same-ts peers). How late a duplicate comes
    does not matter: it is dropped by id even past the window.
    """
    shift: dict[float, float] = {}
    keyed: list[tuple[float, int, int, Event]] = []
    for i, e in enumerate(events):
        s = shift.setdefault(e["ts"], rng.uniform(0.0, MAX_SHIFT))
        keyed.append((e["ts"] + s, i, 0, e))
        if rng.random() < dup_rate:
            delay = rng.uniform(0.0, MAX_SHIFT) if rng.random() < 0.8 else rng.uniform(0, 600)
            keyed.append((e["ts"] + s + delay, i, 1, e))
    keyed.sort(key=lambda k: k[:3])
    return [k[3] for k in keyed]


# --- invalid lines ------------------------------------------------------------------------


def _mutate(event: Event, **changes: Any) -> bytes:
    return encode({**event, **changes})


def _without(event: Event, field: str) -> bytes:
    return encode({k: v for k, v in event.items() if k != field})


#: name -> builder(valid template event, rng) of a line that must be rejected.
INVALID: dict[str, Callable[[Event, random.Random], bytes]] = {
    "garbage": lambda e, r: bytes(r.randrange(33, 256) for _ in range(r.randint(1, 40))),
    "not utf-8": lambda e, r: b'{"v":1,"id":"\xff\xfe","ts":1.0}',
    "truncated": lambda e, r: (lambda raw: raw[: r.randint(1, len(raw) - 1)])(encode(e)),
    "not an object": lambda e, r: r.choice([b"[1, 2]", b'"heartbeat"', b"null", b"42", b"{}"]),
    "no envelope field": lambda e, r: _without(e, r.choice(["v", "id", "ts", "run", "src"])),
    "ts as string": lambda e, r: _mutate(e, ts=str(e["ts"])),
    "ts is NaN": lambda e, r: _mutate(e, ts=math.nan),
    "ts is infinite": lambda e, r: _mutate(e, ts=r.choice([math.inf, -math.inf])),
    "ts is bool": lambda e, r: _mutate(e, ts=True),
    "wrong version": lambda e, r: _mutate(e, v=r.choice([2, 0, "1", 1.0, True])),
    "id not a string": lambda e, r: _mutate(e, id=12345),
    "bad run id": lambda e, r: _mutate(
        e, run=r.choice(["", "has space", "semi;colon", "x" * 201, "ünï", "nl\n", 7])
    ),
    "bad kind name": lambda e, r: _mutate(e, kind=r.choice(["Step.Done", "step..done", "", 3])),
    "src not an object": lambda e, r: _mutate(e, src="trainer"),
    "bad component": lambda e, r: _mutate(e, src={"component": "Trainer Node"}),
    "step as string": lambda e, r: _mutate(e, kind="step.done", step="3"),
    "step as float": lambda e, r: _mutate(e, kind="step.started", step=3.0),
    "metrics as list": lambda e, r: _mutate(e, kind="step.metrics", step=1, metrics=[1.0]),
    "bad trajectory status": lambda e, r: _mutate(
        e, kind="trajectory.done", traj="t-bad", status="finished"
    ),
    "running as float": lambda e, r: _mutate(
        e, kind="inference.stats", server="vllm-0", running=1.5, waiting=0
    ),
    "kv cache above 1": lambda e, r: _mutate(
        e, kind="inference.stats", server="vllm-0", running=0, waiting=0, kv_cache_usage=1.5
    ),
    "larger than 64 KiB": lambda e, r: _mutate(
        e, id=f"big-{r.getrandbits(64):x}", pad="x" * (MAX_EVENT_BYTES + r.randint(0, 100))
    ),
    # Well-formed, but its per-run rule config names no rule: rejected by the engine when
    # the event is applied, after the reorder window, still reported once.
    "bad run.started config": lambda e, r: _mutate(
        e,
        id=f"cfg-{r.getrandbits(64):x}",
        kind="run.started",
        config=r.choice([{"no_such_rule": {}}, {"zero_reward": {"steps": 0}}]),
    ),
}


def interleave(
    raws: Sequence[bytes],
    events: Sequence[Event],
    picks: Sequence[tuple[int, str, int]],
) -> tuple[list[bytes], list[int]]:
    """Insert one invalid line per pick (position, kind of breakage, seed); returns the lines
    and the 1-based line numbers of the invalid ones."""
    inserts: dict[int, list[bytes]] = {}
    for position, name, seed in picks:
        rng = random.Random(seed)
        pos = position % (len(raws) + 1)
        template = events[rng.randrange(len(events))]
        raw = INVALID[name](template, rng)
        assert raw.strip(), "a blank line is skipped, not reported: not a useful case"
        inserts.setdefault(pos, []).append(raw)
    out: list[bytes] = []
    bad_numbers: list[int] = []
    for i in range(len(raws) + 1):
        for raw in inserts.get(i, ()):
            out.append(raw)
            bad_numbers.append(len(out))
        if i < len(raws):
            out.append(raws[i])
    return out, bad_numbers


#: Seeds for the shuffles: thousands of random draws are cheaper from `random` than from
#: hypothesis, and a seed shrinks well enough.
seeds = st.integers(0, 2**32 - 1)

invalid_picks = st.lists(
    st.tuples(
        st.integers(0, 1 << 30),
        st.sampled_from(sorted(INVALID)),
        st.integers(0, 1 << 30),
    ),
    min_size=1,
    max_size=40,
)


# --- small generated streams --------------------------------------------------------------

T0 = 1_773_496_800.0
TRAINER = {"component": "trainer", "host": "node-0", "pid": 10}
ROLLOUT = {"component": "rollout", "host": "node-1", "pid": 20}
VLLM = {"component": "inference", "host": "node-2", "pid": 30, "instance": "vllm-0"}
VLLM_1 = {"component": "inference", "host": "node-3", "pid": 31, "instance": "vllm-1"}
SOURCES = (TRAINER, ROLLOUT, VLLM, VLLM_1)
PHASES = ("generate", "tool", "sandbox", "reward")
RANK_PHASES = ("forward", "backward", "all_reduce", "recv", "destroy_process_group", "exited")

#: Short per-run parameters, so that every rule fires within a few minutes of event time.
FAST_CONFIG = {
    "heartbeat_lost": {"timeout": 30},
    "inference_idle_with_pending": {"idle_for": 20},
    "stuck_progress": {"min_stall": 15, "factor": 3, "window": 4},
    "ranks_stalled": {"timeout": 40},
    "zero_reward": {"steps": 2},
    "idle_gap_growing": {"steps": 2, "min_gap": 1},
}

OPS = (
    "heartbeat",
    "traj.start",
    "traj.phase",
    "traj.done",
    "stats",
    "request",
    "progress",
    "step.started",
    "step.done",
    "metrics",
    "reward",
    "rank",
    "other",
    "finish",
)


class _RunScript:
    """What one generated run has emitted so far, to keep its events plausible."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.count = 0
        self.step = 0
        self.trajs = 0
        self.pending: list[str] = []
        self.reqs: list[str] = []
        self.progress = 0
        self.finished = False


def build_stream(ops: Sequence[tuple[int, int, str, int]], runs: int, config: bool) -> list[Event]:
    """Events in time order from (tenths of a second since the last event, run, op, value).

    A step of 0 gives events with equal ts, which `perturb` keeps in order.
    """
    scripts = [_RunScript(f"gen-run-{i}") for i in range(runs)]
    out: list[Event] = []
    t = T0

    def emit(s: _RunScript, kind: str, src: dict[str, Any], **fields: Any) -> None:
        out.append(
            {"v": 1, "id": f"{s.run}-{s.count}", "ts": round(t, 1), "run": s.run}
            | {"kind": kind, "src": src, **fields}
        )
        s.count += 1

    for s in scripts:
        emit(s, "run.started", TRAINER, **({"config": FAST_CONFIG} if config else {}))
    for dt, run, op, v in ops:
        t += dt / 10
        s = scripts[run % runs]
        if op == "heartbeat":
            emit(s, "heartbeat", SOURCES[v % 4], **({"final": True} if v == 7 else {}))
        elif op == "traj.start":
            s.trajs += 1
            s.pending.append(f"t{s.trajs}")
            emit(s, "trajectory.started", ROLLOUT, traj=s.pending[-1], step=s.step)
        elif op == "traj.phase" and s.pending:
            traj = s.pending[v % len(s.pending)]
            emit(s, "trajectory.phase", ROLLOUT, traj=traj, phase=PHASES[v % 4])
        elif op == "traj.done" and s.pending:
            traj = s.pending.pop(v % len(s.pending))
            status = ("ok", "ok", "error", "timeout", "aborted")[v % 5]
            emit(s, "trajectory.done", ROLLOUT, traj=traj, status=status, reward=v / 7)
        elif op == "stats":
            src = VLLM if v < 6 else VLLM_1
            running = 0 if v in (0, 1, 2, 6) else v
            emit(s, "inference.stats", src, server=src["instance"], running=running, waiting=v % 2)
        elif op == "request":
            if s.reqs and v % 2:
                emit(s, "request.done", ROLLOUT, req=s.reqs.pop(0), server="vllm-0")
            else:
                s.reqs.append(f"q{s.count}")
                emit(s, "request.queued", ROLLOUT, req=s.reqs[-1], server="vllm-0")
        elif op == "progress":
            s.progress = 0 if v == 7 else s.progress + v % 3  # 7: a new bar, same name
            emit(s, "progress", ROLLOUT, name="Rollout", n=s.progress, total=40)
        elif op == "step.started":
            s.step += 1
            emit(s, "step.started", TRAINER, step=s.step)
        elif op == "step.done":
            emit(s, "step.done", TRAINER, step=s.step)
        elif op == "metrics":
            value = math.nan if v == 7 else (0.0 if v < 4 else v / 10)
            metrics = {"critic/score/mean": value, "actor/grad_norm": v * 0.1}
            emit(s, "step.metrics", TRAINER, step=s.step, metrics=metrics)
        elif op == "reward":
            mean = math.inf if v == 7 else (0.0 if v < 4 else v / 10)
            emit(s, "reward", TRAINER, step=s.step, mean=mean, count=8)
        elif op == "rank":
            rank = v % 4
            phase = RANK_PHASES[(v + s.count) % 6] if v > 2 else "all_reduce"
            since = {"since": round(t - v, 1)} if v % 2 else {}
            emit(s, "rank.status", {**TRAINER, "rank": rank}, rank=rank, world_size=4)
            out[-1].update(phase=phase, **since)
        elif op == "other":
            emit(s, "checkpoint.saved", TRAINER, step=s.step, path=f"/ckpt/{v}")
        elif op == "finish" and v == 7 and not s.finished:
            s.finished = True
            emit(s, "run.finished", TRAINER, status=("ok", "failed", "killed")[s.count % 3])
    return out


#: Tenths of a second between events: mostly a few seconds (events the shuffle may swap),
#: sometimes none (equal ts), sometimes minutes (timers ripen in between).
SHORT, LONG = (1, 40), (40, 1200)
gaps = st.one_of(
    st.just(0), st.integers(*SHORT), st.integers(*SHORT), st.integers(*SHORT), st.integers(*LONG)
)
op_lists = st.lists(
    st.tuples(gaps, st.integers(0, 2), st.sampled_from(OPS), st.integers(0, 7)),
    min_size=10,
    max_size=200,
)


@st.composite
def generated_streams(draw: st.DrawFn) -> list[Event]:
    return build_stream(draw(op_lists), runs=draw(st.integers(1, 3)), config=draw(st.booleans()))


def random_ops(rng: random.Random, n: int) -> list[tuple[int, int, str, int]]:
    """Ops drawn the way `op_lists` draws them, without hypothesis (for the coverage check)."""
    ops = []
    for _ in range(n):
        gap = rng.choice([0, *(rng.randint(*SHORT) for _ in range(3)), rng.randint(*LONG)])
        ops.append((gap, rng.randint(0, 2), rng.choice(OPS), rng.randint(0, 7)))
    return ops


# --- the properties -----------------------------------------------------------------------


@cache
def incident(name: str) -> tuple[tuple[Event, ...], tuple[bytes, ...], float]:
    events = tuple(SCENARIOS[name]())
    return events, tuple(encode(e) for e in events), events[-1]["ts"] + 3600


@cache
def incident_alerts(name: str) -> tuple[bytes, ...]:
    _, raws, until = incident(name)
    alerts, bad = run_replay(raws, until=until)
    assert not bad
    return tuple(alerts)


def test_generated_streams_reach_every_rule() -> None:
    """The generator is worth its name: across a fixed sample, every built-in rule fires
    and resolves, so the properties below exercise all of them."""
    seen: Counter[tuple[str, str]] = Counter()
    rng = random.Random(2024)
    for _ in range(60):
        events = build_stream(random_ops(rng, 150), runs=2, config=True)
        alerts, bad = run_replay([encode(e) for e in events], until=events[-1]["ts"] + 120)
        assert not bad
        seen.update((a["rule"], a["state"]) for a in map(orjson.loads, alerts))
    rules = set(CONTRACT_RULES)
    assert {rule for rule, state in seen if state == "firing"} == rules
    assert {rule for rule, state in seen if state == "resolved"} == rules


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_incidents_raise_alerts_worth_comparing(name: str) -> None:
    """The baseline for the incident properties (only the healthy run is quiet)."""
    assert bool(incident_alerts(name)) == (name != "healthy_long_steps")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@INCIDENT_SHUFFLE
@given(seed=seeds, dup_rate=st.sampled_from([0.0, 0.05, 0.3]))
def test_incident_shuffled_and_duplicated_same_alerts(
    name: str, seed: int, dup_rate: float
) -> None:
    events, _, until = incident(name)
    shuffled = perturb(events, random.Random(seed), dup_rate)
    alerts, bad = run_replay([encode(e) for e in shuffled], until=until)
    assert not bad
    assert alerts == list(incident_alerts(name))


@PROPERTY
@given(
    events=generated_streams(),
    seed=seeds,
    dup_rate=st.sampled_from([0.0, 0.1, 0.5]),
    extra=st.sampled_from([None, 0.0, 30.0, 600.0]),
)
def test_generated_shuffled_and_duplicated_same_alerts(
    events: list[Event], seed: int, dup_rate: float, extra: float | None
) -> None:
    until = None if extra is None else events[-1]["ts"] + extra
    expected, bad = run_replay([encode(e) for e in events], until=until)
    assert not bad
    shuffled = perturb(events, random.Random(seed), dup_rate)
    assert len(shuffled) >= len(events)
    alerts, bad = run_replay([encode(e) for e in shuffled], until=until)
    assert not bad
    assert alerts == expected


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@INCIDENT_PROPERTY
@given(picks=invalid_picks, seed=st.none() | seeds)
def test_incident_invalid_lines_change_nothing(
    name: str, picks: list[tuple[int, str, int]], seed: int | None
) -> None:
    """Invalid lines anywhere, in the incident as recorded or shuffled."""
    events, raws, until = incident(name)
    if seed is not None:
        events = tuple(perturb(events, random.Random(seed), dup_rate=0.05))
        raws = tuple(encode(e) for e in events)
    lines, bad_numbers = interleave(raws, events, picks)
    alerts, bad = run_replay(lines, until=until)
    assert Counter(b.position for b in bad) == Counter(bad_numbers)
    assert alerts == list(incident_alerts(name))


@PROPERTY
@given(
    events=generated_streams(),
    picks=invalid_picks,
    seed=seeds,
    dup_rate=st.sampled_from([0.0, 0.2]),
)
def test_generated_invalid_lines_change_nothing(
    events: list[Event], picks: list[tuple[int, str, int]], seed: int, dup_rate: float
) -> None:
    """Invalid lines anywhere, in an input that is also shuffled and duplicated."""
    until = events[-1]["ts"] + 300
    expected, _ = run_replay([encode(e) for e in events], until=until)
    shuffled = perturb(events, random.Random(seed), dup_rate)
    lines, bad_numbers = interleave([encode(e) for e in shuffled], shuffled, picks)
    alerts, bad = run_replay(lines, until=until)
    assert Counter(b.position for b in bad) == Counter(bad_numbers)
    assert all(b.source == "input" and b.reason for b in bad)
    assert alerts == expected


def test_refused_run_started_does_not_move_the_window() -> None:
    """Regression (found by the property above): a `run.started` whose config the engine
    refuses, stamped far ahead, used to raise the reorder window's watermark before being
    refused, so every later shuffle reached the engine unsorted."""
    events, _, until = incident("sandbox_hang")
    shuffled = perturb(events, random.Random(0), dup_rate=0.0)
    refused = {**events[-1], "id": "cfg-bad", "kind": "run.started"}
    refused["config"] = {"no_such_rule": {}}
    lines = [encode(e) for e in shuffled]
    lines.insert(0, encode(refused))
    alerts, bad = run_replay(lines, until=until)
    assert [b.position for b in bad] == [1]
    assert "no_such_rule" in bad[0].reason
    assert alerts == list(incident_alerts("sandbox_hang"))

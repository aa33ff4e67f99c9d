"""Fleet incidents' alert transitions, built to the pinned shape (contract section 8): the
fleet alert (`run: "@fleet"`, rule `shared_cause`, `subject` `dep:NAME`, `details.runs`) and
its member runs' transitions (`incident.fleet`), as a storm of them arrives -- for the
notifier's tests and `bench/slack_storm.py`."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from runwatch.stream.alerts import Alert

FLEET = "fleet|dep:reward@rm-1:8000|1"
CAUSE = "dep:reward@rm-1:8000"
FLEET_KEY = f"shared_cause|@fleet|{CAUSE}"
#: when the storm begins by default: an hour before the notifier tests' wall clock
T0 = 1_800_000_000.0 - 3600


def transition(
    run: str,
    rule: str,
    state: str,
    ts: float,
    *,
    incident: str,
    role: str,
    root: str,
    open_: bool,
    fleet: str | None = None,
    subject: str | None = None,
    details: dict[str, Any] | None = None,
    since: float | None = None,
) -> Alert:
    key = f"{rule}|{run}" + (f"|{subject}" if subject else "")
    ref: dict[str, Any] = {"id": incident, "role": role, "root": root,
                           "root_rule": root.split("|")[0], "opened": since or ts,
                           "open": open_}  # fmt: skip
    if fleet is not None:
        ref["fleet"] = fleet
    return Alert.from_dict({
        "v": 1, "id": f"{key}|{state}|{ts}", "ts": ts, "rule": rule, "run": run,
        "state": state, "severity": "critical" if rule != "stuck_progress" else "warning",
        "key": key, "subject": subject, "since": since or ts,
        "summary": f"{rule} of {run} ({state})", "details": details or {}, "incident": ref,
    })  # fmt: skip


def fleet_alert(state: str, ts: float, runs: list[str], since: float) -> Alert:
    return transition("@fleet", "shared_cause", state, ts, incident=FLEET, role="root",
                      root=FLEET_KEY, open_=state == "firing", subject=CAUSE,
                      details={"runs": runs, "users": 48}, since=since)  # fmt: skip


def run_name(i: int) -> str:
    return f"grpo-{i:02d}"


def storm(runs: int = 40, initial: int = 3, t0: float = T0) -> dict[str, list[Alert]]:
    """Per key (a run, or "@fleet"), in the order its partition holds them: `runs` runs stall
    on the reward server; the first `initial` before the fleet incident opened (so their
    first firing names no fleet incident), the rest join it. Every fourth run's progress bar
    stalls too (a symptom); all heal ten minutes on; then the fleet incident resolves."""
    names = [run_name(i) for i in range(runs)]
    opened = t0 + initial * 5
    out: dict[str, list[Alert]] = {"@fleet": [fleet_alert("firing", opened, names[:initial],
                                                          since=t0)]}  # fmt: skip
    for i, run in enumerate(names):
        t = t0 + i * 5
        fleet = FLEET if i >= initial else None
        incident, root = f"incident|{run}|1", f"inference_idle_with_pending|{run}"
        seq = [transition(run, "inference_idle_with_pending", "firing", t, incident=incident,
                          role="root", root=root, open_=True, fleet=fleet)]  # fmt: skip
        symptom = i % 4 == 1
        if symptom:
            seq.append(transition(run, "stuck_progress", "firing", t + 1, incident=incident,
                                  role="symptom", root=root, open_=True, fleet=FLEET,
                                  subject="Rollout"))  # fmt: skip
        heal = t0 + 600 + i * 3
        if symptom:
            seq.append(transition(run, "stuck_progress", "resolved", heal, incident=incident,
                                  role="symptom", root=root, open_=True, fleet=FLEET,
                                  subject="Rollout", since=t + 1))  # fmt: skip
        seq.append(transition(run, "inference_idle_with_pending", "resolved", heal + 1,
                              incident=incident, role="root", root=root, open_=False,
                              fleet=FLEET, since=t))  # fmt: skip
        out[run] = seq
    out["@fleet"].append(fleet_alert("resolved", t0 + 600 + runs * 3 + 5, names, since=t0))
    return out


def in_time(sequences: dict[str, list[Alert]]) -> list[Alert]:
    """The storm in event-time order (one partition, or partitions read in step)."""
    return sorted((a for seq in sequences.values() for a in seq), key=lambda a: a.ts)


def interleavings(sequences: dict[str, list[Alert]], seed: int) -> list[Alert]:
    """One order the notifier may read the storm in: each key's transitions in their order
    (Kafka orders a partition), the keys interleaved at random (partitions read unevenly)."""
    rng = random.Random(seed)
    queues = {k: list(v) for k, v in sequences.items()}
    out: list[Alert] = []
    while queues:
        k = rng.choice(sorted(queues))
        out.append(queues[k].pop(0))
        if not queues[k]:
            del queues[k]
    return out


def batches(alerts: list[Alert], size: int) -> Iterator[list[Alert]]:
    for i in range(0, len(alerts), size):
        yield alerts[i : i + size]

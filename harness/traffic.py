"""Live traffic of simulated runs into a real broker, through the real `Emitter` (Kafka, with
its spool behind it through an outage): each run's trainer and rollout processes beat every
`beat` seconds, the trainer logs a step every few beats, and scripted faults happen at known
times -- a process that stops beating (it crashed), a NaN in a step's metrics. What the
cluster fault test (tests/integration/test_cluster_faults.py) and bench/faults.py play while
they pause, kill and restart the parts around it.

    python -m harness.traffic --kafka HOST:PORT --topic-prefix P. --runs 20 \\
        --duration 60 --fault dead-0@40:silent --fault nan-0@10:nan

Prints one JSON object per fault as it happens (`{"run", "kind", "process", "at"}`: wall
time) and, at the end, `{"done": true, "events": N}`. With `--until-told` it plays on after
`--duration` until a number on a line of its input says when to end (seconds from its
start): a test that restarts the broker late in the play keeps the traffic going until the
emitters could deliver what they spooled through it, however long the broker took.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters import Emitter
from runwatch.emitters.topics import Topics

PROCESSES = ("trainer", "rollout")


@dataclass(frozen=True)
class Fault:
    run: str
    at: float  # seconds after the traffic starts
    kind: str  # silent: the run's `process` stops beating; nan: a NaN in a step's metrics
    process: str = "rollout"

    @classmethod
    def parse(cls, text: str) -> Fault:
        """`RUN@SECONDS:KIND[:PROCESS]`."""
        run, _, rest = text.partition("@")
        at, _, kind = rest.partition(":")
        kind, _, process = kind.partition(":")
        if kind not in ("silent", "nan") or not run:
            raise ValueError(f"a fault is RUN@SECONDS:silent|nan[:PROCESS], not {text!r}")
        return cls(run, float(at), kind, process or "rollout")


def play(
    bootstrap: str,
    prefix: str,
    runs: list[str],
    duration: float,
    faults: list[Fault],
    *,
    beat: float = 0.5,
    step_every: int = 4,
    spool: Path | None = None,
    say: Any = print,
    at_least: Callable[[], float] = lambda: 0.0,
) -> int:
    """Play the traffic for `duration` seconds, or `at_least()` where that is longer; the
    number of events emitted."""
    topic = Topics(prefix).events
    root = spool or Path(tempfile.mkdtemp(prefix="runwatch-traffic-"))
    emitters: dict[tuple[str, str], Emitter] = {}
    for run in runs:
        for process in PROCESSES:
            # no stack responder: it would give each of hundreds of emitters in this one
            # process a consumer and its threads, which a job's process has once
            emitters[(run, process)] = Emitter(
                run=run, component=process, kafka=bootstrap, topic=topic, heartbeat=False,
                instance=f"{run}-{process}", spool=root / f"{run}-{process}", stacks=False,
            )  # fmt: skip
    silent: set[tuple[str, str]] = set()
    pending = sorted(faults, key=lambda f: f.at)
    nan_next: set[str] = set()
    events = 0
    start = time.monotonic()
    tick = 0
    try:
        for (_, process), em in emitters.items():
            if process == "trainer":
                em.emit("run.started", labels={"team": "faults"})
                events += 1
        while (elapsed := time.monotonic() - start) < max(duration, at_least()):
            while pending and pending[0].at <= elapsed:
                fault = pending.pop(0)
                if fault.kind == "silent":
                    silent.add((fault.run, fault.process))
                else:
                    nan_next.add(fault.run)
                say(json.dumps({"run": fault.run, "kind": fault.kind, "process": fault.process,
                                "at": time.time()}), flush=True)  # fmt: skip
            for key, em in emitters.items():
                if key not in silent:
                    em.emit("heartbeat")
                    events += 1
            if tick % step_every == 0:
                step = tick // step_every
                for run in runs:
                    em = emitters[(run, "trainer")]
                    loss = float("nan") if run in nan_next else 1.0 / (1 + step)
                    em.emit("step.metrics", step=step, metrics={"loss": loss, "reward": 0.5})
                    events += 1
                nan_next.clear()
            tick += 1
            time.sleep(max(0.0, start + tick * beat - time.monotonic()))
        for key, em in emitters.items():
            if key not in silent:  # a clean stop says so, as the Emitter's own heartbeat does
                em.emit("heartbeat", final=True)
                events += 1
    finally:
        # each close delivers what its emitter queued; at once, as the jobs' processes would
        with ThreadPoolExecutor(max_workers=min(64, len(emitters) or 1)) as pool:
            list(pool.map(Emitter.close, emitters.values()))
    return events


class _Told:
    """When the input said the play ends (seconds from its start; a number a line, the
    last one stands); until it says, `until`."""

    def __init__(self, until: float) -> None:
        self._seconds = until

    def seconds(self) -> float:
        return self._seconds

    def read(self, lines: Any) -> None:
        for line in lines:
            try:
                self._seconds = float(line)
            except ValueError:
                print(f"harness.traffic: not a number of seconds: {line!r}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--kafka", required=True)
    p.add_argument("--topic-prefix", default="")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--beat", type=float, default=0.5)
    p.add_argument("--fault", action="append", default=[], type=Fault.parse)
    p.add_argument("--spool", type=Path)
    p.add_argument("--until-told", action="store_true",
                   help="after --duration, play on until the input says when to end")  # fmt: skip
    args = p.parse_args(argv)
    runs = [f"run-{i}" for i in range(args.runs)]
    runs += sorted({f.run for f in args.fault} - set(runs))
    told = _Told(float("inf") if args.until_told else 0.0)
    if args.until_told:
        threading.Thread(target=told.read, args=(sys.stdin,), daemon=True).start()
    events = play(args.kafka, args.topic_prefix, runs, args.duration, args.fault,
                  beat=args.beat, spool=args.spool, at_least=told.seconds)  # fmt: skip
    print(json.dumps({"done": True, "events": events}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The cluster path through an operator's bad week, at length (issue 43): a real broker, two
workers, a sink, a notifier posting to the strict Slack stand-in, `--runs` runs of live
traffic from the real Emitter for `--seconds`, with NaN faults every few seconds and a
process going silent now and then -- and, while it plays, every role killed with SIGKILL
(the workers again and again, the sink, the notifier while Slack holds its post), a worker
paused with SIGSTOP past its session timeout, and in the second play the broker stopped
(SIGTERM) and started on its data again, several times. The longer form of
tests/integration/test_cluster_faults.py; the same verdict (`harness.cluster_verdict`).

Printed per play: events emitted, lost, stored twice; transitions the events imply,
published (read_committed), aborted writes, duplicated, missing, extra, false silence
alerts; Slack's problems; the alert delay from each fault's condition becoming true to its
firing on runwatch.alerts. Figures only (it fails on nothing); written to bench/RESULTS.md.

    .venv/bin/python bench/cluster_faults.py [--runs 200] [--seconds 150] [--plays kills,restart]
        [--outage 5] [--beat 1.0] [--keep DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchinfo import SAID, machine, say, write_section

from harness.cluster import Cluster
from harness.cluster_verdict import judge

SESSION = 6.0
TIMEOUT = 5.0


def faults(seconds: float, seed: int) -> list[str]:
    """A NaN fault every 4 s on a run of its own, a silent process every 20 s."""
    rnd = random.Random(seed)
    out = [f"nan-{i}@{t:.1f}:nan" for i, t in enumerate(_every(6.0, seconds - 10, 4.0, rnd))]
    out += [f"dead-{i}@{t:.1f}:silent" for i, t in enumerate(_every(15.0, seconds - 15, 20.0, rnd))]
    return out


def _every(start: float, end: float, step: float, rnd: random.Random) -> list[float]:
    out, t = [], start
    while t < end:
        out.append(t + rnd.uniform(-0.5, 0.5))
        t += step
    return out


def play(name: str, args: argparse.Namespace, root: Path) -> dict[str, object]:
    """One play; its figures and the problems the verdict found."""
    cluster = Cluster(root, session=SESSION, timeout=TIMEOUT, partitions=args.partitions)
    verdict = None
    try:
        cluster.start()
        traffic = cluster.play(args.runs, args.seconds, faults(args.seconds, args.seed),
                               beat=args.beat)  # fmt: skip
        s = args.seconds
        plan: list[tuple[float, str]] = []
        if name in ("kills", "restart"):
            # workers killed again and again (one of them each time), the other roles once
            plan += [(t, "kill-worker") for t in _steps(14.0, s - 20, 12.0)]
            plan += [(0.30 * s, "pause-worker"), (0.45 * s, "kill-sink"),
                     (0.6 * s, "kill-notify")]  # fmt: skip
        if name in ("broker", "restart"):
            plan += [(0.5 * s, "broker")]
        plan.sort()
        kills = 0
        for at, what in plan:
            traffic.at(at)
            print(f"  {at:6.1f}s {what} ({time.time() - traffic.wall:.1f}s)", flush=True)
            if what == "kill-worker":
                cluster.kill_worker(kills % len(cluster.workers))
                kills += 1
            elif what == "pause-worker":
                w = cluster.workers[(kills + 1) % len(cluster.workers)]
                w.pause()
                time.sleep(SESSION + 9)
                w.resume()
            elif what == "kill-sink":
                cluster.restart_sink()
            elif what == "kill-notify":
                cluster.kill_notify_holding_post()
            elif what == "broker":
                cluster.broker_away(args.outage)
        try:
            cluster.settle(timeout=args.seconds + 300)
        except TimeoutError as err:  # judged all the same: the verdict says what is missing
            print(f"  not settled: {err}")
            cluster.stop_workers()
        verdict = judge(cluster)
    except Exception as err:
        say(f"  play {name} failed: {type(err).__name__}: {err}")
        print(cluster.tell(30))
    finally:
        cluster.close()
    if verdict is None:
        return {"failed": True}
    figures = {**verdict.figures(), "parts that exited and were started again": cluster.revived}
    for key, value in figures.items():
        say(f"  {key:36} {value}")
    for problem in verdict.problems():
        say(f"  PROBLEM {problem}")
    return figures


def _steps(start: float, end: float, step: float) -> list[float]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += step
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--seconds", type=float, default=150.0)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--outage", type=float, default=5.0, help="seconds the broker is away")
    p.add_argument("--plays", default="kills,restart")
    p.add_argument("--seed", type=int, default=7)
    # each beat of the traffic's 400 emitters is a Kafka send of its own, ~1-1.6 ms of CPU
    # (100 emitters beating every 0.5 s take a third of a core): at 0.5 s they need most of a
    # core of a 2-core machine, their beats come late and the workers rightly see silence
    p.add_argument("--beat", type=float, default=1.0, help="seconds between a process's beats")
    p.add_argument("--keep", type=Path, help="keep each play's folder (logs, data) here")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args()
    say(machine())
    for name in args.plays.split(","):
        root = Path(tempfile.mkdtemp(prefix=f"cluster-{name}-", dir=args.keep))
        say(f"play {name}: {args.runs} runs, {args.seconds:.0f}s, outage {args.outage:.0f}s")
        play(name, args, root)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if not args.no_write:
        write_section("cluster-faults", [
            "## The cluster path through kills, a pause and a broker restart "
            "(`bench/cluster_faults.py`)", "", "```", *SAID, "```"])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

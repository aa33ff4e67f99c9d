"""The cluster path through an operator's bad week, in a minute and a half (issue 43): a real
broker of its own, two workers in one group, a sink, a notifier and the strict Slack
stand-in, with live traffic from the real Emitter (`harness.cluster`) -- while the broker is
stopped (SIGTERM) and started again on its data at four points: during a fault, while Slack
holds a post, during a takeover's rebuild, and during the handover checkpoints of a worker
that stops; a worker is paused past its session timeout (SIGSTOP), another killed with
SIGKILL and started again.

What must hold (`harness.cluster_verdict`), read as every consumer reads, read_committed: every
event stored once; exactly the transitions the events imply, each once -- none missed, no
resolve of a condition that did not heal, no re-fire, no silence alert on a process that beat
all along, nothing a fenced worker wrote; the history equal to the topic; Slack once per
transition, each incident its own thread, each reply in its incident's thread. A transition
may come late: the test waits for them, it does not time them (bench/cluster_faults.py
prints the delays)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from harness.cluster import Cluster, Worker, wait_for
from harness.cluster_verdict import judge
from runwatch.stream.kafka.host import DATADIR_PREFIX
from runwatch.stream.timekeeping.reading import RECONNECT_S

#: solo: its heartbeat timeout is 4 s, and beside the heaviest tests (load average 8-9 on
#: two cores) its own traffic thread fell that far behind: `make test` runs it alone. Its
#: own waits are bounded (`settle`); on a loaded machine the whole takes 4-8 minutes, past
#: the suite's default limit
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.solo,
              pytest.mark.timeout(900)]  # fmt: skip

SESSION = 6.0  # the workers' session timeout (the broker's minimum)
SECONDS = 90.0
#: a NaN step every 6 s (healed by the next), two processes that go silent for good
FAULTS = [f"nan-{i}@{6 + 6 * i}:nan" for i in range(13)] + ["dead-0@20:silent",
                                                            "dead-1@52:silent"]  # fmt: skip
OUTAGE = 3.0  # seconds the broker is away, besides its own stop and start


def assignments(cluster: Cluster) -> int:
    """How many assignments the workers have said so far."""
    return sum(sum("assigned partitions" in line for line in w.lines())
               for w in [*cluster.workers, *cluster.gone] if isinstance(w, Worker))  # fmt: skip


def test_the_cluster_path_through_broker_restarts_pauses_and_kills(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, session=SESSION, timeout=4.0,
                      worker_args=("--checkpoint-every", "5"))  # fmt: skip
    try:
        cluster.start()
        traffic = cluster.play(10, SECONDS, FAULTS, until_told=True)
        # 1. the broker away during a fault (the NaN at 18 s, healed at 20 s, spooled),
        #    while Slack holds the post of the one before
        traffic.at(14)
        cluster.slack.hold("chat.postMessage")
        assert cluster.slack.held.wait(60), "no post to hold"
        stopped = time.time()
        cluster.broker.stop()
        cluster.slack.release()
        time.sleep(max(0.0, OUTAGE - (time.time() - stopped)))
        cluster.broker.start()
        cluster.outages.append((stopped, time.time()))
        # 2. a worker paused past its session timeout: the group gives its partitions to
        #    the other, which fences it; it goes on (a zombie) until it learns
        traffic.at(30)
        paused = cluster.workers[0]
        paused.pause()
        time.sleep(SESSION + 6)
        paused.resume()
        # 3. the other killed, and the broker away as its partitions are rebuilt
        traffic.at(46)
        before = assignments(cluster)
        cluster.kill_worker(1)
        wait_for(lambda: assignments(cluster) > before, "a takeover under way", 120)
        cluster.broker_away(OUTAGE)
        # 4. a worker stopping -- its partitions handed over, checkpointed -- as the broker
        #    goes away; another in its place once it is back
        traffic.at(66)
        leaving = cluster.workers.pop(0)
        leaving.proc.terminate()  # (SIGTERM: a clean stop, its handover checkpoints)
        cluster.broker_away(OUTAGE)
        # the emitters alive while they deliver what they spooled through it: on a loaded
        # machine the broker took up to 31 s to come back, and a play that had ended
        # meanwhile left its spools to the flush after it, a minute late, past any hold of
        # silence (`runwatch.stream.timekeeping.reading`)
        traffic.end_after(RECONNECT_S + 5)
        cluster.gone.append(leaving)
        leaving.stop()
        cluster.add_worker()
        cluster.settle(timeout=300)
        verdict = judge(cluster)
    except BaseException:
        print(cluster.tell())
        raise
    finally:
        cluster.close()
    print("--- figures", verdict.figures())
    if verdict.problems():  # (kept with the logs, to look into after the broker is gone)
        verdict.save(tmp_path / "verdict.json", outages=cluster.outages)
    assert verdict.problems() == [], cluster.tell()
    # every transition of the faults played is among them: each NaN fired and resolved, each
    # silent process fired (the verdict holds them to what the events imply, and this to
    # what was played)
    fired = {(r.value["rule"], r.value["run"]) for r in verdict.published
             if r.value["state"] == "firing"}  # fmt: skip
    for fault in FAULTS:
        run, kind = fault.split("@")[0], fault.split(":")[1]
        rule = "non_finite_metric" if kind == "nan" else "heartbeat_lost"
        assert (rule, run) in fired, fault
    # no worker's data directory left behind (a killed one's is swept by the next worker)
    pids = {str(p.pid) for p in cluster.gone + cluster.workers}
    left = [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(DATADIR_PREFIX)
            and d[len(DATADIR_PREFIX) :].split("-")[0] in pids]  # fmt: skip
    assert left == []

"""The cluster path as an operator runs it, on one machine: a real broker of its own (so it can
be stopped and started on its data), `runwatch worker`s in one group, a sink, a notifier
posting to the strict Slack stand-in, and live traffic from the real Emitter
(`harness.traffic`) -- with the parts paused, killed and restarted while it plays. What
tests/integration/test_cluster_faults.py and bench/cluster_faults.py play; what must hold
afterwards is `harness.cluster_verdict`'s.

Every part is a subprocess started here and stopped here by its pid; each writes its lines
to a log file of its own under the cluster's folder, which a failed play leaves to read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.cluster_verdict import implied, read_all
from harness.slack_server import FakeSlack
from runwatch.dev.broker import KafkaBroker
from runwatch.store.store import Store

RUNWATCH = str(Path(sys.executable).with_name("runwatch"))
TOKEN = "xoxb-cluster-play"
CHANNEL = "#alerts"


def wait_for(check: Callable[[], Any], what: str, timeout: float, every: float = 0.2) -> Any:
    """`check()`'s first truthy answer, looked for until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


class Part:
    """One runwatch role as a subprocess, its stdout and stderr in `log`."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str] | None = None):
        self.name = name
        self.log = log
        self._out = log.open("ab")
        self.args, self.env = args, env
        self.proc = subprocess.Popen([RUNWATCH, *args], stdout=self._out,
                                     stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})  # fmt: skip
        self.paused = False
        self.ended = False  # stopped or killed here (else, if it exited, on its own)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def running(self) -> bool:
        return self.proc.poll() is None

    def exited(self) -> bool:
        """Whether it exited on its own (a role started while the broker was away does)."""
        return not self.ended and not self.running()

    def kill(self) -> None:
        """SIGKILL: no chance to hand anything over."""
        self.ended = True
        if self.running():
            self.proc.kill()
        self.proc.wait(30)
        self._out.close()

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self, grace: float = 60.0) -> int:
        """SIGTERM (a clean stop), then SIGKILL after `grace` seconds; the exit status. Of
        one that exited on its own: its log closed."""
        self.ended = True
        if self.paused:
            self.resume()
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._out.close()
        return int(self.proc.returncode)


class Worker(Part):
    """A `runwatch worker`: which partitions it holds, once live."""

    def live(self) -> set[int]:
        """The partitions of its latest assignment, once all of them are live."""
        assigned: set[int] | None = None
        live: set[int] = set()
        for line in self.lines():
            if m := re.search(r"assigned partitions \[([\d, ]*)\]", line):
                assigned = {int(x) for x in m.group(1).split(",") if x.strip()}
                live &= assigned
            elif m := re.search(r"live on partitions \[([\d, ]*)\]", line):
                live |= {int(x) for x in m.group(1).split(",") if x.strip()}
        return live if assigned is not None and live == assigned else set()


class Traffic:
    """`harness.traffic` playing into the cluster: its faults (run -> wall time) as they
    happen, and the number of events it emitted once done."""

    def __init__(self, bootstrap: str, prefix: str, runs: int, seconds: float,
                 faults: list[str], spool: Path, log: Path, beat: float = 0.5,
                 until_told: bool = False) -> None:  # fmt: skip
        cmd = [sys.executable, "-m", "harness.traffic", "--kafka", bootstrap,
               "--topic-prefix", prefix, "--runs", str(runs), "--duration", str(seconds),
               "--spool", str(spool), "--beat", str(beat)]  # fmt: skip
        if until_told:
            cmd.append("--until-told")
        for fault in faults:
            cmd += ["--fault", fault]
        self._err = log.open("ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)  # fmt: skip
        self.started = time.monotonic()
        self.wall = time.time()
        self.faults: dict[str, float] = {}
        self.kinds: dict[str, str] = {}
        self.events: int | None = None
        self._reader = threading.Thread(target=self._read, name="traffic")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            said = json.loads(line)
            if said.get("done"):
                self.events = int(said["events"])
            else:
                self.faults[said["run"]] = said["at"]
                self.kinds[said["run"]] = said["kind"]

    @property
    def done(self) -> bool:
        return self.events is not None

    def at(self, seconds: float) -> None:
        """Wait until `seconds` into the traffic."""
        time.sleep(max(0.0, self.started + seconds - time.monotonic()))

    def end_after(self, seconds: float) -> None:
        """End `seconds` from now, or at its duration where that is later (a play started
        `until_told`)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # (it ended already)
            self.proc.stdin.write(f"{time.monotonic() - self.started + seconds}\n")
            self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(60)
        self._reader.join(10)
        assert self.proc.stdout is not None
        assert self.proc.stdin is not None
        self.proc.stdout.close()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self._err.close()


class Cluster:
    """A broker, `workers` workers in one group, a sink, a notifier and Slack, in `root`.

    `timeout`: heartbeat_lost's (the traffic's silent faults fire after it); `session`: the
    workers' session timeout; `partitions`: of runwatch.events."""

    def __init__(
        self,
        root: Path,
        *,
        workers: int = 2,
        partitions: int = 4,
        session: float = 6.0,
        timeout: float = 4.0,
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.broker = KafkaBroker(root / "kafka", progress=lambda line: None)
        self.prefix = f"c{uuid.uuid4().hex[:8]}."
        self.group = f"rw-{uuid.uuid4().hex[:8]}"
        self.partitions, self.session, self.timeout = partitions, session, timeout
        self.worker_args = worker_args
        self.config = root / "rules.toml"
        self.config.write_text(f"[rules.heartbeat_lost]\ntimeout = {timeout}\n")
        self.db = root / "history.duckdb"
        self.slack = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
        self.slack.add_channel(CHANNEL, "C-ALERTS")
        self.bootstrap = ""
        self.workers: list[Worker] = []
        self.gone: list[Part] = []  # parts stopped or killed, for their logs
        self.sink: Part | None = None
        self.notify: Part | None = None
        self.traffic: Traffic | None = None
        self._count = 0
        self.revived = 0  # parts that exited on their own and were started again
        self._lock = threading.RLock()  # the parts, between the play and the supervisor
        self._supervising = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.outages: list[tuple[float, float]] = []  # (stopped, answering again): wall time

    def topic(self, name: str) -> str:
        return f"{self.prefix}runwatch.{name}"

    def _log(self, name: str) -> Path:
        self._count += 1
        return self.root / f"{self._count:02d}-{name}.log"

    # -- the parts -------------------------------------------------------------------------

    def start(self, workers: int = 2) -> None:
        """The broker, the workers (live), the sink and the notifier."""
        self.bootstrap = self.broker.start()
        for _ in range(workers):
            self.add_worker()
        self.start_sink()
        self.start_notify()
        wait_for(lambda: all(w.live() for w in self.workers), "the workers live", 180)
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor")
        self._supervisor.start()

    def _supervise(self) -> None:
        """What an orchestrator does: a part that exited on its own (one started while the
        broker was away refuses to start) is started again."""
        while not self._supervising.wait(1.0):
            with self._lock:
                for i, w in enumerate(self.workers):
                    if w.exited():
                        w.stop()  # (it exited: its log closed)
                        self.gone.append(w)
                        self.workers[i] = self._worker()
                        self.revived += 1
                if self.sink is not None and self.sink.exited():
                    self.sink.stop()
                    self.gone.append(self.sink)
                    self.start_sink()
                    self.revived += 1
                if self.notify is not None and self.notify.exited():
                    self.notify.stop()
                    self.gone.append(self.notify)
                    self.start_notify()
                    self.revived += 1

    def add_worker(self) -> Worker:
        worker = self._worker()
        self.workers.append(worker)
        return worker

    def _worker(self) -> Worker:
        args = ["worker", "--kafka", self.bootstrap, "--topic-prefix", self.prefix, "--app-id",
                self.group, "--config", str(self.config), "--partitions", str(self.partitions),
                "--session-timeout", str(self.session), *self.worker_args]  # fmt: skip
        return Worker("worker", args, self._log("worker"))

    def start_sink(self) -> None:
        self.sink = Part("sink", ["sink", "--kafka", self.bootstrap, "--topic-prefix",
                                  self.prefix, "--db", str(self.db), "--group",
                                  f"s-{self.group}", "-q"], self._log("sink"))  # fmt: skip

    def start_notify(self) -> None:
        args = ["notify", "--kafka", self.bootstrap, "--topic-prefix", self.prefix,
                "--channel", CHANNEL, "--state", str(self.root / "notify.sqlite"),
                "--slack-url", self.slack.url, "--group", f"n-{self.group}"]  # fmt: skip
        self.notify = Part("notify", args, self._log("notify"), {"SLACK_BOT_TOKEN": TOKEN})

    def play(self, runs: int, seconds: float, faults: list[str], beat: float = 0.5,
             until_told: bool = False) -> Traffic:  # fmt: skip
        """Start the traffic: `runs` runs of two processes beating every `beat` seconds, for
        `seconds` (`until_told`: then on until `Traffic.end_after`)."""
        self.traffic = Traffic(self.bootstrap, self.prefix, runs, seconds, faults,
                               self.root / "spool", self._log("traffic"), beat,
                               until_told)  # fmt: skip
        return self.traffic

    # -- what happens to them --------------------------------------------------------------

    def kill_worker(self, index: int, restart: bool = True) -> Worker | None:
        """SIGKILL worker `index`; with `restart`, a new worker in its place."""
        with self._lock:
            old = self.workers[index]
            old.kill()
            self.gone.append(old)
            if not restart:
                del self.workers[index]
                return None
            new = self.workers[index] = self._worker()
            return new

    def restart_sink(self) -> None:
        with self._lock:
            assert self.sink is not None
            self.sink.kill()
            self.gone.append(self.sink)
            self.start_sink()

    def kill_notify_holding_post(self, timeout: float = 60.0) -> bool:
        """Hold Slack's next post, SIGKILL the notifier while Slack has it, start another;
        whether a post was held (none came within `timeout`: killed all the same)."""
        assert self.notify is not None
        self.slack.hold("chat.postMessage")
        held = self.slack.held.wait(timeout)
        with self._lock:
            self.notify.kill()
            self.gone.append(self.notify)
            self.slack.release()
            self.start_notify()
        return held

    def broker_away(self, seconds: float) -> None:
        """Stop the broker (SIGTERM, a clean shutdown) for `seconds`, then start it on its
        data again."""
        stopped = time.time()
        self.broker.stop()
        time.sleep(max(0.0, seconds - (time.time() - stopped)))
        self.broker.start()
        self.outages.append((stopped, time.time()))

    # -- the end ---------------------------------------------------------------------------

    def deliver_spooled(self) -> None:
        """Send what the traffic's emitters left in their spools as they closed (what the
        next emitter with the same destination, or `runwatch spool flush`, does)."""
        base = self.root / "spool"
        for spool in sorted(base.iterdir() if base.is_dir() else ()):
            subprocess.run([RUNWATCH, "spool", "flush", "--dir", str(spool)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def _unsupervised(self) -> None:
        self._supervising.set()
        if self._supervisor is not None:
            self._supervisor.join()
            self._supervisor = None

    def settle(self, timeout: float = 300.0) -> None:
        """After the traffic: what the emitters spooled delivered, every transition the
        events imply published (a transition may come late), the workers stopped (nothing
        more is published), and the history and Slack caught up with the topic."""
        traffic = self.traffic
        assert traffic is not None
        wait_for(lambda: traffic.done, "the traffic played out", timeout)
        # its spools are orphans only once its process is gone (it holds their locks until it
        # exits, after saying it is done): flushed before, they were "still running", kept
        wait_for(lambda: traffic.proc.poll() is not None, "the traffic's process exited", timeout)
        self.deliver_spooled()

        def all_published() -> bool:
            events = read_all(self.bootstrap, self.topic("events"))
            have = {(r.value["id"], r.value["state"])
                    for r in read_all(self.bootstrap, self.topic("alerts"))}  # fmt: skip
            return all((a["id"], a["state"]) in have for a in implied(events, self.config))

        wait_for(lambda: all(w.live() for w in self.workers), "the workers live", timeout)
        wait_for(all_published, "every transition the events imply published", timeout, 2.0)
        self.stop_workers()
        ids = {r.value["id"] for r in read_all(self.bootstrap, self.topic("alerts"))}
        wait_for(lambda: ids <= self.stored_alerts(), "the history holds them", timeout, 1.0)
        wait_for(lambda: ids <= {i for m in self.slack.messages for i in m.shown},
                 "Slack shows them", timeout, 1.0)  # fmt: skip

    def stored_alerts(self) -> set[str]:
        """The ids of the alert transitions the history holds (read while the sink writes)."""
        with Store.reader(self.db, wait=60) as store:
            return {r[0] for r in store.con.execute("SELECT id FROM alerts").fetchall()}

    def stop_workers(self) -> None:
        """A clean stop of each worker (after which nothing more is published)."""
        self._unsupervised()
        for w in self.workers:
            w.stop()
        self.gone += self.workers
        self.workers = []

    def close(self) -> None:
        """Stop everything started here (by pid), the broker last."""
        self._unsupervised()
        if self.traffic is not None:
            self.traffic.close()
        for part in [*self.workers, self.notify, self.sink]:
            if part is not None:  # (one that exited on its own: its log closed)
                part.stop()
        self.slack.close()
        self.broker.stop()

    def tell(self, lines: int = 40) -> str:
        """The last lines of every part's log, for a failure's report."""
        out = []
        for log in sorted(self.root.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)

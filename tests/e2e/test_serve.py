"""`runwatch serve` end to end: simulated jobs in, alerts out (console and JSON API),
history in DuckDB, /metrics; kill -9 and restart loses no acknowledged event and repeats no
alert transition; bad requests get the right status and reason and are counted."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from runwatch.dev.launch import ServeProcess
from runwatch.dev.simulate import EXPECTED_ROOT, EXPECTED_RULE, FAULTS, Cluster
from runwatch.emitters import Emitter

pytestmark = pytest.mark.slow


def simulate(url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "runwatch.cli", "simulate", "--url", url, *args]


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/v1/events", body, headers or {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def expected_ids(**cluster: Any) -> set[str]:
    return {e["id"] for e in Cluster(**cluster).events(0.0, 60.0)}


def alternates(rows: list[tuple[str, str]]) -> bool:
    """Per key, in order: firing, resolved, firing, ..."""
    last: dict[str, str] = {}
    for key, state in rows:
        want = "resolved" if last.get(key) == "firing" else "firing"
        if state != want:
            return False
        last[key] = state
    return True


def test_simulated_faults_raise_their_alerts_through_serve(tmp_path: Path) -> None:
    faults = [*FAULTS, "slow_but_healthy"]
    args = ["--jobs", "6", "--seed", "3", "--duration", "800", "--speed", "40",
            "--fault-step", "2"] + [f"--fault={f}" for f in faults]  # fmt: skip
    with ServeProcess(tmp_path / "h.duckdb") as serve:
        subprocess.run(simulate(serve.url, *args), check=True, timeout=120, capture_output=True)
        ended = time.time()
        alerts = serve.get("/v1/alerts")["alerts"]
        runs = {r["run"]: r for r in serve.get("/v1/runs")["runs"]}
        one = serve.get("/v1/runs/sim-3-job000")
        metrics = serve.get("/metrics")
    console = serve.output()
    assert len(runs) == 6
    assert one["run"] == "sim-3-job000"
    assert one["labels"]["sim_fault"] == "sandbox_hang"
    fired = {(a["run"], a["rule"]) for a in alerts if a["state"] == "firing" and a["ts"] < ended}
    for i, fault in enumerate(faults):
        run = f"sim-3-job{i:03d}"
        rules = {rule for r, rule in fired if r == run}
        if fault == "slow_but_healthy":
            assert rules == set(), rules
        else:
            assert EXPECTED_RULE[fault] in rules, (fault, rules)
            assert f"FIRING   critical {EXPECTED_RULE[fault]}" in console
            # the fault's incident names its root cause (its first incident: a sandbox
            # hang may recur)
            mine = [a for a in alerts if a["run"] == run]
            first = mine[0]["incident"]["id"]
            last = [a for a in mine if a["incident"]["id"] == first][-1]["incident"]
            assert last["root_rule"] == EXPECTED_ROOT[fault][0], (fault, last)
    assert 'runwatch_events_total{kind="trajectory.done"}' in metrics
    assert "runwatch_serve_accepted_events_total" in metrics
    # the history holds every event once, and the transitions
    with duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True) as con:
        ((n, distinct),) = con.execute("SELECT count(*), count(DISTINCT id) FROM events").fetchall()
        (n_alerts,) = con.execute("SELECT count(*) FROM alert_log").fetchone() or (0,)
    generated = expected_ids(jobs=6, faults=faults, seed=3, duration=800.0, fault_step=2)
    assert n == distinct == len(generated)
    assert n_alerts >= len(FAULTS)


def test_kill_9_and_restart_loses_no_event_and_repeats_no_alert(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    args = ["--jobs", "3", "--seed", "5", "--duration", "600", "--speed", "40", "--fault-step",
            "1", "--fault", "inference_crash", "--fault", "sandbox_hang"]  # fmt: skip
    first = ServeProcess(db)
    sim = subprocess.Popen(
        simulate(first.url, *args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while "FIRING" not in first.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "FIRING" in first.output()
        time.sleep(0.3)
        first.kill()  # mid-run: events in flight, transitions made, history partly written
        second = ServeProcess(db, port=first.port)
        try:
            assert sim.wait(120) == 0
            time.sleep(0.5)
        finally:
            second.stop()
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    console = [ln for ln in second.output().splitlines() if "FIRING" in ln or "resolved" in ln]
    assert len(console) == len(set(console)), "a transition was notified twice"
    generated = expected_ids(jobs=3, faults=["inference_crash", "sandbox_hang"], seed=5,
                             duration=600.0, fault_step=1)  # fmt: skip
    with duckdb.connect(str(db), read_only=True) as con:
        ids = {r[0] for r in con.execute("SELECT id FROM events").fetchall()}
        rows = con.execute("SELECT key, state, id FROM alert_log ORDER BY seq").fetchall()
    assert ids == generated
    assert len({r[2] for r in rows}) == len(rows)
    assert alternates([(k, s) for k, s, _ in rows])
    logged = (tmp_path / "h.duckdb.serve/alerts.jsonl").read_text().splitlines()
    # (a kill between logging a transition and printing it may leave one unprinted)
    assert len(console) <= len(logged) == len(rows)


def raw_request(port: int, head: bytes) -> bytes:
    """Send a request's head as written (no body), and read the answer to the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_bad_requests_get_a_reason_and_the_service_keeps_going(tmp_path: Path) -> None:
    good = json.dumps({"v": 1, "id": "e1", "ts": time.time(), "run": "r1", "kind": "heartbeat",
                       "src": {"component": "trainer"}}).encode()  # fmt: skip
    auth = {"Authorization": "Bearer s3cret"}
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    with ServeProcess(
        tmp_path / "h.duckdb", args=["--token-file", str(token_file)], token="s3cret"
    ) as serve:
        status, body = post(serve.port, good, {"Authorization": "Bearer wrong"})
        assert status == 401
        assert "token" in body["error"]
        assert post(serve.port, good)[0] == 401
        # refused from its head: the 10 MiB are never read
        answer = raw_request(serve.port, b"POST /v1/events HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 10485760\r\n\r\n")  # fmt: skip
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        # malformed requests: 400 from the parser, never a 500
        for head in (b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: \xc2\xb2\r\n\r\n",
                     b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                     b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"):  # fmt: skip
            answer = raw_request(serve.port, head)
            assert re.match(rb"HTTP/1\.[01] 400 ", answer), (head, answer[:200])
        # every endpoint but the probes wants the token
        for path in ("/metrics", "/v1/runs", "/v1/alerts", "/v1/runs/r1"):
            answer = raw_request(serve.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 401 "), (path, answer[:200])
        status, body = post(serve.port, b'{"v": 1, "id": ', auth)
        assert status == 400
        assert "line 1" in body["error"]
        assert body["accepted"] == 0
        bad_run = good.replace(b'"r1"', b'"bad run id!"').replace(b'"e1"', b'"e2"')
        status, body = post(serve.port, bad_run, auth)
        assert status == 400
        assert "run" in body["error"]
        status, body = post(serve.port, good + b"\n" + b"not json", auth)
        assert status == 400
        assert body["accepted"] == 1
        assert body["rejected"][0]["line"] == 2
        assert post(serve.port, good, auth) == (200, {"accepted": 1})  # a duplicate: fine
        assert serve.get("/healthz") == {"ok": True}
        assert serve.get("/readyz") == {"ready": True}
        metrics = serve.get("/metrics")
        with pytest.raises(Exception, match="400"):
            serve.get("/v1/runs/bad%20run")
        assert serve.get("/v1/runs")["runs"][0]["run"] == "r1"
    assert 'runwatch_serve_rejected_total{reason="unauthorised"} 6.0' in metrics
    assert 'runwatch_serve_rejected_total{reason="invalid_event"} 3.0' in metrics
    assert "runwatch_events_invalid_total 3.0" in metrics
    with duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM invalid_events").fetchone() == (3,)


def test_the_emitter_and_its_guard_send_the_token(tmp_path: Path) -> None:
    """Behind a token, the emitter's events are accepted and the circuit breaker's guard
    reads its run's view; without the token, the guard fails open."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    with ServeProcess(tmp_path / "h.duckdb", args=["--token-file", str(token_file)],
                      token="s3cret") as serve:  # fmt: skip
        em = Emitter("r-token", "trainer", url=serve.url, token="s3cret", heartbeat=False,
                     spool=tmp_path / "spool")  # fmt: skip
        stranger = Emitter("r-token", "trainer", url=serve.url, heartbeat=False,
                           spool=tmp_path / "spool-2")  # fmt: skip
        try:
            em.emit("reward", step=1, mean=1.0)
            assert em.flush(timeout=30)
            assert serve.get("/v1/runs/r-token")["run"] == "r-token"  # delivered, not spooled
            assert em.guard(poll_interval=60).refresh().reachable
            assert not stranger.guard(poll_interval=60).refresh().reachable
        finally:
            em.close(timeout=5)
            stranger.close(timeout=1)


def test_emitters_reach_serve_over_http_and_through_a_spool(tmp_path: Path, monkeypatch) -> None:
    from runwatch.emitters import Emitter

    spool = tmp_path / "spool"
    spool.mkdir()
    with ServeProcess(tmp_path / "h.duckdb", args=["--spool", str(spool)]) as serve:
        monkeypatch.setenv("RUNWATCH_URL", serve.url)
        monkeypatch.setenv("RUNWATCH_SPOOL", str(tmp_path / "fallback"))
        monkeypatch.delenv("RUNWATCH_KAFKA", raising=False)
        em = Emitter(run="via-http", component="trainer", heartbeat=False)
        assert em.url == serve.url
        em.emit("step.done", step=1, duration_s=2.0)
        em.close()
        with Emitter(run="via-spool", component="rollout", path=spool, heartbeat=False) as em2:
            em2.emit("trajectory.started", traj="t1")
        deadline = time.monotonic() + 10
        runs: set[str] = set()
        while runs != {"via-http", "via-spool"} and time.monotonic() < deadline:
            runs = {r["run"] for r in serve.get("/v1/runs")["runs"]}
            time.sleep(0.1)
    assert runs == {"via-http", "via-spool"}


def test_emitter_spools_while_serve_is_down_and_sends_when_it_is_back(tmp_path: Path) -> None:
    from runwatch.emitters import Emitter

    db = tmp_path / "h.duckdb"
    with ServeProcess(db) as serve:  # learn a free port, then leave it empty
        port = serve.port
    em = Emitter(run="outage", component="trainer", url=f"http://127.0.0.1:{port}",
                 spool=tmp_path / "spool", heartbeat=False)  # fmt: skip
    try:
        for step in range(50):
            em.emit("step.done", step=step)
        assert em.flush(10)
        assert list((tmp_path / "spool").glob("http-*/events-*.jsonl"))
        with ServeProcess(db, port=port) as back:
            deadline = time.monotonic() + 15
            count = 0
            while count < 50 and time.monotonic() < deadline:
                runs = back.get("/v1/runs")["runs"]
                count = sum(r["events"] for r in runs if r["run"] == "outage")
                time.sleep(0.1)
            em.close()
    finally:
        em.close()
    assert count == 50


def test_slack_gets_each_transition_once_across_a_restart(tmp_path: Path) -> None:
    from harness.slack_server import FakeSlack

    fake = FakeSlack(token="xoxb-test-token", channels=("C-ALERTS",))
    fake.add_channel("#rl-alerts", "C-ALERTS")
    config = tmp_path / "slack.toml"
    config.write_text(
        f'[slack]\nchannel = "#rl-alerts"\nstate = "{tmp_path / "notify.sqlite"}"\n'
        f'base_url = "{fake.url}"\n'
    )
    db, env = tmp_path / "h.duckdb", {"SLACK_BOT_TOKEN": "xoxb-test-token"}
    args = ["--slack-config", str(config)]
    now = time.time()
    src = {"component": "inference", "host": "n0", "pid": 7, "instance": "vllm-0"}
    events = [
        {"v": 1, "id": "s0", "ts": now, "run": "slack-run", "kind": "run.started",
         "src": src, "config": {"heartbeat_lost": {"timeout": 1.0}}},
        {"v": 1, "id": "s1", "ts": now, "run": "slack-run", "kind": "heartbeat", "src": src},
    ]  # fmt: skip
    try:
        with ServeProcess(db, args=args, env=env) as serve:
            body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
            assert post(serve.port, body)[0] == 200
            deadline = time.monotonic() + 15
            while not fake.roots() and time.monotonic() < deadline:
                time.sleep(0.1)
        assert len(fake.roots()) == 1
        assert "heartbeat_lost" in fake.roots()[0].text
        # serve re-submits its alert log to the notifier before it listens, and its
        # SIGTERM drains the notifier's queue before it exits: whatever the restart would
        # post twice has reached Slack once the process is gone
        with ServeProcess(db, args=args, env=env):
            pass
        assert [m.ts for m in fake.messages] == [fake.roots()[0].ts]  # no reply either
    finally:
        fake.close()


def test_kill_9_during_a_slack_post_then_restart_posts_it_once(tmp_path: Path) -> None:
    """Slack got the message but serve died before it heard so: after the restart the
    message is found in the channel (by the alert id in its metadata), not posted again."""
    from harness.slack_server import FakeSlack
    from runwatch.notify.store import NotifyStore

    fake = FakeSlack(token="xoxb-test-token", channels=("C-ALERTS",))
    fake.add_channel("#rl-alerts", "C-ALERTS")
    ledger = tmp_path / "notify.sqlite"
    config = tmp_path / "slack.toml"
    config.write_text(f'[slack]\nchannel = "#rl-alerts"\nstate = "{ledger}"\n'
                      f'base_url = "{fake.url}"\n')  # fmt: skip
    db, env = tmp_path / "h.duckdb", {"SLACK_BOT_TOKEN": "xoxb-test-token"}
    args = ["--slack-config", str(config)]
    now = time.time()
    src = {"component": "inference", "host": "n0", "pid": 7, "instance": "vllm-0"}
    events = [
        {"v": 1, "id": "k0", "ts": now, "run": "held-run", "kind": "run.started",
         "src": src, "config": {"heartbeat_lost": {"timeout": 1.0}}},
        {"v": 1, "id": "k1", "ts": now, "run": "held-run", "kind": "heartbeat", "src": src},
    ]  # fmt: skip
    fake.hold("chat.postMessage")
    try:
        serve = ServeProcess(db, args=args, env=env)
        body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        assert post(serve.port, body)[0] == 200
        assert fake.held.wait(60), "the alert never reached Slack"
        serve.kill()  # Slack has the message; serve never heard back
        fake.release()
        assert len(fake.roots()) == 1
        logged = (tmp_path / "h.duckdb.serve" / "alerts.jsonl").read_text().splitlines()
        ident = json.loads(logged[0])["id"]
        with ServeProcess(db, args=args, env=env):
            deadline = time.monotonic() + 60
            store = NotifyStore(ledger)
            try:
                while not store.was_sent(ident):
                    assert time.monotonic() < deadline, "the restarted serve never settled it"
                    time.sleep(0.1)
            finally:
                store.close()
        assert fake.count("conversations.history") >= 1
        assert len(fake.roots()) == 1
    finally:
        fake.close()


def test_leftovers_go_to_their_own_service_only_and_once(tmp_path: Path) -> None:
    """A job killed while its service (A) was down leaves spooled events. A later emitter
    for another service (B), sharing the spool base, sends none of them; one for A sends
    them all, once."""
    from runwatch.dev.broker import free_port

    spool, port_a = tmp_path / "spool", free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNWATCH_KAFKA", "RUNWATCH_URL", "RUNWATCH_SPOOL")}  # fmt: skip
    job = ("import os, sys\nfrom runwatch.emitters import Emitter\n"
           "em = Emitter(run='left', component='trainer', url=sys.argv[1], spool=sys.argv[2],"
           " heartbeat=False, close_timeout=0.5)\n"
           "for s in range(20):\n    em.emit('step.done', step=s)\nem.flush(10)\n"
           "os._exit(0)\n")  # killed: no close, the spool stays  # fmt: skip
    subprocess.run([sys.executable, "-c", job, f"http://127.0.0.1:{port_a}", str(spool)],
                   check=True, timeout=120, env=env)  # fmt: skip
    assert list(spool.glob("http-*/events-*.jsonl"))

    def send_one(url: str, run: str) -> None:
        from runwatch.emitters import Emitter

        em = Emitter(run=run, component="trainer", url=url, spool=spool, heartbeat=False)
        em.emit("step.done", step=0)
        assert em.flush(30)
        em.close()

    def events(serve: ServeProcess) -> dict[str, int]:
        return {r["run"]: r["events"] for r in serve.get("/v1/runs")["runs"]}

    with ServeProcess(tmp_path / "b.duckdb") as b:
        send_one(b.url, "b-job")
        assert events(b) == {"b-job": 1}
    with ServeProcess(tmp_path / "a.duckdb", port=port_a) as a:
        send_one(a.url, "a-job")
        deadline = time.monotonic() + 60
        while events(a).get("left") != 20:
            assert time.monotonic() < deadline, events(a)
            time.sleep(0.1)
        assert events(a) == {"a-job": 1, "left": 20}
    assert not list(spool.glob("http-*/events-*.jsonl"))


def test_a_trainer_with_no_destination_finishes_and_spool_flush_delivers_it(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNWATCH_KAFKA", "RUNWATCH_URL", "RUNWATCH_SPOOL")}  # fmt: skip
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    trainer = ("from runwatch.emitters import Emitter\n"
               "em = Emitter(run='nowhere', component='trainer', heartbeat=False)\n"
               "for s in range(10):\n    em.emit('step.done', step=s)\n"
               "em.close()\nprint('trained')\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", trainer], capture_output=True, text=True,
                          env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained\n"
    assert "runwatch spool flush" in done.stderr  # it said where the events are
    runwatch = [sys.executable, "-m", "runwatch.cli", "spool"]
    status = subprocess.run([*runwatch, "status"], capture_output=True, text=True, env=env,
                            timeout=60, check=True)  # fmt: skip
    assert "10 events" in status.stdout, status.stdout
    assert "no destination" in status.stdout
    with ServeProcess(tmp_path / "h.duckdb") as serve:
        unsent = tmp_path / "cache" / "runwatch" / "spool" / "unsent"
        sent = subprocess.run([*runwatch, "flush", "--dir", str(unsent), "--url", serve.url],
                              capture_output=True, text=True, env=env, timeout=120,
                              check=False)  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        assert "10 events sent" in sent.stderr
        runs = {r["run"]: r["events"] for r in serve.get("/v1/runs")["runs"]}
        assert runs == {"nowhere": 10}
    again = subprocess.run([*runwatch, "status"], capture_output=True, text=True, env=env,
                           timeout=60, check=True)  # fmt: skip
    assert again.stdout == "nothing waits\n"


def test_healthy_simulated_jobs_raise_nothing_when_the_simulation_ends(tmp_path: Path) -> None:
    """The simulation's end is the jobs' end (final heartbeats, run.finished), not their
    silence: nothing fires afterwards, however long one waits."""
    args = ["--jobs", "2", "--seed", "5", "--duration", "120", "--speed", "40"]
    with ServeProcess(tmp_path / "h.duckdb") as serve:
        done = subprocess.run(simulate(serve.url, *args), check=True, timeout=120,
                              capture_output=True, text=True)  # fmt: skip
        assert "2 jobs for 120 simulated s at 40x" in done.stderr  # it says what it does
        runs = {r["run"]: r["status"] for r in serve.get("/v1/runs")["runs"]}
        # ended, not silent: the rules judge no finished run, so nothing can fire later
        assert runs == {"sim-5-job000": "killed", "sim-5-job001": "killed"}
        assert serve.get("/v1/alerts")["alerts"] == []

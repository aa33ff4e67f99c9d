"""Every role against a secured broker (`runwatch kafka start --secure`): SASL_SSL with
SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN, and mutual TLS. No mocks: the Emitter, `runwatch
worker`, `runwatch alerts` and `runwatch sink` as a platform team would run them (the roles
get their settings the way the Helm chart passes them, through RUNWATCH_KAFKA_* variables, or
through the CLI flags). A wrong password, an unknown mechanism or a missing CA file ends a
CLI role with one line; the Emitter keeps spooling; the password is printed nowhere.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import terminate, wait_for

from runwatch.dev.broker import KafkaBroker
from runwatch.dev.tls import SecuredListeners
from runwatch.emitters import Emitter
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.store import Store

pytestmark = pytest.mark.integration

RUNWATCH = str(Path(sys.executable).with_name("runwatch"))
RULES = "[rules.zero_reward]\nsteps = 2\n"
WRONG = "not-the-password-0451"

#: (protocol, mechanism): the combinations the pipeline runs through end to end
COMBOS = {
    "sasl_ssl-scram512": ("SASL_SSL", "SCRAM-SHA-512"),
    "sasl_plaintext-plain": ("SASL_PLAINTEXT", "PLAIN"),
    "mutual_tls": ("SSL", ""),
}


def security(s: SecuredListeners, protocol: str, mechanism: str = "",
             password: str | None = None) -> KafkaSecurity:  # fmt: skip
    """What a trainer would configure for that listener."""
    tls = dict(cafile=s.ca_file) if protocol in ("SSL", "SASL_SSL") else {}
    if protocol == "SSL":
        tls |= dict(certfile=s.path("client.pem"), keyfile=s.path("client.key"))
    if protocol.startswith("SASL"):
        return KafkaSecurity(protocol, mechanism, s.username, password or s.password, **tls)
    return KafkaSecurity(protocol, **tls)


def env_of(sec: KafkaSecurity, password_file: str | None) -> dict[str, str]:
    """The same settings as the Helm chart passes them: variables, the password as a file."""
    env = {"RUNWATCH_KAFKA_SECURITY_PROTOCOL": sec.protocol}
    pairs = [("RUNWATCH_KAFKA_SASL_MECHANISM", sec.mechanism if sec.sasl else None),
             ("RUNWATCH_KAFKA_SASL_USERNAME", sec.username),
             ("RUNWATCH_KAFKA_SASL_PASSWORD_FILE", password_file if sec.sasl else None),
             ("RUNWATCH_KAFKA_SSL_CAFILE", sec.cafile),
             ("RUNWATCH_KAFKA_SSL_CERTFILE", sec.certfile),
             ("RUNWATCH_KAFKA_SSL_KEYFILE", sec.keyfile)]  # fmt: skip
    env.update({k: v for k, v in pairs if v})
    return env


def flags_of(sec: KafkaSecurity, password_file: str | None) -> list[str]:
    """The same settings as CLI flags."""
    out = ["--kafka-security-protocol", sec.protocol]
    pairs = [("--kafka-sasl-mechanism", sec.mechanism if sec.sasl else None),
             ("--kafka-sasl-username", sec.username),
             ("--kafka-sasl-password-file", password_file if sec.sasl else None),
             ("--kafka-ssl-cafile", sec.cafile), ("--kafka-ssl-certfile", sec.certfile),
             ("--kafka-ssl-keyfile", sec.keyfile)]  # fmt: skip
    for flag, value in pairs:
        if value:
            out += [flag, value]
    return out


def clean_env() -> dict[str, str]:
    """Our environment without RUNWATCH_KAFKA_* settings a developer may have exported."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_KAFKA")}


class Role:
    """A `runwatch` subprocess whose stderr goes to a file (read at any time, no pipe)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([RUNWATCH, *args], stdout=subprocess.DEVNULL,
                                     stderr=self._out, env={**clean_env(), **env})  # fmt: skip

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} from {self.proc.args}:\n{self.text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> int:
        terminate(self.proc)
        self._out.close()
        return int(self.proc.returncode)


@pytest.fixture
def roles() -> Iterator[list[Role]]:
    started: list[Role] = []
    yield started
    for role in started:
        role.stop()


def run(args: list[str], env: dict[str, str] | None = None,
        timeout: float = 90) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([RUNWATCH, *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean_env(), **(env or {})}, check=False)  # fmt: skip


def stored_events(db: Path, run_id: str) -> int:
    if not db.exists():
        return 0
    with Store.reader(db, wait=60) as store:
        (count,) = store.con.execute(
            "SELECT count(*) FROM events WHERE run = ?", [run_id]
        ).fetchone()
    return int(count)


@pytest.mark.parametrize("combo", list(COMBOS))
def test_emitter_worker_alerts_and_sink_over_a_secured_broker(
    combo: str,
    secure_kafka: KafkaBroker,
    tmp_path: Path,
    roles: list[Role],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # every library's debug lines, to look for the password
    s = secure_kafka.secured
    assert s is not None
    protocol, mechanism = COMBOS[combo]
    sec = security(s, protocol, mechanism)
    address = s.address(protocol)
    prefix = f"t{uuid.uuid4().hex[:8]}."
    run_id = f"secure-{combo}-{uuid.uuid4().hex[:6]}"
    (tmp_path / "rules.toml").write_text(RULES)

    # the worker gets its settings as the chart gives them: environment variables, at DEBUG
    worker = Role(
        ["worker", "--kafka", address, "--topic-prefix", prefix, "--partitions", "1",
         "--app-id", f"g-{prefix}", "--config", str(tmp_path / "rules.toml"),
         "--log-level", "debug"],
        env_of(sec, s.password_file), tmp_path / "worker.log",
    )  # fmt: skip
    roles.append(worker)
    worker.wait_for("live on partitions [0]")

    # the sink and `runwatch alerts` get theirs as flags
    db = tmp_path / "history.duckdb"
    sink = Role(
        ["sink", "--kafka", address, "--db", str(db), "--group", f"sink-{prefix}",
         "--events-topic", f"{prefix}runwatch.events",
         "--alerts-topic", f"{prefix}runwatch.alerts", "--flush-interval", "0.2",
         *flags_of(sec, s.password_file)],
        {}, tmp_path / "sink.log",
    )  # fmt: skip
    roles.append(sink)

    em = Emitter(run=run_id, component="trainer", kafka=address, topic=f"{prefix}runwatch.events",
                 heartbeat=False, spool=tmp_path / "spool", kafka_security=sec)  # fmt: skip
    try:
        em.emit("run.started", total_steps=10)
        for step in (1, 2, 3):
            em.emit("step.done", step=step, duration_s=1.0)
            em.emit("reward", step=step, mean=0.0)
    finally:
        em.close()

    deadline, alerts = time.monotonic() + 60, []
    while not alerts and time.monotonic() < deadline:
        done = run(["alerts", "--kafka", address, "--topic-prefix", prefix, "--json",
                    "--run", run_id, *flags_of(sec, s.password_file)])  # fmt: skip
        assert done.returncode == 0, done.stderr
        alerts = [json.loads(line) for line in done.stdout.splitlines()]
        time.sleep(0.3 if not alerts else 0)
    assert [(a["rule"], a["state"]) for a in alerts] == [("zero_reward", "firing")], worker.text()

    deadline = time.monotonic() + 60
    while stored_events(db, run_id) < 7:
        assert time.monotonic() < deadline, sink.text()
        assert sink.proc.poll() is None, sink.text()
        time.sleep(0.3)
    assert sink.stop() == 0, sink.text()
    with Store.reader(db, wait=60) as store:
        rows = store.con.execute("SELECT rule, state FROM alert_log WHERE run = ?", [run_id])
        assert rows.fetchall() == [("zero_reward", "firing")]
    assert worker.stop() == 0, worker.text()[-3000:]

    assert "DEBUG" in worker.text()  # it did log at debug level
    for text in (worker.text(), sink.text(), caplog.text):
        assert s.password not in text


@pytest.mark.parametrize("role", ["worker", "alerts", "sink", "notify", "simulate"])
def test_a_wrong_password_ends_a_cli_role_with_one_line(
    role: str, secure_kafka: KafkaBroker, tmp_path: Path
) -> None:
    s = secure_kafka.secured
    assert s is not None
    wrong = tmp_path / "password"
    wrong.write_text(WRONG + "\n")
    sec = security(s, "SASL_SSL", "SCRAM-SHA-512", WRONG)
    args = [role, "--kafka", s.address("SASL_SSL")]
    args += {
        "sink": ["--db", str(tmp_path / "h.duckdb")],
        "notify": ["--channel", "#c", "--state", str(tmp_path / "n.sqlite")],
        "simulate": ["--jobs", "1", "--speed", "1000"],
    }.get(role, [])
    env = {**env_of(sec, str(wrong)), "SLACK_BOT_TOKEN": "xoxb-test"}
    started = time.monotonic()
    done = run(args, env, timeout=60)
    assert time.monotonic() - started < 30, "it should fail fast, not retry for long"
    assert done.returncode not in (0, None)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "refused the SASL credentials (SCRAM-SHA-512 as runwatch)" in lines[0]
    assert WRONG not in done.stderr + done.stdout
    assert s.password not in done.stderr + done.stdout


def test_other_mismatches_say_what_is_wrong(secure_kafka: KafkaBroker, tmp_path: Path) -> None:
    s = secure_kafka.secured
    assert s is not None
    alerts = ["alerts", "--kafka"]
    # no CA: our throwaway CA is not one the system trusts
    done = run([*alerts, s.address("SASL_SSL"), "--kafka-security-protocol", "SASL_SSL",
                "--kafka-sasl-username", s.username, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
                "--kafka-sasl-password-file", s.password_file])  # fmt: skip
    assert done.returncode == 1
    assert "TLS with Kafka at" in done.stderr
    assert "--kafka-ssl-cafile" in done.stderr
    # mutual TLS without a client certificate
    done = run([*alerts, s.address("SSL"), "--kafka-security-protocol", "SSL",
                "--kafka-ssl-cafile", s.ca_file])  # fmt: skip
    assert done.returncode == 1
    assert "TLS with Kafka at" in done.stderr, done.stderr
    # plaintext against a TLS listener
    done = run([*alerts, s.address("SASL_SSL")])
    assert done.returncode == 1
    assert "--kafka-security-protocol" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"RUNWATCH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-1"},
         "SASL mechanism 'SCRAM-SHA-1' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"RUNWATCH_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"},
         "CA file /nonexistent/ca.pem not readable"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("role", ["worker", "sink"])
def test_bad_settings_exit_2_with_one_line(
    role: str, setting: dict[str, str], message: str, secure_kafka: KafkaBroker, tmp_path: Path
) -> None:
    s = secure_kafka.secured
    assert s is not None
    env = {**env_of(security(s, "SASL_SSL", "SCRAM-SHA-512"), s.password_file), **setting}
    args = [role, "--kafka", s.address("SASL_SSL")]
    args += ["--db", str(tmp_path / "h.duckdb")] if role == "sink" else []
    done = run(args, env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"runwatch {role}: Kafka security: {message}")
    assert s.password not in done.stderr


def test_the_emitter_with_a_wrong_password_spools_and_never_blocks(
    secure_kafka: KafkaBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    s = secure_kafka.secured
    assert s is not None
    sec = security(s, "SASL_SSL", "SCRAM-SHA-512", WRONG)
    # emit() never waits on the network: no socket is connected from the emitting thread
    # (the sender's thread does that), whatever the broker answers
    connecting: list[str] = []
    for name in ("connect", "connect_ex"):
        real = getattr(socket.socket, name)

        def spy(sock: socket.socket, *args: Any, _real: Any = real) -> Any:
            connecting.append(threading.current_thread().name)
            return _real(sock, *args)

        monkeypatch.setattr(socket.socket, name, spy)
    em = Emitter(run="wrong-password", component="trainer", kafka=s.address("SASL_SSL"),
                 spool=tmp_path, heartbeat=False, close_timeout=60.0,
                 kafka_security=sec)  # fmt: skip
    for step in range(500):
        em.emit("step.done", step=step)
    emitting = threading.current_thread().name
    assert emitting not in connecting, connecting

    def said_spooling() -> bool:
        return any("unavailable" in r.getMessage() and "spooling events" in r.getMessage()
                   for r in caplog.records if r.name == "runwatch.emitters")  # fmt: skip

    wait_for(said_spooling, "the sender to give up on the broker and spool", timeout=120)
    em.close()
    assert emitting not in connecting, connecting
    spooled = [json.loads(line) for path in sorted(tmp_path.glob("kafka-*/*.jsonl"))
               for line in path.read_text().splitlines()]  # fmt: skip
    assert [e["step"] for e in spooled if e["kind"] == "step.done"] == list(range(500))
    warnings = [r.getMessage() for r in caplog.records if r.name == "runwatch.emitters"]
    assert any("unavailable" in w and "spooling events" in w for w in warnings), warnings
    assert WRONG not in caplog.text
    assert s.password not in caplog.text

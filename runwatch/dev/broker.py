"""A real single-node Apache Kafka broker (KRaft) for development and integration tests.

The machines this project runs on have no Docker, so the broker is the pinned Kafka jar and its
runtime dependencies (`runwatch.dev.jars`) run by the local `java` as one combined
broker+controller on 127.0.0.1, started and stopped by pid, and ready once it answers a real
Metadata request. `runwatch kafka start|stop|status` (runwatch/commands/kafka.py) drive it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType

from runwatch.dev.jars import DEFAULT_VERSION, Progress, _say, cache_dir, fetch_jars
from runwatch.dev.tls import SecuredListeners
from runwatch.exceptions import KafkaBrokerError, SecureSetupError

STATE_FILE = "broker.json"
DATA_HELP = "the broker's data, log and state folder"

# Settings for one broker that tests start and stop often: everything replicated once, one
# partition, no rebalance delay, topics created on first use.
_SERVER_PROPERTIES = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={logs}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""
# Warnings only, into a file in the data dir, plus the one "started" line.
_LOG4J2_PROPERTIES = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def default_data_dir() -> Path:
    """Where `runwatch kafka start` keeps the broker's data, log and state by default."""
    return cache_dir() / "kafka" / "data"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not led by '-'."""
    while (text := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))[0] == "-":
        pass
    return text


@dataclass(frozen=True)
class BrokerState:
    """What `start` records in the data dir so that `stop` and `status` find the broker by pid."""

    pid: int
    bootstrap: str
    version: str
    properties: str
    started_at: float


def read_state(data_dir: Path) -> BrokerState | None:
    """The broker recorded in `data_dir`, running or not; None if none was started there."""
    try:
        return BrokerState(**json.loads((data_dir / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int, properties: str) -> bool:
    """Whether `pid` is still our broker: alive, no zombie, started with our properties file.

    Checking the command line keeps a recycled pid from being mistaken for the broker.
    """
    proc = Path(f"/proc/{pid}")
    if not Path("/proc/self").is_dir():  # no procfs (macOS): the pid is all there is
        with contextlib.suppress(OSError):
            os.kill(pid, 0)
            return True
        return False
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and properties.encode() in cmdline


def is_running(data_dir: Path) -> BrokerState | None:
    """The broker recorded in `data_dir` if its process is still running."""
    state = read_state(data_dir)
    return state if state is not None and _alive(state.pid, state.properties) else None


def _terminate(state: BrokerState, timeout: float, child: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the broker (a clean shutdown), then SIGKILL it if it outlives `timeout`."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        if not _alive(state.pid, state.properties):
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, sig)
        deadline = time.monotonic() + wait
        while _alive(state.pid, state.properties) and time.monotonic() < deadline:
            time.sleep(0.1)
    if child is not None:  # reap our own child, or it lingers as a zombie
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5.0)
    if _alive(state.pid, state.properties):
        raise KafkaBrokerError(f"broker pid {state.pid} survived SIGKILL")


def stop_broker(data_dir: Path, timeout: float = 30.0) -> BrokerState | None:
    """Stop the broker recorded in `data_dir` by its pid; return it if it was running."""
    state = read_state(data_dir)
    running = state is not None and _alive(state.pid, state.properties)
    if state is not None and running:
        _terminate(state, timeout, None)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    return state if running else None


def _log_tail(data_dir: Path, lines: int = 30) -> str:
    parts = []
    for path in (data_dir / "broker.log", data_dir / "broker.out"):
        if path.is_file() and path.stat().st_size:
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path} (last {len(tail)} lines) ---\n" + "\n".join(tail))
    return "\n".join(parts) or f"(no broker log in {data_dir})"


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        if not (chunk := sock.recv(size - len(data))):
            raise ConnectionError("connection closed")
        data += chunk
    return data


def kafka_api_ready(bootstrap: str, timeout: float = 2.0) -> bool:
    """Whether the broker answers a real Kafka Metadata request (v4) that lists a broker.

    An open port is not enough: the broker lists itself only once it has caught up with the
    controller and been unfenced, so produce and consume work from then on.
    """
    host, _, port = bootstrap.rpartition(":")
    client = b"runwatch-ready"
    # header: api key 3 (Metadata), version 4, correlation id, client id; body: no topics,
    # no auto-creation.
    request = struct.pack(">hhih", 3, 4, 7, len(client)) + client + struct.pack(">ib", 0, 0)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            response = _read(sock, struct.unpack(">i", _read(sock, 4))[0])
        correlation, _throttle, brokers = struct.unpack_from(">iii", response)
    except (OSError, struct.error):
        return False
    return bool(correlation == 7 and brokers > 0)


def _configure(data: Path, port: int, controller: int, extra: str = "") -> Path:
    """Write the broker's and log4j's settings into `data`; return the broker's."""
    props = data / "server.properties"
    props.write_text(
        _SERVER_PROPERTIES.format(port=port, controller=controller, logs=data / "logs") + extra
    )
    (data / "log4j2.properties").write_text(_LOG4J2_PROPERTIES.format(log=data / "broker.log"))
    return props


def consumer_groups(bootstrap: str, *args: str, version: str = DEFAULT_VERSION) -> str:
    """What Kafka's own kafka-consumer-groups tool prints (e.g. `--describe --group G`: each
    partition's committed offset, end and lag), run from the local jars."""
    java = shutil.which("java")
    if java is None:
        raise KafkaBrokerError("`java` (17 or newer) is not on PATH")
    lib = fetch_jars(version)
    cmd = [java, "-Xmx256m", "-cp", f"{lib}{os.sep}*",
           "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
           "--bootstrap-server", bootstrap, *args]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    if result.returncode != 0:
        raise KafkaBrokerError(f"kafka-consumer-groups failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def _run_java(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise KafkaBrokerError(f"{' '.join(cmd[3:5])} failed:\n{result.stdout}{result.stderr}")


class KafkaBroker:
    """One local KRaft broker: `with KafkaBroker() as broker: use(broker.bootstrap)`.

    Without `data_dir` it lives in a fresh temporary folder that `stop()` removes. `detach=True`
    (the CLI) gives the JVM its own session so that it outlives this process; otherwise it stays
    in our process group, and a Ctrl-C reaches it too. `secure=True` adds SASL_SSL,
    SASL_PLAINTEXT and mutual-TLS listeners (`runwatch.dev.tls`), described by `secured`.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int | None = None,
        version: str = DEFAULT_VERSION,
        heap: str = "512m",
        detach: bool = False,
        startup_timeout: float = 120.0,
        progress: Progress = _say,
        secure: bool = False,
    ) -> None:
        self.secure = secure
        self.secured: SecuredListeners | None = None
        self._temporary = data_dir is None
        self.data_dir = Path(data_dir).resolve() if data_dir else None
        self.port, self.version, self.heap = port, version, heap
        self.detach, self.startup_timeout, self.progress = detach, startup_timeout, progress
        self.state: BrokerState | None = None
        self._child: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """`127.0.0.1:PORT`, for `bootstrap_servers=`; only once started."""
        if self.state is None:
            raise KafkaBrokerError("broker not started")
        return self.state.bootstrap

    def start(self) -> str:
        """Fetch the jars if needed, format storage once, start the JVM, wait for the Kafka API."""
        if self.state is not None:
            return self.state.bootstrap
        java = shutil.which("java")
        if java is None:
            raise KafkaBrokerError("`java` (17 or newer) is not on PATH")
        lib = fetch_jars(self.version, progress=self.progress)
        data = self.data_dir = self.data_dir or Path(tempfile.mkdtemp(prefix="runwatch-kafka-"))
        data.mkdir(parents=True, exist_ok=True)
        if (running := is_running(data)) is not None:
            raise KafkaBrokerError(f"{data} already has a broker at {running.bootstrap}")
        port = self.port = self.port or free_port()  # a restart keeps the address
        while (controller := free_port()) == port:
            pass
        extra, users = "", []
        if self.secure:
            try:
                self.secured = SecuredListeners.prepare(data / "tls", free_port)
            except SecureSetupError as err:
                raise KafkaBrokerError(str(err)) from None
            extra, users = self.secured.properties(port, controller), self.secured.format_args()
        props = _configure(data, port, controller, extra)
        classpath = f"{lib}{os.sep}*"
        if not (data / "logs" / "meta.properties").is_file():
            _run_java([java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t",
                       _cluster_id(), "-c", str(props), *users])  # fmt: skip
        cmd = [java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC",
               "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={data / 'log4j2.properties'}",
               "-cp", classpath, "kafka.Kafka", str(props)]  # fmt: skip
        self.progress(f"starting Kafka {self.version} on 127.0.0.1:{port} (data in {data})")
        started = time.monotonic()
        with open(data / "broker.out", "ab") as out:
            self._child = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=data, start_new_session=self.detach,
            )  # fmt: skip
        bootstrap = f"127.0.0.1:{port}"
        self.state = BrokerState(self._child.pid, bootstrap, self.version, str(props), time.time())
        (data / STATE_FILE).write_text(json.dumps(asdict(self.state), indent=2) + "\n")
        try:
            self._wait_ready(data, started)
        except BaseException:
            self.stop()
            raise
        self.progress(f"Kafka ready at {bootstrap} after {time.monotonic() - started:.1f}s")
        return bootstrap

    def _wait_ready(self, data: Path, started: float) -> None:
        assert self._child is not None
        while not kafka_api_ready(self.bootstrap):
            if self._child.poll() is not None:
                why = f"Kafka exited with status {self._child.returncode} while starting"
                raise KafkaBrokerError(f"{why}\n{_log_tail(data)}")
            if time.monotonic() - started > self.startup_timeout:
                why = f"Kafka did not answer on {self.bootstrap} in {self.startup_timeout:.0f}s"
                raise KafkaBrokerError(f"{why}\n{_log_tail(data)}")
            time.sleep(0.25)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop our JVM by its pid (SIGTERM, then SIGKILL); remove a temporary data dir."""
        if self.state is None or self.data_dir is None:
            return
        _terminate(self.state, timeout, self._child)
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)
        self.state = self._child = None
        if self._temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _previous_port(data: Path) -> int | None:
    """The client port of the last start from `data` if nothing listens there now, so that a
    restarted dev broker keeps its address (and `RUNWATCH_KAFKA` stays right)."""
    with contextlib.suppress(OSError, ValueError, IndexError), socket.socket() as probe:
        for line in (data / "server.properties").read_text().splitlines():
            if line.startswith("advertised.listeners="):
                port = int(line.rsplit(":", 1)[1])
                return port if probe.connect_ex(("127.0.0.1", port)) != 0 else None
    return None

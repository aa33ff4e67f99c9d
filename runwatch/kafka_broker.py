"""A real single-node Apache Kafka broker (KRaft) for development and integration tests.

The machines this project runs on have no Docker, so the broker is the pinned Kafka jar and its
runtime dependencies, fetched once from Maven Central with `mvn` into a git-ignored cache, run
by the local `java` as one combined broker+controller on 127.0.0.1.

Kafka 4.1 is pinned: both clients the project uses (kafka-python in the emitters, aiokafka under
faust-streaming in the stream core) produce and consume against it, as
tests/integration/test_kafka_broker.py shows.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType

from runwatch.kafka_secure import SecuredListeners, SecureSetupError

DEFAULT_VERSION = "4.1.2"
# kafka_2.13's pom brings slf4j-api 1.7 and log4j-core but no binding between them; Kafka's
# own distribution ships this one. Without it the broker would log nothing at all.
LOG4J_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
STATE_FILE = "broker.json"
MARKER = ".complete"
DATA_HELP = "the broker's data, log and state folder"

Progress = Callable[[str], None]

_DEPENDENCY = "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version>"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>local.runwatch</groupId><artifactId>kafka-broker</artifactId><version>1</version>
<dependencies>{}</dependencies></project>
"""
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


class KafkaBrokerError(RuntimeError):
    """The broker could not be fetched, started or stopped; the message says why."""


def _say(message: str) -> None:
    print(f"[kafka] {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """The project cache: `$RUNWATCH_CACHE`, else `<repo>/.cache` (git-ignored), else ~/.cache."""
    if env := os.environ.get("RUNWATCH_CACHE"):
        return Path(env).expanduser().resolve()
    repo = Path(__file__).resolve().parents[1]
    if (repo / "pyproject.toml").is_file():
        return repo / ".cache"
    return Path.home() / ".cache" / "runwatch"


def default_data_dir() -> Path:
    """Where `runwatch kafka start` keeps the broker's data, log and state by default."""
    return cache_dir() / "kafka" / "data"


def _jars_complete(lib: Path) -> bool:
    marker = lib / MARKER
    names = marker.read_text().split() if marker.is_file() else []
    return bool(names) and all((lib / name).is_file() for name in names)


def fetch_jars(
    version: str = DEFAULT_VERSION, cache: Path | None = None, progress: Progress = _say
) -> Path:
    """Return the folder holding Kafka `version` and its runtime jars, fetching them once.

    A marker file lists the jars of a complete fetch, so later starts need neither Maven nor
    the network; a file lock keeps concurrent first starts from fetching twice.
    """
    root = (cache or cache_dir()) / "kafka"
    lib = root / version / "lib"
    if _jars_complete(lib):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaBrokerError(f"Kafka {version} is not in {lib} and `mvn` is not on PATH")
    (root / version).mkdir(parents=True, exist_ok=True)
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _jars_complete(lib):
            return lib
        pom, tmp, repo = root / version / "pom.xml", root / version / "lib.partial", root / "m2"
        deps = [("org.apache.kafka", "kafka_2.13", version), tuple(LOG4J_SLF4J.split(":"))]
        pom.write_text(_POM.format("".join(_DEPENDENCY.format(*d) + "</dependency>" for d in deps)))
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [mvn, "-B", "-q", f"-Dmaven.repo.local={repo}", "-f", str(pom)]
        cmd += [f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={tmp}"]
        cmd += ["-DincludeScope=runtime"]
        progress(f"fetching Kafka {version} jars with Maven into {root} (first use only)")
        started = time.monotonic()
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-20:]
            raise KafkaBrokerError("Maven could not fetch the Kafka jars:\n" + "\n".join(tail))
        jars = sorted(p.name for p in tmp.glob("*.jar"))
        (tmp / MARKER).write_text("\n".join(jars) + "\n")
        shutil.rmtree(lib, ignore_errors=True)
        tmp.rename(lib)
        progress(f"fetched {len(jars)} jars in {time.monotonic() - started:.1f}s")
    return lib


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


def _run_java(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise KafkaBrokerError(f"{' '.join(cmd[3:5])} failed:\n{result.stdout}{result.stderr}")


class KafkaBroker:
    """One local KRaft broker: `with KafkaBroker() as broker: use(broker.bootstrap)`.

    Without `data_dir` it lives in a fresh temporary folder that `stop()` removes. `detach=True`
    (the CLI) gives the JVM its own session so that it outlives this process; otherwise it stays
    in our process group, and a Ctrl-C reaches it too. `secure=True` adds SASL_SSL,
    SASL_PLAINTEXT and mutual-TLS listeners (`runwatch.kafka_secure`), described by `secured`.
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


def _cmd_start(args: argparse.Namespace) -> int:
    data = Path(args.data).resolve()
    if (running := is_running(data)) is not None:
        _say(f"already running from {data} (pid {running.pid})")
        print(running.bootstrap)
        return 0
    broker = KafkaBroker(
        data,
        args.port or _previous_port(data),
        args.kafka_version,
        detach=True,
        startup_timeout=args.timeout,
        secure=args.secure,
    )
    try:
        bootstrap = broker.start()
    except KafkaBrokerError as err:
        print(f"runwatch kafka start: {err}", file=sys.stderr)
        return 1
    broker._child = None  # the JVM is meant to outlive us: don't wait on it
    if broker.secured is not None:
        _say(f"secured listeners: {broker.secured.describe()}")
    print(bootstrap)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    try:
        stopped = stop_broker(Path(args.data).resolve(), timeout=args.timeout)
    except KafkaBrokerError as err:
        print(f"runwatch kafka stop: {err}", file=sys.stderr)
        return 1
    print(f"stopped {stopped.bootstrap} (pid {stopped.pid})" if stopped else "not running")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = is_running(Path(args.data).resolve())
    if state is None:
        print("not running")
        return 1
    print(f"running {state.bootstrap} (pid {state.pid}, Kafka {state.version})")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `runwatch kafka start|stop|status` to the console script."""
    kafka = subparsers.add_parser("kafka", help="a local Kafka broker for development and tests")
    sub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION")
    sub.required = True

    start = sub.add_parser("start", help="start a broker in the background; print its address")
    start.add_argument("--port", type=int, help="client port (default: a free one)")
    start.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    start.add_argument("--version", dest="kafka_version", default=DEFAULT_VERSION,
                       help=f"Apache Kafka version (default {DEFAULT_VERSION})")  # fmt: skip
    start.add_argument("--timeout", type=float, default=120.0, help="startup timeout, seconds")
    start.add_argument("--secure", action="store_true",
                       help="also SASL_SSL, SASL_PLAINTEXT and mutual-TLS listeners, with a "
                       "throwaway CA and a SCRAM/PLAIN user (files under DATA/tls)")  # fmt: skip
    start.set_defaults(func=_cmd_start)

    stop = sub.add_parser("stop", help="stop the broker of --data by its recorded pid")
    stop.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL")
    stop.set_defaults(func=_cmd_stop)

    status = sub.add_parser("status", help="say whether the broker of --data runs, and where")
    status.add_argument("--data", default=str(default_data_dir()), help=DATA_HELP)
    status.set_defaults(func=_cmd_status)

"""The Kafka jars the dev broker runs: the pinned release and its runtime dependencies, fetched
once from Maven Central with `mvn` into a git-ignored cache.

Kafka 4.1 is pinned: both clients the project uses (kafka-python in the emitters, aiokafka in
the stream core) produce and consume against it, as tests/integration/test_kafka_broker.py
shows. A second start with the jars cached runs no Maven and needs no network.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runwatch.emitters import env
from runwatch.exceptions import KafkaBrokerError

DEFAULT_VERSION = "4.1.2"
# kafka_2.13's pom brings slf4j-api 1.7 and log4j-core but no binding between them; Kafka's
# own distribution ships this one. Without it the broker would log nothing at all.
LOG4J_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MARKER = ".complete"

Progress = Callable[[str], None]


_DEPENDENCY = "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version>"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>local.runwatch</groupId><artifactId>kafka-broker</artifactId><version>1</version>
<dependencies>{}</dependencies></project>
"""


def _say(message: str) -> None:
    print(f"[kafka] {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """The project cache: `$RUNWATCH_CACHE`, else `<repo>/.cache` (git-ignored), else ~/.cache."""
    if cache := env.get(env.CACHE):
        return Path(cache).expanduser().resolve()
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        return repo / ".cache"
    return Path.home() / ".cache" / "runwatch"


#: Beside the broker: Kafka's own tools (kafka-consumer-groups and friends), to check that
#: what runwatch leaves in the cluster reads right with them.
TOOLS = "kafka-tools"


def _jars_complete(lib: Path, version: str) -> bool:
    marker = lib / MARKER
    names = marker.read_text().split() if marker.is_file() else []
    wanted = f"{TOOLS}-{version}.jar"  # a cache from before the tools were fetched: again
    return wanted in names and all((lib / name).is_file() for name in names)


def fetch_jars(
    version: str = DEFAULT_VERSION, cache: Path | None = None, progress: Progress = _say
) -> Path:
    """Return the folder holding Kafka `version` and its runtime jars, fetching them once.

    A marker file lists the jars of a complete fetch, so later starts need neither Maven nor
    the network; a file lock keeps concurrent first starts from fetching twice.
    """
    root = (cache or cache_dir()) / "kafka"
    lib = root / version / "lib"
    if _jars_complete(lib, version):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaBrokerError(f"Kafka {version} is not in {lib} and `mvn` is not on PATH")
    (root / version).mkdir(parents=True, exist_ok=True)
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _jars_complete(lib, version):
            return lib
        pom, tmp, repo = root / version / "pom.xml", root / version / "lib.partial", root / "m2"
        deps = [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", TOOLS, version),
                tuple(LOG4J_SLF4J.split(":"))]  # fmt: skip
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

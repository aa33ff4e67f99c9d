"""Fixtures of the store tests: histories on temp files, filled the way users fill them.

The histories every test only reads (`incident_db`, `fleet_db`) take seconds to ingest:
each is built once a session, by the first of xdist's workers to ask, and read by all."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from runwatch.dev import scenarios
from runwatch.store import Store
from runwatch.store.ingest import ingest


def lines_of(events: list[dict[str, Any]], source: str = "test") -> list[tuple[str, int, bytes]]:
    return [(source, i, orjson.dumps(e)) for i, e in enumerate(events, 1)]


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens writers on one temp file (the contract suite runs against this implementation)."""
    opened: list[Store] = []

    def make() -> Store:
        store = Store.writer(tmp_path / "history.duckdb")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: Callable[[], Store]) -> Store:
    return store_factory()


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The file `name` in the session's temp directory (above each xdist worker's own),
    built there by the first process to ask; the others wait for it, then read it."""
    shared = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    path, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        if not done.exists():
            for partial in (path, path.with_name(f"{name}.wal")):  # of a build that failed
                partial.unlink(missing_ok=True)
            build(path)
            done.touch()
    return path


def _ingest_scenarios(path: Path) -> None:
    for name, build in scenarios.SCENARIOS.items():
        ingest(lines_of(build(), name), path)


@pytest.fixture(scope="session")
def incident_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bundled scenario ingested (events and the default rules' transitions)."""
    return built_once(tmp_path_factory, "incidents.duckdb", _ingest_scenarios)


@pytest.fixture(scope="module")
def incident_store(incident_db: Path) -> Iterator[Store]:
    """A reader on `incident_db`, shared by a module's tests (they only query it)."""
    with Store.reader(incident_db) as store:
        yield store


#: the small fleet the fleet tests ingest (`fleet_db`)
FLEET = {"runs": 12, "node_runs": 3, "coincident": 0, "duration": 1500.0}


def _ingest_fleet(path: Path) -> None:
    from runwatch.dev.fleet import fleet_cluster

    cluster, _ = fleet_cluster(**FLEET)  # type: ignore[arg-type]
    ingest(lines_of(list(cluster.events(1_773_496_800.0)), "fleet"), path)


@pytest.fixture(scope="session")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small fleet (12 runs, a third on each reward server, one server hangs, 3 whose
    rollout node dies) ingested: its fleet incidents judged as replay judges them."""
    return built_once(tmp_path_factory, "fleet.duckdb", _ingest_fleet)

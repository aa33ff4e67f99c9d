"""Fixtures of the store tests: histories on temp files, filled the way users fill them."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def incident_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bundled scenario ingested (events and the default rules' transitions)."""
    path = tmp_path_factory.mktemp("store") / "incidents.duckdb"
    for name, build in scenarios.SCENARIOS.items():
        ingest(lines_of(build(), name), path)
    return path


@pytest.fixture
def incident_store(incident_db: Path) -> Iterator[Store]:
    with Store.reader(incident_db) as store:
        yield store


#: the small fleet the fleet tests ingest (`fleet_db`)
FLEET = {"runs": 12, "node_runs": 3, "coincident": 0, "duration": 1500.0}


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small fleet (12 runs, a third on each reward server, one server hangs, 3 whose
    rollout node dies) ingested: its fleet incidents judged as replay judges them."""
    from runwatch.dev.fleet import fleet_cluster

    cluster, _ = fleet_cluster(**FLEET)  # type: ignore[arg-type]
    path = tmp_path_factory.mktemp("fleet") / "fleet.duckdb"
    ingest(lines_of(list(cluster.events(1_773_496_800.0)), "fleet"), path)
    return path

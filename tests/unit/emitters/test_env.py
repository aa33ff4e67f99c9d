"""The environment's one reader: where events go, in which order, and the history's default."""

from __future__ import annotations

import pytest

from runwatch.emitters import env
from runwatch.emitters.env import Destination


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (env.KAFKA, env.URL, env.SPOOL, env.DB):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_kafka_wins_over_the_url_and_the_url_over_the_spool(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.SPOOL, "/spool")
    assert env.destination() == Destination(spool="/spool")
    clean.setenv(env.URL, "http://h:8787")
    assert env.destination() == Destination(url="http://h:8787")
    clean.setenv(env.KAFKA, "k:9092")
    assert env.destination() == Destination(kafka="k:9092")


def test_a_destination_given_wins_over_the_environment(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.KAFKA, "k:9092")
    assert env.destination(url="http://h:8787") == Destination(url="http://h:8787")
    assert env.destination(spool="/s") == Destination(spool="/s")
    assert env.destination(kafka="a:1", url="http://h") == Destination(kafka="a:1")


def test_empty_variables_count_as_unset(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.KAFKA, "")
    clean.setenv(env.URL, "")
    assert not env.destination()
    clean.setenv(env.DB, "")
    assert env.db() == "runwatch.duckdb"


def test_the_history_file(clean: pytest.MonkeyPatch) -> None:
    assert env.db() == "runwatch.duckdb"
    clean.setenv(env.DB, "/data/h.duckdb")
    assert env.db() == "/data/h.duckdb"
    assert env.db("given.duckdb") == "given.duckdb"
